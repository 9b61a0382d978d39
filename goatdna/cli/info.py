"""`goatdna info DIR`: what a prepared dataset holds, per record and per split."""

from __future__ import annotations

from pathlib import Path

import typer

from goatdna.cli.common import default_of
from goatdna.data_prep.dataset_info import DatasetInfoRequest


def info(
    directory: Path = typer.Argument(..., help="A directory written by `goatdna prepare`."),
    verify: bool = typer.Option(
        False, "--verify", help="Re-hash every record and compare with the manifest's sha256."
    ),
    max_records: int = typer.Option(
        default_of(DatasetInfoRequest, "max_records"),
        "--max-records",
        help="Show at most this many record rows (splits are always shown).",
    ),
) -> None:
    """Table of records and splits: lengths, GC %, N %, soft-masked %; --verify re-hashes."""
    from goatdna.console import output_console
    from goatdna.data_prep.dataset_info import describe_dataset

    console = output_console()
    for part in describe_dataset(DatasetInfoRequest(directory, verify, max_records)):
        console.print(part)
