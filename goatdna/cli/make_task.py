"""`goatdna make-task`: a labelled window task from prepared shards (a no-download smoke test)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from goatdna.cli.common import DataOpt, SeedOpt, default_of, option
from goatdna.data_prep.tasks import WindowTaskOptions
from goatdna.formats import json_text


def make_task(
    data: DataOpt,
    out: Annotated[Path, option("out", "Folder for train.csv, val.csv, test.csv, task.json.")],
    label: Annotated[
        str,
        typer.Option(
            "--label",
            help="repeat (>= half soft-masked) | gc (GC tertiles of train) | motif (--motifs "
            "planted in half the windows: a known truth for `goatdna attribute`/`motifs`).",
        ),
    ] = default_of(WindowTaskOptions, "label"),
    window: Annotated[int, typer.Option("--window", help="Window length in nt.")] = default_of(
        WindowTaskOptions, "window"
    ),
    max_train: Annotated[
        int, typer.Option("--max-train", help="Rows in train.csv (classes balanced).")
    ] = default_of(WindowTaskOptions, "max_train"),
    max_eval: Annotated[
        int, typer.Option("--max-eval", help="Rows in val.csv and test.csv each.")
    ] = default_of(WindowTaskOptions, "max_eval"),
    motifs: Annotated[
        Path | None,
        typer.Option("--motifs", help="--label motif: the PWMs to plant (MEME minimal format)."),
    ] = None,
    plant_rate: Annotated[
        float,
        typer.Option(
            "--plant-rate",
            help="--label motif: probability each PWM is planted in a motif window (>= 1 each).",
        ),
    ] = default_of(WindowTaskOptions, "plant_rate"),
    decoys: Annotated[
        str,
        typer.Option(
            "--decoys",
            help="--label motif: shuffled (each background window gets letter-permuted copies "
            "of sampled instances, at the same rate: both classes have the same base "
            "composition, so only the motifs' order tells them apart) | none (background "
            "windows as the genome has them; the planted letters alone then separate them).",
        ),
    ] = default_of(WindowTaskOptions, "decoys"),
    seed: SeedOpt = default_of(WindowTaskOptions, "seed"),
    force: Annotated[bool, option("force", "Overwrite a task in --out.")] = False,
) -> None:
    """Tile each split into windows labelled by repeat content, GC class or planted motifs; splits
    never mix."""
    from goatdna.data_prep.tasks import LABELS, make_window_task
    from goatdna.errors import GoatDNAError

    if label not in LABELS:
        raise GoatDNAError(f"--label {label!r}: choose one of {', '.join(LABELS)}")
    options = WindowTaskOptions(
        label=label,  # type: ignore[arg-type]  # checked against LABELS above
        window=window, max_train=max_train, max_eval=max_eval, seed=seed,
        motifs=None if motifs is None else str(motifs), plant_rate=plant_rate,
        decoys=decoys,  # type: ignore[arg-type]  # checked by make_window_task (DECOYS)
    )  # fmt: skip
    from goatdna.atomic import check_output_dir

    check_output_dir(out, "--out")  # before any work: a folder we can write
    info = make_window_task(data, out, options, force=force)
    typer.echo(json_text(info["counts"], indent=None, end=""))
    typer.echo(f"task files: {out}/{{train,val,test}}.csv")
