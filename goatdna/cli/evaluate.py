"""`goatdna evaluate`: held-out NLL / bits per base of a checkpoint at several context lengths."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

from goatdna.analysis.evaluate import DEFAULT_BATCH_TOKENS
from goatdna.cli.common import (
    AcceleratorOpt,
    BatchTokensOpt,
    CheckpointOpt,
    ContextLengthsOpt,
    DataOpt,
    MaxEvalTokensOpt,
    OneDeviceOpt,
    RopeExtensionOpt,
    SplitOpt,
    eval_token_cap,
    option,
)


def _bits(value: float) -> str:
    """A bits/base cell; '-' where no target of that kind was scored (not 'nan')."""
    return "-" if math.isnan(value) else f"{value:.4f}"


def evaluate(
    checkpoint: CheckpointOpt,
    data: DataOpt,
    split: SplitOpt = "val",
    context_lengths: ContextLengthsOpt = None,
    max_eval_tokens: MaxEvalTokensOpt = 0,
    batch_tokens: BatchTokensOpt = DEFAULT_BATCH_TOKENS,
    out: Annotated[
        Path | None, option("out", "Directory for evaluation.json and evaluation.csv.")
    ] = None,
    accelerator: AcceleratorOpt = "cpu",
    devices: OneDeviceOpt = "1",
    rope_extension: RopeExtensionOpt = None,
) -> None:
    """Mean NLL (nats/base), bits/base and perplexity over non-overlapping windows, per context length."""
    from rich.table import Table

    from goatdna.analysis.evaluate import (
        evaluate_checkpoint,
        parse_context_lengths,
        write_evaluation,
    )
    from goatdna.atomic import check_output_dir
    from goatdna.console import output_console
    from goatdna.errors import GoatDNAError
    from goatdna.runtime import single_device

    if batch_tokens < 1:
        raise GoatDNAError(f"--batch-tokens must be >= 1, got {batch_tokens}")
    cap = eval_token_cap(max_eval_tokens)
    device = single_device(accelerator, devices)
    if out is not None:
        check_output_dir(out, "--out")  # before any work
    lengths = parse_context_lengths(context_lengths) if context_lengths else None
    evaluation = evaluate_checkpoint(
        checkpoint,
        data,
        split,
        lengths,
        cap,
        batch_tokens,
        device,
        show_progress=True,
        rope_extension=rope_extension,
    )
    table = Table(
        title=f"{evaluation.positional} on {split} (training length {evaluation.train_length}; "
        "NLL in nats/base, b/b = bits/base)"
    )
    for name in (
        "context",
        "bases",
        "NLL",
        "NLL 95% CI",
        "b/b",
        "perplexity",
        "repeat b/b",
        "non-repeat b/b",
    ):
        table.add_column(name, justify="right")
    for r in evaluation.results:
        table.add_row(
            f"{r.context_length:,}" + (" *" if r.extrapolation else ""),
            f"{r.bases:,}",
            f"{r.nll:.4f}",
            f"{r.nll_low:.4f}-{r.nll_high:.4f}",
            f"{r.bits_per_base:.4f}",
            f"{r.perplexity:.4f}",
            _bits(r.repeat_bits_per_base),
            _bits(r.nonrepeat_bits_per_base),
        )
    console = output_console()
    console.print(table)
    if any(r.extrapolation for r in evaluation.results):
        console.print("* longer than the training length (extrapolation)")
    console.print("NLL 95% CI: percentile bootstrap over the held-out windows")
    if all(math.isnan(r.repeat_bits_per_base) for r in evaluation.results):
        console.print("repeat b/b: no soft-masked bases among the scored targets")
    if all(math.isnan(r.nonrepeat_bits_per_base) for r in evaluation.results):
        console.print("non-repeat b/b: every scored target is soft-masked")
    if out is not None:
        write_evaluation(evaluation, out / "evaluation.json", out / "evaluation.csv")
        console.print(f"wrote {out / 'evaluation.json'} and {out / 'evaluation.csv'}", markup=False)
