"""`goatdna evaluate`: held-out NLL / bits per base of a checkpoint at several context lengths."""

from __future__ import annotations

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
    from goatdna.analysis.evaluate import write_evaluation
    from goatdna.analysis.evaluate_run import EvaluateRequest, evaluation_parts
    from goatdna.analysis.evaluate_run import evaluate as run
    from goatdna.console import output_console

    request = EvaluateRequest(
        checkpoint=checkpoint,
        data=data,
        split=split,
        context_lengths=context_lengths,
        max_tokens=eval_token_cap(max_eval_tokens),
        batch_tokens=batch_tokens,
        out=out,
        accelerator=accelerator,
        devices=devices,
        rope_extension=rope_extension,
    )
    evaluation = run(request)
    console = output_console()
    for part in evaluation_parts(evaluation):
        console.print(part)
    if out is not None:
        write_evaluation(evaluation, out / "evaluation.json", out / "evaluation.csv")
        console.print(f"wrote {out / 'evaluation.json'} and {out / 'evaluation.csv'}", markup=False)
