"""`goatdna info DIR`: what a prepared dataset holds, per record and per split."""

from __future__ import annotations

from pathlib import Path

import typer


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f}" if whole else "-"


def _sources_table(genome) -> object:
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


def info(
    directory: Path = typer.Argument(..., help="A directory written by `goatdna prepare`."),
    verify: bool = typer.Option(
        False, "--verify", help="Re-hash every record and compare with the manifest's sha256."
    ),
    max_records: int = typer.Option(
        50, "--max-records", help="Show at most this many record rows (splits are always shown)."
    ),
) -> None:
    """Table of records and splits: lengths, GC %, N %, soft-masked %; --verify re-hashes."""
    from rich.markup import escape
    from rich.table import Table

    from goatdna.console import output_console
    from goatdna.data_prep import ShardedGenome

    genome = ShardedGenome(directory)
    console = output_console()
    multi = "sources" in genome.manifest
    for src in genome.sources():
        console.print(
            f"[bold]{escape(str(genome.root))}[/bold]  source "
            f"{escape(src['name']) + ': ' if multi else ''}"
            f"{escape(src['file'])} ({src['size']:,} bytes, {src['compression']}), "
            f"sha256 {src['sha256'][:16]}..., "
            f"split mode {src.get('split_mode', genome.manifest['split_mode'])}"
        )
    records = genome.records()
    if multi:
        console.print(_sources_table(genome))
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
    console.print(table)
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
    console.print(splits)
    if verify:
        genome.verify()
        console.print(f"verified: all {len(records)} records match their sha256")
