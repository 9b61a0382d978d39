"""`goatdna info DIR`: what a prepared dataset holds, per record and per split."""

from __future__ import annotations

from pathlib import Path

import typer


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f}" if whole else "-"


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
    from rich.console import Console
    from rich.table import Table

    from goatdna.data_prep import ShardedGenome

    genome = ShardedGenome(directory)
    console = Console()
    src = genome.manifest["source"]
    console.print(
        f"[bold]{genome.root}[/bold]  source {src['name']} ({src['size']:,} bytes, "
        f"{src['compression']}), sha256 {src['sha256'][:16]}..., "
        f"split mode {genome.manifest['split_mode']}"
    )
    records = genome.records()
    table = Table(title=f"records ({len(records)})")
    for col in ("name", "split", "start", "end", "length", "GC %", "N %", "soft-masked %"):
        table.add_column(col, justify="left" if col in ("name", "split") else "right")
    for rec in records[:max_records]:
        acgt = rec.length - rec.n_count
        table.add_row(
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
