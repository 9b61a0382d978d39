"""Tables of sequences and of variants, read strictly: the one reader of CSV, TSV and Parquet
inputs (issue 42).

Two shapes, one set of rules (a missing file, an unreadable file and a bad column are each one
`GoatDNAError` naming the file, or the option and the file):

- `read_table` -> `SequenceTable`: the sequence inputs of `finetune`, `predict`, `embed` and
  `attribute` (CSV/TSV, optionally gzipped, Parquet, FASTA, or BED intervals over a FASTA), as
  columns of strings in file order, nothing re-typed (``predict`` carries the input columns
  through exactly as they were written); `SequenceTable.typed_frame` gives the same columns with
  types, for outputs that have them (Parquet). `encode_sequences` turns a column into tokens
  with `goatdna.io.tokens`' one table (lowercase accepted, IUPAC codes read as N), naming the row
  of a bad base. This is the GUE / DNABERT-2 and Nucleotide Transformer layout: ``sequence,label``
  columns, one file per split.
- `read_frame` -> pandas DataFrame: the variant tables of `score-variants` and `eval-variants`
  (.tsv/.csv[.gz], .parquet), with the text columns named by the caller read as text and no NA
  strings (``REF`` ``NA`` is two bases, not a missing value).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from goatdna.errors import GoatDNAError
from goatdna.io.fasta import default_cache_dir, open_fasta, read_fasta_text
from goatdna.io.regions import read_bed_intervals
from goatdna.io.text import detect_compression, open_text
from goatdna.io.tokens import (
    TOKEN_MASK,
    InvalidNucleotide,
    decode,
    encode_bytes,
    reverse_complement_text,
)

if TYPE_CHECKING:
    import pandas as pd

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
    numbers = [as_float(c) if c.strip() else math.nan for c in cells]
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
    records = read_fasta_text(path)
    names = [name for name, _seq in records]
    labels = [f"record {name!r} (#{i + 1})" for i, name in enumerate(names)]
    return SequenceTable(path, {"name": names, "sequence": [s for _n, s in records]}, 0, labels)


def read_bed_table(path: str | Path, fasta: str | Path, option: str = "--bed") -> SequenceTable:
    """BED intervals -> columns chrom, start, end, name, ... (as written; a line with fewer
    fields leaves its cells empty), plus ``sequence`` from the FASTA (reverse-complemented on
    ``-`` strand rows)."""
    path, fasta = Path(path), Path(fasta)
    if not fasta.is_file():
        raise GoatDNAError(f"--fasta {fasta}: file not found")
    intervals = read_bed_intervals(path, option)
    width = max(len(interval.fields) for interval in intervals)
    names = [BED_COLUMNS[j] if j < len(BED_COLUMNS) else f"col{j + 1}" for j in range(width)]
    source = open_fasta(fasta, default_cache_dir(), lambda _text: None)
    contigs = {info.name: info for info in source.contigs}
    reader = source.open_reader()
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
        seq = decode(raw)  # soft-masked bases lowercase, IUPAC codes N
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
            tokens = encode_bytes(seq.encode("ascii"))
        except UnicodeEncodeError:
            raise GoatDNAError(
                f"{table.where(i)}: column {column!r} holds a non-ASCII character; only A C G T "
                "N and IUPAC codes (any case) are nucleotides"
            ) from None
        except InvalidNucleotide as err:
            raise GoatDNAError(
                f"{table.where(i)}: invalid nucleotide {err.char!r} at position "
                f"{err.position} of column {column!r}; only A C G T N and IUPAC codes (any case)"
            ) from None
        out.append(tokens & TOKEN_MASK)
    return out


def as_float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------------
# variant tables as pandas frames


def read_frame(path: Path, option: str, text_columns: Sequence[str] = ()) -> pd.DataFrame:
    """A .tsv/.csv (optionally gzipped) or .parquet table as pandas reads it, or one user error
    naming ``option`` and the file.

    ``text_columns`` (chrom, ref, alt of a variant table) are read as text with no NA strings
    (``REF`` ``NA`` is two bases, not a missing value); every other column gets pandas' usual NA
    strings, so carried columns keep their types. Header cells padded with spaces (" chrom")
    name the same columns."""
    import pandas as pd
    from pandas._libs.parsers import STR_NA_VALUES  # type: ignore[import-untyped]  # its NA strings

    if not path.is_file():
        raise GoatDNAError(f"{option} {path}: file not found")
    name = path.name.lower()
    try:
        if name.endswith(".parquet"):
            return pd.read_parquet(path)
        _check_encoding(path, name, option)
        sep = "\t" if name.endswith((".tsv", ".tsv.gz")) else ","
        columns = list(pd.read_csv(path, sep=sep, nrows=0).columns)
        _check_separator(path, columns, sep, option, text_columns)
        keys = [c for c in columns if str(c).strip() in text_columns]
        na_values = {c: sorted(STR_NA_VALUES) for c in columns if c not in keys}
        frame = pd.read_csv(path, sep=sep, dtype={c: str for c in keys}, keep_default_na=False,
                            na_values=na_values)  # fmt: skip
    except (ValueError, OSError, UnicodeDecodeError) as err:
        first = str(err).splitlines()[0] if str(err) else err.__class__.__name__
        raise GoatDNAError(f"{option} {path}: not a readable table ({first})") from None
    return frame.rename(columns=lambda c: c.strip() if isinstance(c, str) else c)


def _check_encoding(path: Path, name: str, option: str) -> None:
    """A gzip file named .tsv/.csv would give a codec error: say it is gzip (and the reverse)."""
    gzipped = detect_compression(path) != "none"
    if gzipped and not name.endswith(".gz"):
        raise GoatDNAError(
            f"{option} {path}: the file is gzip-compressed but its name does not end in .gz; "
            f"rename it {path.name}.gz (or decompress it)"
        )
    if name.endswith(".gz") and not gzipped:
        raise GoatDNAError(
            f"{option} {path}: named .gz but not gzip-compressed; drop the .gz from its name"
        )


def _check_separator(
    path: Path, columns: list, sep: str, option: str, text_columns: Sequence[str]
) -> None:
    """One header column holding the other separator: the suffix names the wrong format."""
    if len(columns) != 1 or any(c in columns for c in text_columns):
        return
    other, named, real = (",", "tab", "comma") if sep == "\t" else ("\t", "comma", "tab")
    if other in str(columns[0]):
        suffix = ".csv" if other == "," else ".tsv"
        raise GoatDNAError(
            f"{option} {path}: the separator looks wrong: the name says {named}-separated but "
            f"the header is {real}-separated; rename it to {suffix} (or convert it)"
        )
