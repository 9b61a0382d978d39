"""What `goatdna info DIR` shows of a prepared dataset: its sources, a table of records (lengths,
GC %, N %, soft-masked %), one of splits, and with ``verify`` the re-hash of every record."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich loads when a table is made, not for `goatdna --help`
    from rich.table import Table

    from goatdna.data_prep.shards import ShardedGenome


@dataclass(frozen=True)
class DatasetInfoRequest:
    """``directory``: written by `goatdna prepare`; ``verify``: re-hash every record against
    the manifest; ``max_records``: record rows shown at most (every split is shown)."""

    directory: Path
    verify: bool = False
    max_records: int = 50


def describe_dataset(request: DatasetInfoRequest) -> Iterator[str | Table]:
    """The description in printing order: header lines (rich markup) and tables, then, with
    ``verify``, the verdict line. A generator, so what precedes a failed verification is
    shown before its error."""
    from rich.markup import escape

    from goatdna.data_prep.shards import ShardedGenome

    genome = ShardedGenome(request.directory)
    multi = "sources" in genome.manifest
    for src in genome.sources():
        yield (
            f"[bold]{escape(str(genome.root))}[/bold]  source "
            f"{escape(src['name']) + ': ' if multi else ''}"
            f"{escape(src['file'])} ({src['size']:,} bytes, {src['compression']}), "
            f"sha256 {src['sha256'][:16]}..., "
            f"split mode {src.get('split_mode', genome.manifest['split_mode'])}"
        )
    records = genome.records()
    if multi:
        yield _sources_table(genome)
    yield _records_table(genome, multi, request.max_records)
    yield _splits_table(genome)
    if request.verify:
        genome.verify()
        yield f"verified: all {len(records)} records match their sha256"


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f}" if whole else "-"


def _sources_table(genome: ShardedGenome) -> Table:
    """One row per FASTA source: records and bases per split, contigs renamed on a clash."""
    from rich.table import Table

    table = Table(title=f"sources ({len(genome.source_names())})")
    splits = genome.split_names()
    for col in ("source", "file", "records", *(f"{s} bp" for s in splits), "renamed"):
        table.add_column(col, justify="left" if col in ("source", "file") else "right")
    for src in genome.sources():
        mine = [r for r in genome.records() if r.source == src["name"]]
        bases = [sum(r.length for r in mine if r.split == s) for s in splits]
        table.add_row(
            src["name"],
            src["file"],
            str(len(mine)),
            *(f"{b:,}" for b in bases),
            str(len(src.get("renamed", {}))),
        )
    return table


def _records_table(genome: ShardedGenome, multi: bool, max_records: int) -> Table:
    """One row per record (at most ``max_records``), with its source when there are several."""
    from rich.table import Table

    records = genome.records()
    table = Table(title=f"records ({len(records)})")
    columns = ("name", "split", "start", "end", "length", "GC %", "N %", "soft-masked %")
    for col in ("source", *columns) if multi else columns:
        table.add_column(col, justify="left" if col in ("source", "name", "split") else "right")
    for rec in records[:max_records]:
        acgt = rec.length - rec.n_count
        table.add_row(
            *((rec.source,) if multi else ()),
            rec.name,
            rec.split,
            f"{rec.start:,}",
            f"{rec.end:,}",
            f"{rec.length:,}",
            _pct(rec.gc_count, acgt),
            _pct(rec.n_count, rec.length),
            _pct(rec.softmask_count, rec.length),
        )
    if len(records) > max_records:
        table.caption = f"{len(records) - max_records} more records not shown (--max-records)"
    return table


def _splits_table(genome: ShardedGenome) -> Table:
    """One row per split, from the manifest's counts."""
    from rich.table import Table

    splits = Table(title="splits")
    for col in ("split", "records", "length", "GC %", "N %", "soft-masked %"):
        splits.add_column(col, justify="left" if col == "split" else "right")
    for name, s in genome.manifest["splits"].items():
        splits.add_row(
            name,
            str(s["records"]),
            f"{s['length']:,}",
            _pct(s["gc_count"], s["length"] - s["n_count"]),
            _pct(s["n_count"], s["length"]),
            _pct(s["softmask_count"], s["length"]),
        )
    return splits
