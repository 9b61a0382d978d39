"""Sequence records: what `embed` and `attribute` read from their inputs (issue 42).

One function, `read_records`, turns either input they accept into `SequenceRecord`s:

- ``--sequences FILE``: FASTA records, or the rows of a CSV/TSV/Parquet table with a ``sequence``
  column (the other columns are carried to the output; a ``name`` column names the rows);
- ``--fasta REF --bed REGIONS.bed``: BED regions (0-based, end-exclusive) cut from the reference,
  reverse-complemented on ``-`` strand rows.

Both go through `goatdna.io.tables` (the one table reader, which `predict` and `finetune` read
their tables with too) and its `encode_sequences`, so a bad base, an empty sequence or a missing
column is the same one-line error in every command. Every record is read and validated before any
model runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from goatdna.errors import GoatDNAError
from goatdna.io.tables import SequenceTable, encode_sequences, read_bed_table, read_table


@dataclass
class SequenceRecord:
    """One input sequence: its name, its plain tokens (0..4) and columns carried to the output."""

    name: str
    tokens: np.ndarray
    columns: dict[str, Any] = field(default_factory=dict)


def check_record_sources(
    sequences: str | Path | None, fasta: str | Path | None, bed: str | Path | None
) -> None:
    """Exactly one input: ``--sequences``, or ``--fasta`` with ``--bed`` (checked before any work)."""
    if sequences is not None and (fasta is not None or bed is not None):
        raise GoatDNAError("give either --sequences, or --fasta with --bed, not both")
    if sequences is None and (fasta is None or bed is None):
        raise GoatDNAError("give --sequences FILE, or --fasta REF together with --bed REGIONS.bed")


def read_records(
    sequences: str | Path | None = None,
    fasta: str | Path | None = None,
    bed: str | Path | None = None,
) -> list[SequenceRecord]:
    """The records of ``--sequences``, or of ``--bed`` regions over ``--fasta``."""
    check_record_sources(sequences, fasta, bed)
    if sequences is not None:
        return read_sequence_file(sequences)
    assert fasta is not None and bed is not None
    return read_bed_regions(fasta, bed)


def read_sequence_file(path: str | Path) -> list[SequenceRecord]:
    """FASTA records, or table rows (CSV/TSV/Parquet) with a ``sequence`` column (the other
    columns are carried; a ``name`` column names the rows)."""
    table = read_table(path)
    if "sequence" not in table.columns:
        raise GoatDNAError(
            f"{path}: no 'sequence' column (columns: {', '.join(table.columns) or 'none'})"
        )
    if len(table) == 0:
        raise GoatDNAError(f"{path}: no rows")
    names = table.columns.get("name") or [str(i + 1) for i in range(len(table))]
    if table.row_labels is None and "name" in table.columns:
        table.row_labels = [f"row {i + 1} (name {name!r})" for i, name in enumerate(names)]
    return _records(table, names, [c for c in table.columns if c != "sequence"])


def read_bed_regions(fasta: str | Path, bed: str | Path) -> list[SequenceRecord]:
    """BED regions (0-based, end-exclusive) cut from an indexed FASTA, in file order.

    The name is column 4 when present, else ``chrom:start+1-end``; a ``-`` in column 6 reads the
    region's reverse complement. chrom/start/end (and strand) are carried to the output.
    """
    table = read_bed_table(bed, fasta)
    columns = table.columns
    n = len(table)
    starts = [int(x) for x in columns["start"]]
    ends = [int(x) for x in columns["end"]]
    given = columns.get("name", [""] * n)
    names = [
        name if name not in ("", ".") else f"{chrom}:{start + 1}-{end}"
        for name, chrom, start, end in zip(given, columns["chrom"], starts, ends, strict=True)
    ]
    records = _records(table, names, [])
    strands = columns.get("strand", [""] * n)
    for record, chrom, start, end, strand in zip(
        records, columns["chrom"], starts, ends, strands, strict=True
    ):
        record.columns = {"chrom": chrom, "start": start, "end": end}
        if strand in ("+", "-"):
            record.columns["strand"] = strand
    return records


def _records(table: SequenceTable, names: list[str], carried: list[str]) -> list[SequenceRecord]:
    tokens = encode_sequences(table, "sequence", "--sequences")
    return [
        SequenceRecord(name, row_tokens, {c: table.columns[c][i] for c in carried})
        for i, (name, row_tokens) in enumerate(zip(names, tokens, strict=True))
    ]
