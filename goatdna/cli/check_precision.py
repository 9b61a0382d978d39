"""`goatdna check-precision`: the model under a precision and attention kernel vs a float64 reference."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from goatdna.cli.common import (
    AcceleratorOpt,
    CheckpointOpt,
    OneDeviceOpt,
    ProgressLine,
    default_of,
    option,
)
from goatdna.inference.precision_check import Thresholds
from goatdna.inference.precision_run import PrecisionRequest

FAILED_EXIT = 1
"""Exit status when a measurement exceeds its threshold (bad input exits 2, as everywhere)."""


def check_precision(
    checkpoint: CheckpointOpt,
    fasta: Annotated[
        Path, option("fasta", "Reference FASTA: windows are read from it (and --variants' REF).")
    ],
    variants: Annotated[
        Path | None,
        typer.Option(
            "--variants",
            "--vcf",
            help="Variants (a VCF, or a chrom/pos/ref/alt table as score-variants reads) whose "
            "first --max-variants SNVs matching the FASTA are scored; default: the three other "
            "bases at each window's centre.",
        ),
    ] = None,
    precision: Annotated[
        str,
        option("precision", "The precision to check: bf16-mixed | 16-mixed | bf16-true | 32-true."),
    ] = default_of(PrecisionRequest, "precision"),
    attention: Annotated[
        str,
        typer.Option(
            "--attention", help="The attention backend to check: auto | sdpa | flash | explicit."
        ),
    ] = default_of(PrecisionRequest, "attention"),
    reference: Annotated[
        str,
        typer.Option(
            "--reference", help="Reference dtype on the CPU (SDPA math kernel): float64 | float32."
        ),
    ] = default_of(PrecisionRequest, "reference"),
    windows: Annotated[int, typer.Option("--windows", help="Windows of --length bases.")] = (
        default_of(PrecisionRequest, "windows")
    ),
    length: Annotated[
        int | None,
        typer.Option("--length", help="Window length (default: the training length)."),
    ] = None,
    max_variants: Annotated[
        int, typer.Option("--max-variants", help="SNVs read from --variants, at most.")
    ] = default_of(PrecisionRequest, "max_variants"),
    max_nll_diff: Annotated[
        float,
        typer.Option("--max-nll-diff", help="Fail above this |NLL difference| (nats/base)."),
    ] = default_of(Thresholds, "max_nll_diff"),
    max_logprob_error: Annotated[
        float,
        typer.Option("--max-logprob-error", help="Fail above this max |log p| error (nats)."),
    ] = default_of(Thresholds, "max_logprob_error"),
    min_spearman: Annotated[
        float,
        typer.Option("--min-spearman", help="Fail below this Spearman of variant LLRs."),
    ] = default_of(Thresholds, "min_spearman"),
    batch_size: Annotated[int, option("batch_size", "Windows per forward pass.")] = default_of(
        PrecisionRequest, "batch_size"
    ),
    out: Annotated[Path | None, option("out", "Also write the report as JSON here.")] = None,
    force: Annotated[bool, option("force", "Replace an existing --out.")] = False,
    accelerator: AcceleratorOpt = default_of(PrecisionRequest, "accelerator"),
    devices: OneDeviceOpt = "1",
) -> None:
    """Check a precision and attention backend against a float64 reference: exit 1 if it fails.

    Prints the NLL difference, the max log-prob error and the Spearman of variant LLRs beside
    their thresholds, and a verdict; exit status 0 (pass), 1 (a threshold exceeded), 2 (bad
    input).
    """
    from goatdna.inference.precision_check import report_lines
    from goatdna.inference.precision_run import check_precision as run
    from goatdna.inference.precision_run import write_report

    request = PrecisionRequest(
        checkpoint=checkpoint,
        fasta=fasta,
        variants=variants,
        precision=precision,
        attention=attention,
        reference=reference,
        windows=windows,
        length=length,
        max_variants=max_variants,
        thresholds=Thresholds(max_nll_diff, max_logprob_error, min_spearman),
        batch_size=batch_size,
        out=out,
        force=force,
        accelerator=accelerator,
        devices=devices,
    )
    report = run(request, progress=ProgressLine("check-precision", "window passes"))
    for line in report_lines(report):
        typer.echo(line)
    if out is not None:
        write_report(report, out)
    if not report.passed:
        raise typer.Exit(FAILED_EXIT)
