"""`goatdna make-task`: a labelled window task from prepared shards (a no-download smoke test)."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def make_task(
    data: Path = typer.Option(..., "--data", "-d", help="Shard directory from `goatdna prepare`."),
    out: Path = typer.Option(
        ..., "--out", "-o", help="Folder for train.csv, val.csv, test.csv, task.json."
    ),
    label: str = typer.Option(
        "repeat", "--label", help="repeat (>= half soft-masked) | gc (GC tertiles of train)."
    ),
    window: int = typer.Option(200, "--window", help="Window length in nt."),
    max_train: int = typer.Option(
        2000, "--max-train", help="Rows in train.csv (classes balanced)."
    ),
    max_eval: int = typer.Option(500, "--max-eval", help="Rows in val.csv and test.csv each."),
    seed: int = typer.Option(0, "--seed"),
    force: bool = typer.Option(False, "--force", help="Overwrite a task in --out."),
) -> None:
    """Tile each split into windows labelled by repeat content or GC class; splits never mix."""
    from goatdna.data_prep.tasks import WindowTaskOptions, make_window_task
    from goatdna.errors import GoatDNAError

    if label not in ("repeat", "gc"):
        raise GoatDNAError(f"--label {label!r}: choose repeat or gc")
    options = WindowTaskOptions(label=label, window=window, max_train=max_train,  # type: ignore[arg-type]
                                max_eval=max_eval, seed=seed)  # fmt: skip
    from goatdna.atomic import check_output_dir

    check_output_dir(out, "--out")  # before any work: a folder we can write
    info = make_window_task(data, out, options, force=force)
    typer.echo(json.dumps(info["counts"]))
    typer.echo(f"task files: {out}/{{train,val,test}}.csv")
