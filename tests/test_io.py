"""One definition each (issue 42): the token table, the reverse complement, the region parser,
the FASTA reader and the table reader live in `goatdna.io`; a second copy anywhere else in goatdna
fails here.

Issue 42 found two token tables (one raising on non-DNA, one mapping it silently to N), three
reverse complements and two ``parse_region`` with different conventions. They drifted because
nothing stopped a module from writing its own; this scan does. The same issue found four ways
into a FASTA (pyfaidx.Faidx in data_prep, pyfaidx.Fasta in generate, Biopython for sequence
tables, a hand-written ``startswith(b">")`` loop in make-variant-task) and three CSV/Parquet
readers (the sequence tables, score-variants' tables, eval-variants' own); `READERS` below fails
on a fifth or a fourth.

The package scanned is the imported ``goatdna`` (``goatdna.__file__``), so running this file with
another checkout first on ``PYTHONPATH`` checks that tree.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import goatdna

PACKAGE = Path(goatdna.__file__).resolve().parent

CONCEPTS = {
    "reverse complement": re.compile(r"complement|^_?RC_TABLE$", re.IGNORECASE),
    "token table": re.compile(r"^_?(TOKEN_TABLE|TOKEN_OF|BYTE_LUT)$"),
    "region parser": re.compile(r"^_?parse_\w*region|^Region$"),
    "BED reader": re.compile(r"^(read_bed_intervals|BedInterval)$"),
}
"""Names (functions, module constants) that define one of the consolidated concepts.

Consolidated into goatdna/io/tokens.py: data_prep/tokens.py (TOKEN_TABLE, BYTE_LUT, COMPLEMENT,
reverse_complement_tokens), data_prep/tables.py (reverse_complement, reverse_complement_text,
_RC_TABLE), inference/variants.py (_TOKEN_OF, reverse_complement) and the inline complements of
training/windows.py, inference/tracks.py and data_prep/synthetic.py (now calls).
Consolidated into goatdna/io/regions.py: inference/tracks.py (Region, parse_region) and
analysis/generate.py (parse_region, now ``parse_region(..., whole_contig=True)``), and
data_prep/tables.py's BED reader (read_bed_intervals, BedInterval), which score-track, embed,
the task tables and prepare's --split-bed all read through.
"""

ALLOWED = {
    # torch side of the boundary: model is torch-only and ships verbatim with `goatdna export`,
    # so it cannot import numpy's io; tests/test_tokens.py pins these equal to io's table.
    ("model/vocab.py", "COMPLEMENT"),
    ("model/classifier.py", "COMPLEMENT_TOKENS"),
    ("model/classifier.py", "reverse_complement_padded"),  # padded torch batches, from vocab
    # one-hot is another representation; its channel map is built from io's COMPLEMENT
    ("inference/attribute.py", "_ONEHOT_COMPLEMENT"),
    ("inference/attribute.py", "reverse_complement_onehot"),
}


def _definitions(tree: ast.Module) -> list[tuple[str, int]]:
    """Functions and classes at any depth and module-level assigned names: what a second copy
    would be."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.append((node.name, node.lineno))
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    found.append((name.id, node.lineno))
    return found


def _maketrans_calls(tree: ast.Module) -> list[int]:
    """``str.maketrans`` / ``bytes.maketrans``: how a text complement table gets written."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "maketrans"
    ]


def _is_reversal(node: ast.AST) -> bool:
    """``[::-1]`` (or ``[..., ::-1]``) somewhere in ``node``."""
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Slice)
            and isinstance(sub.step, ast.UnaryOp)
            and isinstance(sub.step.op, ast.USub)
            and isinstance(sub.step.operand, ast.Constant)
            and sub.step.operand.value == 1
        ):
            return True
    return False


def _inline_reverse_complements(tree: ast.Module) -> list[int]:
    """``COMPLEMENT[x[::-1]]`` or ``COMPLEMENT[x][::-1]``: a reverse complement written inline
    (training windows, score-track's reverse strand and the synthetic genome each had one)."""

    def is_table(node: ast.AST) -> bool:
        name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
        return "COMPLEMENT" in str(name).upper()

    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Subscript):
            continue
        inline = is_table(node.value) and _is_reversal(node.slice)
        outer = isinstance(node.value, ast.Subscript) and is_table(node.value.value)
        if inline or (outer and _is_reversal(node.slice)):
            lines.append(node.lineno)
    return lines


def scan(package: Path) -> tuple[list[str], set[tuple[str, str]]]:
    """(offending definitions outside goatdna/io, allowed definitions seen)."""
    offenders: list[str] = []
    seen: set[tuple[str, str]] = set()
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel.startswith("io/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for name, line in _definitions(tree):
            for concept, pattern in CONCEPTS.items():
                if not pattern.search(name):
                    continue
                if (rel, name) in ALLOWED:
                    seen.add((rel, name))
                else:
                    offenders.append(f"goatdna/{rel}:{line}: {name} ({concept})")
        offenders += [
            f"goatdna/{rel}:{line}: maketrans (text table)" for line in _maketrans_calls(tree)
        ]
        offenders += [
            f"goatdna/{rel}:{line}: inline reverse complement"
            for line in _inline_reverse_complements(tree)
        ]
    return offenders, seen


def test_each_concept_is_defined_only_in_goatdna_io() -> None:
    offenders, _ = scan(PACKAGE)
    assert not offenders, "defined outside goatdna/io (import it from there):\n" + "\n".join(
        offenders
    )


def test_the_allowed_exceptions_still_exist() -> None:
    """An exception that no longer exists is removed from ALLOWED, so the list stays true."""
    _, seen = scan(PACKAGE)
    assert seen == ALLOWED


def test_io_holds_the_one_definitions() -> None:
    from goatdna.io import regions, tokens

    for name in ("TOKEN_TABLE", "BYTE_LUT", "COMPLEMENT", "encode", "reverse_complement"):
        assert hasattr(tokens, name), name
    for name in ("Region", "parse_region", "read_bed_intervals", "BedInterval"):
        assert hasattr(regions, name), name


def test_region_forms_each_command_accepted_are_kept() -> None:
    """One parser, one switch: the strings each command accepted before issue 42 still parse the
    same, and the ones it refused are still refused (with its own message)."""
    from goatdna.errors import GoatDNAError
    from goatdna.io.regions import Region, parse_region

    # score-track / mutagenesis / attention: a span is required, digits and commas only
    assert parse_region(" 20: 5-9 ") == Region("20", 4, 9)
    for text in ("20", "20:5 - 9", "20:+5-9", "20:1_000-2_000"):
        with pytest.raises(GoatDNAError, match="expected contig:start-end"):
            parse_region(text)
    # generate's prompt: a bare contig is the whole record; numbers are read with int()
    assert parse_region("20", whole_contig=True) == "20"
    assert parse_region("20:5 - 9", whole_contig=True) == Region("20", 4, 9)
    assert parse_region("20:+5-1_000", whole_contig=True) == Region("20", 4, 1000)
    assert parse_region("c,hr2:1-3", whole_contig=True) == Region("chr2", 0, 3)
    with pytest.raises(GoatDNAError, match="integer start and end"):
        parse_region("20:5", whole_contig=True)


# ---------------------------------------------------------------------------------------------
# file readers: FASTA only in io/fasta.py, CSV/TSV/Parquet only in io/tables.py

READER_HOMES = {"fasta": "io/fasta.py", "table": "io/tables.py"}

READER_ALLOWED = {
    # a run's own metrics.csv (written by goatdna's logger), not a user table
    ("training/loop.py", "table", "DictReader"),
    ("analysis/report_runs.py", "table", "read_csv"),
}

_TABLE_CALLS = {"read_csv", "read_parquet", "read_feather", "read_excel", "DictReader"}


def _reader_uses(tree: ast.Module) -> list[tuple[str, str, int]]:
    """(kind, what, line) for each way of opening a FASTA or a table: pyfaidx or Biopython's
    FASTA parser imported, ``Fasta(``/``Faidx(`` called, a ``startswith(">")`` header test;
    pandas' and csv's table readers called."""
    found: list[tuple[str, str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "pyfaidx" or alias.name.startswith("Bio.SeqIO"):
                    found.append(("fasta", alias.name, node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] == "pyfaidx" or node.module.startswith("Bio.SeqIO"):
                found.append(("fasta", node.module, node.lineno))
            if node.module.split(".")[0] in ("pandas", "pyarrow") and any(
                a.name.startswith("read_") for a in node.names
            ):
                found.append(("table", node.module, node.lineno))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            owner = getattr(getattr(func, "value", None), "id", "")
            if name in ("Fasta", "Faidx"):
                found.append(("fasta", name, node.lineno))
            if (
                name == "startswith"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in (">", b">")
            ):
                found.append(("fasta", "startswith('>')", node.lineno))
            if name in _TABLE_CALLS or (name == "reader" and owner == "csv"):
                found.append(("table", name, node.lineno))
            if name == "read_table" and owner in ("pd", "pandas", "pq", "parquet"):
                found.append(("table", name, node.lineno))
    return found


def reader_scan(package: Path) -> tuple[list[str], set[tuple[str, str, str]]]:
    """(reads outside their io home, allowed reads seen)."""
    offenders: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for kind, what, line in _reader_uses(tree):
            if rel == READER_HOMES[kind]:
                continue
            if (rel, kind, what) in READER_ALLOWED:
                seen.add((rel, kind, what))
            else:
                offenders.append(f"goatdna/{rel}:{line}: {what} ({kind} reader)")
    return offenders, seen


def test_fasta_and_tables_are_read_only_in_goatdna_io() -> None:
    offenders, _ = reader_scan(PACKAGE)
    assert not offenders, (
        "reads a FASTA or a table outside goatdna/io/fasta.py and goatdna/io/tables.py "
        "(use those):\n" + "\n".join(offenders)
    )


def test_the_allowed_readers_still_exist() -> None:
    _, seen = reader_scan(PACKAGE)
    assert seen == READER_ALLOWED


def test_the_reader_scan_finds_each_kind_of_second_reader() -> None:
    """The scan itself: each way a second reader was written before issue 42 is caught."""
    samples = {
        "from pyfaidx import Fasta\nf = Fasta(path)": {"pyfaidx", "Fasta"},
        "import pyfaidx\npyfaidx.Faidx(p)": {"pyfaidx", "Faidx"},
        "from Bio.SeqIO.FastaIO import SimpleFastaParser": {"Bio.SeqIO.FastaIO"},
        "if line.startswith(b'>'):\n    pass": {"startswith('>')"},
        "pd.read_csv(p, sep='\\t')": {"read_csv"},
        "pd.read_parquet(p)": {"read_parquet"},
        "rows = list(csv.reader(fh))": {"reader"},
        "from pandas import read_csv": {"pandas"},
    }
    for source, expected in samples.items():
        assert {what for _k, what, _l in _reader_uses(ast.parse(source))} == expected, source
