"""One definition each (issue 42): the token table, the reverse complement and the region parser
live in `goatdna.io`; a second copy anywhere else in goatdna fails here.

Issue 42 found two token tables (one raising on non-DNA, one mapping it silently to N), three
reverse complements and two ``parse_region`` with different conventions. They drifted because
nothing stopped a module from writing its own; this scan does.

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
