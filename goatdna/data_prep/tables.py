"""Sequence tables for downstream tasks: CSV, TSV, Parquet, FASTA, or BED intervals over a FASTA.

The one reader of such inputs: `finetune` and `predict` read tables here, `embed` reads its
``--sequences`` and ``--bed`` here, and `score-track` reads its BED regions with
`goatdna.io.regions.read_bed_intervals` (the one BED reader, which this module uses too).

A table is read as columns of strings in file order (nothing is re-typed, so ``predict`` carries
the input columns through exactly as they were written); `SequenceTable.typed_frame` gives the
same columns with types, for outputs that have them (Parquet): a Parquet input's own, and for
text inputs whole numbers as integers and numbers as floats. The ``sequence`` column becomes token
arrays (A C G T N = 0..4; lowercase accepted, IUPAC codes read as N) and the ``label`` column
becomes class indices or floats. Every problem a user can fix (a missing column, an empty
sequence, a character that is not a nucleotide, a missing or non-numeric label, a label column
with one class) is a `GoatDNAError` naming the file, the row and what to do.

This is the GUE / DNABERT-2 and Nucleotide Transformer layout: ``sequence,label`` columns, one
file per split.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from goatdna.errors import GoatDNAError
from goatdna.io.regions import read_bed_intervals
from goatdna.io.text import open_text
from goatdna.io.tokens import BYTE_LUT, INVALID, TOKEN_MASK, reverse_complement_text

if TYPE_CHECKING:
    import pandas as pd

MISSING_LABELS = frozenset({"", "nan", "na", "n/a", "null", "none"})
"""Label cells read as missing (case-insensitive): an error, never a class of their own."""

BED_COLUMNS = ("chrom", "start", "end", "name", "score", "strand")
FIELD_LIMIT = 2**31 - 1
"""The longest CSV/TSV cell read (the C long limit of `csv.field_size_limit` on every platform)."""
FASTA_SUFFIXES = (".fa", ".fasta", ".fna")


@dataclass
class SequenceTable:
    """One input file: its columns (strings, input order) and where each row came from."""

    path: Path
    columns: dict[str, list[str]]
    line_offset: (
        int  # file line of data row 0 (2 for a CSV with a header); 0 when lines don't apply
    )
    row_labels: list[str] | None = None  # how messages name each row, when not by number
    frame: pd.DataFrame | None = None  # a Parquet input's columns with the file's own types

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def where(self, row: int) -> str:
        """``file: row 7 (line 8)``: how messages name a data row (``row`` is 0-based)."""
        if self.row_labels is not None:
            return f"{self.path}: {self.row_labels[row]}"
        line = f" (line {row + self.line_offset})" if self.line_offset else ""
        return f"{self.path}: row {row + 1}{line}"

    def typed_frame(self) -> pd.DataFrame:
        """The columns with types: a Parquet input's as the file has them; a text column as
        int64 when every cell is a whole number written plainly (so it reads back as the same
        text), float64 when every cell is a number (empty = NaN), else strings as written."""
        import pandas as pd

        if self.frame is not None:
            return self.frame.reset_index(drop=True)
        return pd.DataFrame({name: typed_cells(cells) for name, cells in self.columns.items()})

    def column(self, name: str, option: str) -> list[str]:
        if name not in self.columns:
            have = ", ".join(self.columns) or "none"
            raise GoatDNAError(
                f"{self.path}: no column {name!r} (columns: {have}); name the right one with "
                f"{option}"
            )
        return self.columns[name]


_PLAIN_INTEGER = re.compile(r"-?(0|[1-9][0-9]{0,17})")  # fits int64, no leading zeros or '+'
_LEADING_ZERO = re.compile(r"\s*[-+]?0[0-9]")  # "007", "-01.5": an identifier, not a number


def typed_cells(cells: list[str]) -> np.ndarray:
    """int64 if every cell is a plain whole number, float64 if every cell is a number or empty
    (NaN) and one is a number, else the strings unchanged (object array). A cell with a leading
    zero ("007") keeps its column text: as a number it would not read back as written."""
    if cells and all(_PLAIN_INTEGER.fullmatch(c) for c in cells):
        return np.array([int(c) for c in cells], dtype=np.int64)
    numbers = [_as_float(c) if c.strip() else math.nan for c in cells]
    if (
        all(v is not None for v in numbers)
        and any(c.strip() for c in cells)
        and not any(_LEADING_ZERO.match(c) for c in cells)
    ):
        return np.array(numbers, dtype=np.float64)
    return np.array(cells, dtype=object)


def _base_suffix(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    return Path(name).suffix


def read_table(path: str | Path, fasta: str | Path | None = None) -> SequenceTable:
    """Read a CSV/TSV (optionally gzipped), Parquet, FASTA or BED file (BED needs ``fasta``)."""
    path = Path(path)
    if not path.is_file():
        raise GoatDNAError(f"{path}: file not found")
    suffix = _base_suffix(path)
    if suffix == ".bed":
        if fasta is None:
            raise GoatDNAError(f"{path}: a BED file needs --fasta REF to read the sequences from")
        return read_bed_table(path, fasta)
    if suffix in (".parquet", ".pq"):
        return _read_parquet(path)
    if suffix in FASTA_SUFFIXES:
        return _read_fasta(path)
    if suffix not in (".csv", ".tsv", ".txt"):
        raise GoatDNAError(
            f"{path}: unknown table type {suffix or '(no suffix)'!r}; use .csv, .tsv, .parquet, "
            "FASTA (.fa/.fasta/.fna) or .bed (with --fasta)"
        )
    delimiter = "," if suffix == ".csv" else "\t"
    # the csv module caps a field at 131,072 characters; a sequence may be megabases long
    csv.field_size_limit(max(csv.field_size_limit(), FIELD_LIMIT))
    try:
        with open_text(path) as fh:
            rows = list(csv.reader(fh, delimiter=delimiter))
    except (OSError, UnicodeDecodeError, csv.Error, EOFError) as err:
        raise GoatDNAError(f"{path}: cannot read it as a table ({err})") from None
    if not rows or not rows[0]:
        raise GoatDNAError(f"{path}: empty file; expected a header line such as sequence,label")
    header = [h.strip() for h in rows[0]]
    if len(set(header)) != len(header):
        raise GoatDNAError(f"{path}: the header names a column twice ({','.join(header)})")
    body = rows[1:]
    for i, row in enumerate(body):
        if len(row) != len(header):
            raise GoatDNAError(
                f"{path}: row {i + 1} (line {i + 2}) has {len(row)} fields, the header has "
                f"{len(header)}"
            )
    columns = {name: [row[j] for row in body] for j, name in enumerate(header)}
    return SequenceTable(path, columns, line_offset=2)


def _read_parquet(path: Path) -> SequenceTable:
    import pandas as pd

    try:
        frame = pd.read_parquet(path)
    except ImportError as err:
        raise GoatDNAError(
            f"{path}: reading Parquet needs pyarrow (pip install pyarrow) ({err})"
        ) from None
    except Exception as err:  # a foreign or truncated file
        raise GoatDNAError(f"{path}: not a readable Parquet file ({err})") from None
    columns = {
        str(name): ["" if _is_missing(v) else str(v) for v in frame[name].tolist()]
        for name in frame.columns
    }
    return SequenceTable(path, columns, line_offset=0, frame=frame)


def _is_missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _read_fasta(path: Path) -> SequenceTable:
    """FASTA records as columns ``name`` (the title's first word) and ``sequence``."""
    from Bio.SeqIO.FastaIO import SimpleFastaParser

    names: list[str] = []
    sequences: list[str] = []
    try:
        with open_text(path) as handle:
            for title, seq in SimpleFastaParser(handle):
                names.append(
                    title.split(None, 1)[0] if title.strip() else f"record{len(names) + 1}"
                )
                sequences.append(seq)
    except (OSError, UnicodeDecodeError, ValueError, EOFError) as err:
        raise GoatDNAError(f"{path}: cannot read as FASTA ({err})") from None
    if not names:
        raise GoatDNAError(f"{path}: no FASTA records (a record starts with a '>' line)")
    labels = [f"record {name!r} (#{i + 1})" for i, name in enumerate(names)]
    return SequenceTable(path, {"name": names, "sequence": sequences}, 0, labels)


def read_bed_table(path: str | Path, fasta: str | Path, option: str = "--bed") -> SequenceTable:
    """BED intervals -> columns chrom, start, end, name, ... (as written; a line with fewer
    fields leaves its cells empty), plus ``sequence`` from the FASTA (reverse-complemented on
    ``-`` strand rows)."""
    # the one reference reader every command uses (plain, gzip or bgzip; read-only folders)
    from goatdna.data_prep.fasta import default_cache_dir, open_fasta

    path, fasta = Path(path), Path(fasta)
    if not fasta.is_file():
        raise GoatDNAError(f"--fasta {fasta}: file not found")
    intervals = read_bed_intervals(path, option)
    width = max(len(interval.fields) for interval in intervals)
    names = [BED_COLUMNS[j] if j < len(BED_COLUMNS) else f"col{j + 1}" for j in range(width)]
    source = open_fasta(fasta, default_cache_dir(), lambda _text: None)
    contigs = {info.name: info for info in source.contigs}
    reader = source.open_reader()
    letters = np.frombuffer(b"ACGTN", dtype=np.uint8)
    sequences: list[str] = []
    for interval in intervals:
        chrom, start, end = interval.chrom, interval.start, interval.end
        where = f"{option} {path} line {interval.line} ({chrom}:{start}-{end})"
        info = contigs.get(chrom)
        if info is None:
            raise GoatDNAError(f"{where}: contig {chrom!r} is not in {fasta}")
        if end > info.length:
            raise GoatDNAError(
                f"{where}: end {end} is past the end of {chrom} ({info.length} bases)"
            )
        raw = np.frombuffer(reader.read_tokens(info, start, end), dtype=np.uint8)
        text = letters[raw & TOKEN_MASK] | ((raw & ~np.uint8(TOKEN_MASK)) != 0) * np.uint8(32)
        seq = text.astype(np.uint8).tobytes().decode("ascii")  # soft-masked bases lowercase
        if len(interval.fields) >= 6 and interval.fields[5] == "-":
            seq = reverse_complement_text(seq)
        sequences.append(seq)
    rows = [interval.fields + [""] * (width - len(interval.fields)) for interval in intervals]
    columns = {name: [row[j] for row in rows] for j, name in enumerate(names)}
    columns["sequence"] = sequences
    return SequenceTable(path, columns, line_offset=0)


def encode_sequences(table: SequenceTable, column: str, option: str) -> list[np.ndarray]:
    """Token arrays (uint8, 0..4) of a column; an empty cell or a non-nucleotide names its row."""
    out: list[np.ndarray] = []
    for i, text in enumerate(table.column(column, option)):
        seq = text.strip()
        if not seq:
            raise GoatDNAError(f"{table.where(i)}: empty sequence in column {column!r}")
        try:
            raw = np.frombuffer(seq.encode("ascii"), dtype=np.uint8)
        except UnicodeEncodeError:
            raise GoatDNAError(
                f"{table.where(i)}: column {column!r} holds a non-ASCII character; only A C G T "
                "N and IUPAC codes (any case) are nucleotides"
            ) from None
        tokens = BYTE_LUT[raw]
        bad = np.flatnonzero(tokens == INVALID)
        if bad.size:
            pos = int(bad[0])
            raise GoatDNAError(
                f"{table.where(i)}: invalid nucleotide {chr(int(raw[pos]))!r} at position "
                f"{pos + 1} of column {column!r}; only A C G T N and IUPAC codes (any case)"
            )
        out.append(tokens & TOKEN_MASK)
    return out


def _as_float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def canonical_label(text: str) -> str:
    """One spelling per label: a number is written as Python writes it (``1``, ``1.0`` and
    ``1e0`` are one class, ``1``; ``0.50`` is ``0.5``); anything else is kept as written."""
    value = _as_float(text)
    if value is None or not math.isfinite(value):
        return text
    return str(int(value)) if value.is_integer() else repr(value)


def many_classes(n_rows: int) -> int:
    """More distinct labels than this is no classification task: nearly every row would be a
    class of its own (a region name, a measurement), trained to chance and reported as such."""
    return max(10, n_rows // 2)


def infer_task(labels: list[str], table: SequenceTable, column: str, hint: str = "") -> str:
    """The task ``--task auto`` picks from the (canonical, present) training labels.

    ``regression`` when every label is a number and some is not whole, or when they are whole
    numbers nearly all distinct (a count, a measurement); ``classification`` for names and for
    whole numbers with few values. A numeric column with a word in it ("high") and a column of
    names nearly all distinct (a BED's region names) are errors, never a classifier with one
    class per row: ``hint`` adds what to do (e.g. which BED column holds the label).
    """
    values = [_as_float(x) for x in labels]
    words = [i for i, v in enumerate(values) if v is None]
    distinct = len(set(labels))
    if not words:
        numbers = [v for v in values if v is not None]
        if any(not v.is_integer() for v in numbers) or distinct > many_classes(len(labels)):
            return "regression"
        return "classification"
    if len(words) * 2 < len(labels):  # mostly numbers: the words are mistakes
        row = words[0]
        raise GoatDNAError(
            f"{table.where(row)}: label {labels[row]!r} in column {column!r} is not a number, "
            f"though {len(labels) - len(words)} of {len(labels)} labels are; fix or drop the "
            "row (or pass --task classification if the labels are class names)"
        )
    if distinct > many_classes(len(labels)):
        raise GoatDNAError(
            f"{table.path}: column {column!r} holds {distinct} distinct labels over {len(labels)} "
            f"rows: nearly every row would be a class of its own, so it is not a class label"
            f"{hint}; pass --task classification to train on it anyway"
        )
    return "classification"


def check_labels_present(table: SequenceTable, column: str, option: str) -> list[str]:
    """The labels of a column in their canonical spelling (`canonical_label`); a missing one
    (NaN, empty) or a non-finite number (inf) is an error naming its row."""
    labels = table.column(column, option)
    for i, text in enumerate(labels):
        if text.strip().lower() in MISSING_LABELS:
            raise GoatDNAError(
                f"{table.where(i)}: label {text!r} in column {column!r} is missing (NaN/empty); "
                "drop the row or fill in its label"
            )
        value = _as_float(text.strip())
        if value is not None and not math.isfinite(value):
            raise GoatDNAError(
                f"{table.where(i)}: label {text!r} in column {column!r} is not a finite number; "
                "drop the row or fix its label"
            )
    return [canonical_label(x.strip()) for x in labels]


def class_names(labels: list[str], where: Path, column: str) -> list[str]:
    """Sorted distinct labels (numerically when all are numbers); one class is an error."""
    distinct = set(labels)
    if len(distinct) < 2:
        only = next(iter(distinct)) if distinct else "nothing"
        raise GoatDNAError(
            f"{where}: column {column!r} holds a single class ({only!r}); a classifier needs at "
            "least two (or pass --task regression for a numeric target)"
        )
    if all(_as_float(x) is not None for x in distinct):
        return sorted(distinct, key=lambda x: (float(x), x))
    return sorted(distinct)


def encode_labels(
    table: SequenceTable, column: str, option: str, task: str, classes: list[str] | None
) -> np.ndarray:
    """Class indices (int64) into ``classes``, or float64 targets for regression."""
    labels = check_labels_present(table, column, option)
    if task == "regression":
        values = np.empty(len(labels), dtype=np.float64)
        for i, text in enumerate(labels):
            value = _as_float(text)
            if value is None or not math.isfinite(value):
                raise GoatDNAError(
                    f"{table.where(i)}: regression label {text!r} in column {column!r} is not a "
                    "finite number (or pass --task classification)"
                )
            values[i] = value
        return values
    assert classes is not None
    index = {name: k for k, name in enumerate(classes)}
    out = np.empty(len(labels), dtype=np.int64)
    for i, text in enumerate(labels):
        if text not in index:
            raise GoatDNAError(
                f"{table.where(i)}: label {text!r} is not one of the training classes "
                f"({', '.join(classes)})"
            )
        out[i] = index[text]
    return out
