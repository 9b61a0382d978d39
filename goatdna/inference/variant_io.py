"""VCF in, variant scores out: reading alleles with pysam and writing .tsv, .parquet or .vcf.gz.

Every ALT allele of the input becomes one output row, in input order. The ``.vcf.gz`` output is
the input VCF itself with one INFO field added (``GOATDNA_LLR``, Number=A, Float: the ``llr`` of
each ALT, ``.`` where the allele was not scored), bgzipped and tabix-indexed, so it drops into
bcftools/IGV pipelines. All outputs are written to a temporary name and renamed when complete
(`goatdna.atomic.atomic_path`).
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from goatdna.atomic import atomic_path
from goatdna.errors import GoatDNAError
from goatdna.inference.variants import Allele
from goatdna.io.tables import read_frame

if TYPE_CHECKING:
    import pandas as pd

OUTPUT_SUFFIXES = (".tsv", ".parquet", ".vcf.gz")
COLUMNS = (
    "chrom",
    "pos",
    "id",
    "ref",
    "alt",
    "llr",
    "llr_fwd",
    "llr_rev",
    "ll_ref",
    "ll_alt",
    "window_start",
    "window_end",
    "scored_strands",
    "status",
)
INFO_ID = "GOATDNA_LLR"
RESUME_THEN = "rerun with --resume to continue score-variants"
"""A full disk while the output is written: the scored chunks are kept in the work folder."""
INFO_DESCRIPTION = (
    "goatdna log-likelihood ratio LL(alt window) - LL(ref window) per ALT allele, "
    "averaged over strands; missing where the allele was not scored"
)
FLOAT_FORMAT = "%.6f"


def output_kind(path: Path) -> str:
    """'tsv', 'parquet' or 'vcf.gz' from the --out name (`goatdna.formats.output_format`)."""
    from goatdna.formats import output_format

    kind = output_format(path, OUTPUT_SUFFIXES).suffix[1:]
    if kind == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise GoatDNAError(
                f"--out {path}: writing .parquet needs pyarrow (pip install pyarrow); or write .tsv"
            ) from None
    return kind


@dataclass
class VcfAlleles:
    """The alleles of a VCF in input order, and facts about the file needed later."""

    path: Path
    alleles: list[Allele]
    records: int
    sorted: bool
    first_unsorted: str  # "chrom:pos" of the first record out of order ('' when sorted)
    has_symbolic: bool


def _plain_gzip(path: Path) -> bool:
    """True for a gzip file that is not BGZF (bgzip's blocked gzip, which htslib needs to read
    a .vcf.gz): BGZF is gzip whose header carries the extra subfield ``BC``."""
    from goatdna.io.text import detect_compression

    try:
        return detect_compression(path) == "gzip"
    except OSError:
        return False


def open_vcf(path: Path, option: str = "--variants"):
    """A pysam VariantFile, or a one-line user error naming the file (as ``option`` gave it).

    htslib's own log lines (``[E::vcf_parse] ...``, ``[W::...]``) are silenced: goatdna says
    what went wrong in its one ``error:`` line instead.
    """
    import pysam

    if not path.is_file():
        raise GoatDNAError(f"{option} {path}: file not found")
    if _plain_gzip(path):
        raise GoatDNAError(
            f"{option} {path}: compressed with plain gzip, which htslib cannot read; bgzip it "
            f"(zcat {path} | bgzip > OUT.vcf.gz, then tabix OUT.vcf.gz) or pass the "
            "uncompressed file"
        )
    pysam.set_verbosity(0)
    try:
        return pysam.VariantFile(str(path))
    except (ValueError, OSError, NotImplementedError) as err:
        first = str(err).splitlines()[0] if str(err) else err.__class__.__name__
        raise GoatDNAError(
            f"{option} {path}: not a readable VCF/BCF ({first}); pass a VCF (.vcf or bgzipped .vcf.gz)"
        ) from None


def _records(handle, path: Path) -> Iterator:
    """Iterate records, turning htslib parse failures into a user error with the record number."""
    iterator = iter(handle)
    index = 0
    while True:
        try:
            record = next(iterator)
        except StopIteration:
            return
        except (ValueError, OSError) as err:
            raise GoatDNAError(
                f"--variants {path}: record {index + 1} cannot be parsed "
                f"({_diagnose(path, index) or err}); fix or drop it"
            ) from None
        index += 1
        yield record


def _diagnose(path: Path, index: int) -> str:
    """What is wrong with data record ``index`` (0-based), read from the text itself: htslib
    says only "truncated file" for, e.g., a POS that is not a number."""
    import gzip

    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", errors="replace") as handle:
            records = ((n, text) for n, text in enumerate(handle, 1) if not text.startswith("#"))
            found = next(itertools.islice(records, index, None), None)
    except (OSError, EOFError):
        return ""
    if found is None:
        return ""
    number, line = found
    fields = line.rstrip("\n").split("\t")
    where = f"line {number}"
    if len(fields) < 8:
        return f"{where} has {len(fields)} tab-separated columns; a VCF record has at least 8"
    if not fields[1].isdigit():
        return f"{where}: POS {fields[1]!r} is not a whole number"
    return ""


def _out_of_order(chrom: str, pos: int, last: tuple[str, int], seen: set[str]) -> bool:
    """A record before its predecessor: a contig that came back, or a smaller position."""
    if chrom != last[0]:
        return chrom in seen
    return pos < last[1]


def read_alleles(path: Path) -> VcfAlleles:
    """One `Allele` per ALT of every record, in input order (multi-allelic records split)."""
    from goatdna.inference.variants import is_symbolic

    alleles: list[Allele] = []
    seen_contigs: set[str] = set()
    last: tuple[str, int] | None = None
    is_sorted, first_unsorted, has_symbolic = True, "", False
    with open_vcf(path) as handle:
        count = 0
        for count, record in enumerate(_records(handle, path), start=1):
            chrom, pos = record.chrom, record.pos
            if is_sorted and last is not None and _out_of_order(chrom, pos, last, seen_contigs):
                is_sorted, first_unsorted = False, f"{chrom}:{pos}"
            seen_contigs.add(chrom)
            last = (chrom, pos)
            for alt in record.alts or ():
                has_symbolic = has_symbolic or is_symbolic(alt)
                alleles.append(
                    Allele(count - 1, chrom, pos, record.id or ".", record.ref or "", alt)
                )
    return VcfAlleles(path, alleles, count, is_sorted, first_unsorted, has_symbolic)


def check_sorted_for_index(vcf: VcfAlleles, out: Path) -> None:
    """A tabix index needs a position-sorted VCF: refuse early, before any scoring."""
    if not vcf.sorted:
        raise GoatDNAError(
            f"--variants {vcf.path}: records are not sorted by position (first out of order: "
            f"{vcf.first_unsorted}), so {out.name} cannot be tabix-indexed; sort it first "
            "(bcftools sort) or write .tsv/.parquet"
        )


def scored_strands(numbers: dict[str, np.ndarray]) -> list[str | None]:
    """Per allele, which strands its numbers come from: 'both', 'forward', 'reverse' (a
    length-fair indel at a contig end scores only the strand that can be made fair), or None."""
    forward = ~np.isnan(numbers["llr_fwd"])
    reverse = ~np.isnan(numbers["llr_rev"])
    names = {(True, True): "both", (True, False): "forward", (False, True): "reverse"}
    return [names.get((f, r)) for f, r in zip(forward.tolist(), reverse.tolist(), strict=True)]


def results_frame(alleles: Sequence[Allele], numbers: dict[str, np.ndarray], windows, statuses):
    """The output table (pandas) in `COLUMNS` order; window columns are nullable integers."""
    import pandas as pd

    scored = np.array([s == "ok" for s in statuses], dtype=bool)
    frame = pd.DataFrame(
        {
            "chrom": [a.chrom for a in alleles],
            "pos": np.array([a.pos for a in alleles], dtype=np.int64),
            "id": [a.id for a in alleles],
            "ref": [a.ref for a in alleles],
            "alt": [a.alt for a in alleles],
            **{k: numbers[k] for k in ("llr", "llr_fwd", "llr_rev", "ll_ref", "ll_alt")},
            "window_start": pd.array(np.where(scored, windows[:, 0], 0), dtype="Int64"),
            "window_end": pd.array(np.where(scored, windows[:, 1], 0), dtype="Int64"),
            "scored_strands": scored_strands(numbers),
            "status": list(statuses),
        }
    )
    frame.loc[~scored, ["window_start", "window_end"]] = pd.NA
    return frame[list(COLUMNS)]


def write_table(frame, out: Path, kind: str, then: str = RESUME_THEN) -> None:
    """Write the table as TSV (6 decimals, empty = not scored) or Parquet, atomically."""
    with atomic_path(out, then=then) as tmp:
        if kind == "tsv":
            frame.to_csv(tmp, sep="\t", index=False, float_format=FLOAT_FORMAT, na_rep="")
        else:
            frame.to_parquet(tmp, index=False)


def write_vcf(vcf: VcfAlleles, llr: np.ndarray, out: Path, then: str = RESUME_THEN) -> None:
    """The input VCF with INFO/GOATDNA_LLR (Number=A) added; bgzipped, tabix-indexed, atomic."""
    import pysam

    by_record: list[list[float | None]] = [[] for _ in range(vcf.records)]
    for allele, value in zip(vcf.alleles, llr.tolist(), strict=True):
        by_record[allele.record].append(None if math.isnan(value) else value)
    # the VCF is renamed into place first, then its index (the inner block ends first)
    with (
        atomic_path(Path(str(out) + ".tbi"), then=then) as tmp_index,
        atomic_path(out, then=then) as tmp,
    ):
        with open_vcf(vcf.path) as source:
            for _ in _records(source, vcf.path):
                pass  # one pass so that pysam's header learns undeclared contigs/fields
            source.reset()
            header = source.header.copy()
            replacing = INFO_ID in header.info
            if replacing:  # e.g. another model's scores: replaced, and said so
                print(f"note: --variants {vcf.path} already has INFO/{INFO_ID}; {out.name} holds "
                      "this model's values in its place (compare models in .tsv outputs)",
                      file=sys.stderr)  # fmt: skip
                declared = header.info[INFO_ID]
                if (declared.number, declared.type) != ("A", "Float"):
                    header.info.remove_header(INFO_ID)
                    replacing = False
            if not replacing:
                header.info.add(INFO_ID, "A", "Float", INFO_DESCRIPTION)
            if vcf.has_symbolic and "END" not in header.info:
                # htslib writes END for symbolic alleles; declare it so the output stays valid
                header.info.add("END", 1, "Integer", "End position of the variant")
            with pysam.VariantFile(str(tmp), "wz", header=header) as sink:
                for index, record in enumerate(_records(source, vcf.path)):
                    if INFO_ID in record.info:
                        del record.info[INFO_ID]
                    record.translate(sink.header)
                    values = by_record[index]
                    if any(v is not None for v in values):
                        record.info[INFO_ID] = tuple(values)
                    sink.write(record)
        pysam.tabix_index(str(tmp), preset="vcf", force=True, index=str(tmp_index))


# ---------------------------------------------------------------- variant tables

TABLE_SUFFIXES = (".tsv", ".tsv.gz", ".csv", ".csv.gz", ".parquet")
"""Input names read as a table of variants; every other --variants name is read as a VCF/BCF."""

KEY_COLUMNS = ("chrom", "pos", "ref", "alt")
SCORE_COLUMNS = tuple(c for c in COLUMNS if c not in ("chrom", "pos", "id", "ref", "alt"))
"""The columns score-variants adds after a table's own (so a table may not hold them)."""


@dataclass
class TableAlleles:
    """A table of variants (one allele per row, in input order) and the columns it carries."""

    path: Path
    alleles: list[Allele]
    carried: pd.DataFrame  # every column but chrom/pos/ref/alt, their types kept

    @property
    def records(self) -> int:
        return len(self.alleles)


def is_table(path: Path) -> bool:
    """Whether --variants names a table (by suffix) rather than a VCF/BCF."""
    return path.name.lower().endswith(TABLE_SUFFIXES)


def read_variants(path: Path, reserved: Sequence[str] = SCORE_COLUMNS) -> VcfAlleles | TableAlleles:
    """--variants: a table (.tsv/.csv[.gz], .parquet) or a VCF/BCF, chosen by the suffix.

    ``reserved``: the columns this run adds after a table's own (`SCORE_COLUMNS`, and the
    calibration columns with --calibrate); a table that holds one of them is refused."""
    return read_allele_table(path, reserved) if is_table(path) else read_alleles(path)


TEXT_KEYS = ("chrom", "ref", "alt")
MAX_POSITION = 2**53
"""Above every contig (and the largest integer a float holds exactly): a larger pos is an error."""


def _bad_cell(path: Path, frame, column: str, bad, what: str) -> GoatDNAError:
    import pandas as pd

    row = int(np.flatnonzero(np.asarray(bad))[0])
    value = frame[column].iloc[row]
    if isinstance(value, np.generic):
        value = value.item()  # 'nan', not 'np.float64(nan)'
    shown = (
        "the empty cell"
        if value is None or (pd.api.types.is_scalar(value) and pd.isna(value))
        else repr(value)
    )
    return GoatDNAError(
        f"--variants {path}: row {row + 1}, column {column}: {shown} is not {what}; fix or "
        "drop the row (rows count from 1 after the header)"
    )


def _positions(path: Path, frame) -> np.ndarray:
    """``pos`` as int64: whole numbers in 1..`MAX_POSITION` (booleans, inf, 1e20 refused with
    the row; one past its contig's end is the allele's status ``outside_contig``)."""
    import pandas as pd

    pos = frame["pos"]
    if pd.api.types.is_bool_dtype(pos):
        raise _bad_cell(
            path, frame, "pos", np.ones(len(pos), bool), "a position (a true/false column)"
        )
    flags = np.array([isinstance(v, (bool, np.bool_)) for v in pos], dtype=bool)
    if flags.any():
        raise _bad_cell(path, frame, "pos", flags, "a 1-based integer position")
    if pos.dtype == object:
        pos = pos.map(lambda v: v.strip() if isinstance(v, str) else v)
    numeric = pd.to_numeric(pos, errors="coerce")
    if pd.api.types.is_integer_dtype(numeric):  # exact, also for uint64 past int64
        bad = np.asarray((numeric < 1) | (numeric > MAX_POSITION))
    else:
        values = numeric.to_numpy(dtype=np.float64, na_value=np.nan)
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(values) | (values < 1) | (values > MAX_POSITION)
            bad |= np.isfinite(values) & (values != np.floor(values))
    if bad.any():
        raise _bad_cell(path, frame, "pos", bad, "a 1-based integer position (1 to 2^53)")
    return numeric.to_numpy(dtype=np.int64)


def _key_columns(
    path: Path, frame, reserved: Sequence[str] = SCORE_COLUMNS
) -> tuple[list[str], np.ndarray, list[str], list[str]]:
    """chrom, pos (1-based int), ref, alt, each checked row by row."""
    import pandas as pd

    missing = [c for c in KEY_COLUMNS if c not in frame.columns]
    if missing:
        raise GoatDNAError(
            f"--variants {path}: no column {missing[0]!r} (a table needs chrom, pos, ref, alt; "
            f"it has {', '.join(map(str, frame.columns[:8]))})"
        )
    clash = [c for c in frame.columns if c in reserved]
    if clash:
        raise GoatDNAError(
            f"--variants {path}: column {clash[0]!r} is one score-variants writes (its own "
            "values would stand where the scores belong); rename or drop it"
        )
    texts = {}
    for column in ("chrom", "ref", "alt"):
        values = frame[column]
        if pd.api.types.is_integer_dtype(values) and column == "chrom":
            values = values.astype(str)  # chromosome 20 stored as a number
        values = [v.strip() if isinstance(v, str) else v for v in values]  # " chr20 " = chr20
        bad = np.array([not (isinstance(v, str) and v != "") for v in values], dtype=bool)
        if bad.any():
            raise _bad_cell(path, frame, column, bad, "a non-empty text")
        texts[column] = [str(v) for v in values]
    return texts["chrom"], _positions(path, frame), texts["ref"], texts["alt"]


def read_allele_table(path: Path, reserved: Sequence[str] = SCORE_COLUMNS) -> TableAlleles:
    """One `Allele` per row of a chrom/pos/ref/alt table (1-based pos, as GPN and TraitGym use),
    read by the one table reader (`goatdna.io.tables.read_frame`)."""
    frame = read_frame(path, "--variants", TEXT_KEYS)
    chrom, pos, ref, alt = _key_columns(path, frame, reserved)
    alleles = [
        Allele(row, c, int(p), ".", r, a)
        for row, (c, p, r, a) in enumerate(zip(chrom, pos, ref, alt, strict=True))
    ]
    carried = frame.drop(columns=list(KEY_COLUMNS)).reset_index(drop=True)
    return TableAlleles(path, alleles, carried)


def table_results_frame(table: TableAlleles, numbers, windows, statuses):
    """The output of a table input: chrom, pos, ref, alt, the table's own columns (types kept),
    then the score columns of `COLUMNS` (no ``id``: a table's own ``id`` column is carried)."""
    import pandas as pd

    frame = results_frame(table.alleles, numbers, windows, statuses).drop(columns=["id"])
    keys = frame[list(KEY_COLUMNS)]
    return pd.concat([keys, table.carried, frame[list(SCORE_COLUMNS)]], axis=1)


def _info_text(value) -> object:
    """An INFO value as one cell: tuples joined with ',' (CLNSIG may hold several terms)."""
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value if v is not None) or None
    return value


def read_info_labels(path: Path, field: str, option: str = "--labels"):
    """chrom, pos, ref, alt and INFO/``field`` of every ALT allele of a VCF (pandas DataFrame).

    Number=A fields give each ALT its own value, Number=R the value of that ALT, any other
    Number the record's value (tuples joined with ','); a missing value is empty.
    """
    import pandas as pd

    name = field.removeprefix("INFO/")
    rows = []
    with open_vcf(path, option) as handle:
        if name not in handle.header.info:
            known = ", ".join(list(handle.header.info)[:12])
            raise GoatDNAError(
                f"{option} {path}: the header declares no INFO field {name!r} (it has {known})"
            )
        number = handle.header.info[name].number
        for record in _records(handle, path):
            value = record.info.get(name)
            for i, alt in enumerate(record.alts or ()):
                if number in ("A", "R") and isinstance(value, tuple):
                    cell = value[i + (number == "R")] if i + (number == "R") < len(value) else None
                else:
                    cell = _info_text(value)
                rows.append((record.chrom, record.pos, record.ref or "", alt, cell))
    return pd.DataFrame(rows, columns=[*KEY_COLUMNS, field])


def read_scores(path: Path):
    """eval-variants' ``--scores``: a score-variants table (.tsv/.csv[.gz]/.parquet, or any table
    with chrom, pos, ref, alt and the score column), or a .vcf.gz whose INFO/GOATDNA_LLR becomes
    ``llr`` (``status`` ``ok`` where it is set, ``not_scored`` where it is missing)."""
    if is_table(path):
        return read_frame(path, "--scores", TEXT_KEYS)
    frame = read_info_labels(path, INFO_ID, option="--scores").rename(columns={INFO_ID: "llr"})
    frame["llr"] = frame["llr"].astype(float)
    frame["status"] = np.where(frame["llr"].notna(), "ok", "not_scored")
    return frame


def read_labels(path: Path, label: str):
    """eval-variants' ``--labels``: a table read like the scores, or a VCF whose INFO/``label``
    gives each ALT allele its label (`read_info_labels`)."""
    if is_table(path):
        return read_frame(path, "--labels", TEXT_KEYS)
    return read_info_labels(path, label)
