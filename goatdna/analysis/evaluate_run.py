"""Running `goatdna evaluate`: the checks before any work, the evaluation of one checkpoint
(`goatdna.analysis.evaluate`) and what the command prints of it (a table and its notes)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from goatdna.analysis.evaluate import DEFAULT_BATCH_TOKENS, Evaluation

if TYPE_CHECKING:  # rich loads when the table is made, not for `goatdna --help`
    from rich.table import Table


@dataclass(frozen=True)
class EvaluateRequest:
    """Everything one `evaluate` run needs (the CLI's options): ``context_lengths`` as typed
    (e.g. ``"1024,4096"``; None: the defaults for the training length), ``max_tokens`` the cap
    (None: the whole split) and ``out`` the folder the result is written to (None: printed only)."""

    checkpoint: Path
    data: Path
    split: str = "val"
    context_lengths: str | None = None
    max_tokens: int | None = None
    batch_tokens: int = DEFAULT_BATCH_TOKENS
    out: Path | None = None
    accelerator: str = "cpu"
    devices: str = "1"
    rope_extension: str | None = None


def evaluate(request: EvaluateRequest) -> Evaluation:
    """Check the request (``out`` a folder we can write, before any work), then evaluate."""
    from goatdna.analysis.evaluate import evaluate_checkpoint, parse_context_lengths
    from goatdna.atomic import check_output_dir
    from goatdna.errors import GoatDNAError
    from goatdna.runtime import single_device

    if request.batch_tokens < 1:
        raise GoatDNAError(f"--batch-tokens must be >= 1, got {request.batch_tokens}")
    device = single_device(request.accelerator, request.devices)
    if request.out is not None:
        check_output_dir(request.out, "--out")  # before any work
    text = request.context_lengths
    lengths = parse_context_lengths(text) if text else None
    return evaluate_checkpoint(
        request.checkpoint,
        request.data,
        request.split,
        lengths,
        request.max_tokens,
        request.batch_tokens,
        device,
        show_progress=True,
        rope_extension=request.rope_extension,
    )


def evaluation_parts(evaluation: Evaluation) -> list[Table | str]:
    """What `goatdna evaluate` prints, in order: the table (one row per context length) and the
    notes that say how to read it."""
    from rich.table import Table

    results = evaluation.results
    table = Table(
        title=f"{evaluation.positional} on {evaluation.split} (training length "
        f"{evaluation.train_length}; NLL in nats/base, b/b = bits/base)"
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
    for r in results:
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
    parts: list[Table | str] = [table]
    if any(r.extrapolation for r in results):
        parts.append("* longer than the training length (extrapolation)")
    parts.append("NLL 95% CI: percentile bootstrap over the held-out windows")
    if all(math.isnan(r.repeat_bits_per_base) for r in results):
        parts.append("repeat b/b: no soft-masked bases among the scored targets")
    if all(math.isnan(r.nonrepeat_bits_per_base) for r in results):
        parts.append("non-repeat b/b: every scored target is soft-masked")
    return parts


def _bits(value: float) -> str:
    """A bits/base cell; '-' where no target of that kind was scored (not 'nan')."""
    return "-" if math.isnan(value) else f"{value:.4f}"
