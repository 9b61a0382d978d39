"""`goatdna probe-recall`: how well a model recalls a segment seen d bases earlier (real DNA filler)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from goatdna.analysis.recall import DEFAULT_DISTANCES
from goatdna.analysis.recall import probe_recall as run_probe
from goatdna.cli.common import (
    AcceleratorOpt,
    CheckpointOpt,
    DataOpt,
    OneDeviceOpt,
    default_of,
    option,
)


def probe_recall(
    checkpoint: CheckpointOpt,
    data: DataOpt,
    out: Annotated[
        Path, option("out", "Folder for recall_trials.csv, recall_summary.csv, recall.png.")
    ],
    distances: Annotated[
        str,
        typer.Option(
            "--distances",
            help="Comma-separated filler lengths between the two copies of the segment.",
        ),
    ] = ",".join(map(str, DEFAULT_DISTANCES)),
    segment: Annotated[
        int, typer.Option("--segment", help="Bases in the segment that is repeated.")
    ] = default_of(run_probe, "segment_length"),
    trials: Annotated[
        int, typer.Option("--trials", help="Trials (segment + filler draws) per distance.")
    ] = default_of(run_probe, "n_trials"),
    split: Annotated[str, option("split", "Split the segments and filler come from.")] = default_of(
        run_probe, "split"
    ),
    seed: Annotated[
        int, option("seed", "Seed of the trial draw (the same for every model).")
    ] = default_of(run_probe, "seed"),
    batch_tokens: Annotated[
        int, option("batch_tokens", "Tokens per forward pass (trials are batched per distance).")
    ] = default_of(run_probe, "batch_tokens"),
    accelerator: AcceleratorOpt = default_of(run_probe, "device"),
    devices: OneDeviceOpt = "1",
    force: Annotated[
        bool, option("force", "Replace the CSVs and plot of an earlier probe in --out.")
    ] = False,
) -> None:
    """Recall gain (first-copy minus second-copy NLL) and greedy copy accuracy per distance."""
    from rich.table import Table

    from goatdna.analysis.recall import parse_distances
    from goatdna.console import output_console
    from goatdna.runtime import single_device

    wanted = parse_distances(distances, option="--distances")
    summary = run_probe(
        checkpoint, data, out, wanted, segment, trials, split, seed,
        batch_tokens, single_device(accelerator, devices), show_progress=True, force=force,
    )  # fmt: skip
    table = Table(title=f"Recall of a {segment}-base segment ({trials} trials; nats/base)")
    for name in ("distance", "NLL 1st copy", "NLL 2nd copy", "recall gain", "copy accuracy"):
        table.add_column(name, justify="right")
    for row in summary.itertuples():
        table.add_row(
            f"{row.distance:,}" + (" *" if row.extrapolation else ""),
            f"{row.nll_first:.4f}",
            f"{row.nll_second:.4f}",
            f"{row.recall_gain:.4f} ({row.recall_gain_low:.4f}-{row.recall_gain_high:.4f})",
            f"{row.copy_accuracy:.3f} ({row.copy_accuracy_low:.3f}-{row.copy_accuracy_high:.3f})",
        )
    console = output_console()
    console.print(table)
    if summary["extrapolation"].any():
        console.print("* the probe sequence is longer than the training length (extrapolation)")
    console.print("(in brackets: 95% bootstrap intervals over the trials)")
    console.print(f"wrote {out}/recall_trials.csv, recall_summary.csv, recall.png", markup=False)
