"""`goatdna evaluate`: held-out NLL / bits per base of a checkpoint at several context lengths."""

from __future__ import annotations

import math
from pathlib import Path

import typer


def _bits(value: float) -> str:
    """A bits/base cell; '-' where no target of that kind was scored (not 'nan')."""
    return "-" if math.isnan(value) else f"{value:.4f}"


def evaluate(
    checkpoint: Path = typer.Option(
        ...,
        "--checkpoint",
        "-c",
        help="A .ckpt written by `goatdna train` or a `goatdna export` folder.",
    ),
    data: Path = typer.Option(..., "--data", "-d", help="Shard directory from `goatdna prepare`."),
    split: str = typer.Option("val", "--split", help="Split to score: val, test (or train)."),
    context_lengths: str | None = typer.Option(
        None,
        "--context-lengths",
        help="Comma-separated context lengths, e.g. 1024,2048,4096,8192 "
        "(default: training length x 1, 2, 4, 8; longer than training = extrapolation).",
    ),
    max_tokens: int | None = typer.Option(
        None,
        "--max-tokens",
        help="Score at most this many bases per context length (max-tokens // L held-out windows, "
        "evenly spaced over the split: the windows training validates on at its own cap).",
    ),
    batch_tokens: int = typer.Option(
        16384, "--batch-tokens", help="Tokens per forward pass (batch = this / context length)."
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Directory for evaluation.json and evaluation.csv."
    ),
    device: str = typer.Option("cpu", "--device", help="torch device, e.g. cpu or cuda."),
) -> None:
    """Mean NLL (nats/base), bits/base and perplexity over non-overlapping windows, per context length."""
    from rich.console import Console
    from rich.table import Table

    from goatdna.analysis.evaluate import (
        evaluate_checkpoint,
        parse_context_lengths,
        write_evaluation,
    )
    from goatdna.atomic import check_output_dir
    from goatdna.errors import GoatDNAError

    if batch_tokens < 1:
        raise GoatDNAError(f"--batch-tokens must be >= 1, got {batch_tokens}")
    if out is not None:
        check_output_dir(out, "--out")  # before any work
    lengths = parse_context_lengths(context_lengths) if context_lengths else None
    evaluation = evaluate_checkpoint(
        checkpoint, data, split, lengths, max_tokens, batch_tokens, device, show_progress=True
    )
    table = Table(
        title=f"{evaluation.positional} on {split} (training length {evaluation.train_length}; "
        "NLL in nats/base, b/b = bits/base)"
    )
    for name in ("context", "bases", "NLL", "b/b", "perplexity", "repeat b/b", "non-repeat b/b"):
        table.add_column(name, justify="right")
    for r in evaluation.results:
        table.add_row(
            f"{r.context_length:,}" + (" *" if r.extrapolation else ""),
            f"{r.bases:,}",
            f"{r.nll:.4f}",
            f"{r.bits_per_base:.4f}",
            f"{r.perplexity:.4f}",
            _bits(r.repeat_bits_per_base),
            _bits(r.nonrepeat_bits_per_base),
        )
    console = Console()
    console.print(table)
    if any(r.extrapolation for r in evaluation.results):
        console.print("* longer than the training length (extrapolation)")
    if all(math.isnan(r.repeat_bits_per_base) for r in evaluation.results):
        console.print("repeat b/b: no soft-masked bases among the scored targets")
    if all(math.isnan(r.nonrepeat_bits_per_base) for r in evaluation.results):
        console.print("non-repeat b/b: every scored target is soft-masked")
    if out is not None:
        write_evaluation(evaluation, out / "evaluation.json", out / "evaluation.csv")
        console.print(f"wrote {out / 'evaluation.json'} and {out / 'evaluation.csv'}")
