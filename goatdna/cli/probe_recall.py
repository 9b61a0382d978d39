"""`goatdna probe-recall`: how well a model recalls a segment seen d bases earlier (real DNA filler)."""

from __future__ import annotations

from pathlib import Path

import typer


def probe_recall(
    checkpoint: Path = typer.Option(
        ..., "--checkpoint", "-c", help="A .ckpt written by `goatdna train`."
    ),
    data: Path = typer.Option(..., "--data", "-d", help="Shard directory from `goatdna prepare`."),
    out: Path = typer.Option(
        ..., "--out", "-o", help="Folder for recall_trials.csv, recall_summary.csv, recall.png."
    ),
    distances: str = typer.Option(
        "64,256,1024,4096,16384",
        "--distances",
        help="Comma-separated filler lengths between the two copies of the segment.",
    ),
    segment: int = typer.Option(50, "--segment", help="Bases in the segment that is repeated."),
    trials: int = typer.Option(
        64, "--trials", help="Trials (segment + filler draws) per distance."
    ),
    split: str = typer.Option("test", "--split", help="Split the segments and filler come from."),
    seed: int = typer.Option(
        0, "--seed", help="Seed of the trial draw (the same for every model)."
    ),
    batch_tokens: int = typer.Option(
        65536, "--batch-tokens", help="Tokens per forward pass (trials are batched per distance)."
    ),
    device: str = typer.Option("cpu", "--device", help="torch device, e.g. cpu or cuda."),
) -> None:
    """Recall gain (first-copy minus second-copy NLL) and greedy copy accuracy per distance."""
    from rich.console import Console
    from rich.table import Table

    from goatdna.analysis.recall import parse_distances
    from goatdna.analysis.recall import probe_recall as run_probe

    summary = run_probe(
        checkpoint, data, out, parse_distances(distances), segment, trials, split, seed,
        batch_tokens, device, show_progress=True,
    )  # fmt: skip
    table = Table(title=f"Recall of a {segment}-base segment ({trials} trials; nats/base)")
    for name in ("distance", "NLL 1st copy", "NLL 2nd copy", "recall gain", "copy accuracy"):
        table.add_column(name, justify="right")
    for row in summary.itertuples():
        table.add_row(
            f"{row.distance:,}" + (" *" if row.extrapolation else ""),
            f"{row.nll_first:.4f}",
            f"{row.nll_second:.4f}",
            f"{row.recall_gain:.4f} ± {row.recall_gain_se:.4f}",
            f"{row.copy_accuracy:.3f}",
        )
    console = Console()
    console.print(table)
    if summary["extrapolation"].any():
        console.print("* the probe sequence is longer than the training length (extrapolation)")
    console.print(f"wrote {out}/recall_trials.csv, recall_summary.csv, recall.png")
