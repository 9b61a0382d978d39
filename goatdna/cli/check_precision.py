"""`goatdna check-precision`: the model under a precision and attention kernel vs a float64 reference."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from goatdna.cli.common import AcceleratorOpt, CheckpointOpt, OneDeviceOpt, ProgressLine, option
from goatdna.errors import GoatDNAError
from goatdna.formats import json_text

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
    ] = "bf16-mixed",
    attention: Annotated[
        str,
        typer.Option(
            "--attention", help="The attention backend to check: auto | sdpa | flash | explicit."
        ),
    ] = "auto",
    reference: Annotated[
        str,
        typer.Option(
            "--reference", help="Reference dtype on the CPU (SDPA math kernel): float64 | float32."
        ),
    ] = "float64",
    windows: Annotated[int, typer.Option("--windows", help="Windows of --length bases.")] = 8,
    length: Annotated[
        int | None,
        typer.Option("--length", help="Window length (default: the training length)."),
    ] = None,
    max_variants: Annotated[
        int, typer.Option("--max-variants", help="SNVs read from --variants, at most.")
    ] = 64,
    max_nll_diff: Annotated[
        float,
        typer.Option("--max-nll-diff", help="Fail above this |NLL difference| (nats/base)."),
    ] = 0.01,
    max_logprob_error: Annotated[
        float,
        typer.Option("--max-logprob-error", help="Fail above this max |log p| error (nats)."),
    ] = 0.5,
    min_spearman: Annotated[
        float,
        typer.Option("--min-spearman", help="Fail below this Spearman of variant LLRs."),
    ] = 0.95,
    batch_size: Annotated[int, option("batch_size", "Windows per forward pass.")] = 4,
    out: Annotated[Path | None, option("out", "Also write the report as JSON here.")] = None,
    force: Annotated[bool, option("force", "Replace an existing --out.")] = False,
    accelerator: AcceleratorOpt = "auto",
    devices: OneDeviceOpt = "1",
) -> None:
    """Check a precision and attention backend against a float64 reference: exit 1 if it fails.

    Prints the NLL difference, the max log-prob error and the Spearman of variant LLRs beside
    their thresholds, and a verdict; exit status 0 (pass), 1 (a threshold exceeded), 2 (bad
    input).
    """
    from goatdna.atomic import atomic_path, check_output_file
    from goatdna.checkpoint import load_checkpoint
    from goatdna.inference.precision_check import (
        Thresholds,
        check_attention,
        check_options,
        check_size,
        report_lines,
    )
    from goatdna.runtime import single_device

    if out is not None:
        from goatdna.workdir import claim_output

        check_output_file(out, "--out")
        claim_output([out], force, inputs=[checkpoint, fasta, variants])
    if max_variants < 1:
        raise GoatDNAError(f"--max-variants {max_variants}: must be >= 1")
    device = single_device(accelerator, devices)
    loaded = load_checkpoint(checkpoint, "cpu", lm_command="check-precision")
    window = length if length is not None else loaded.train_length
    check_options(precision, reference, windows, window)
    check_attention(attention, precision, device)
    check_size(windows, window, batch_size, loaded.model_config)  # before the FASTA is read
    from goatdna.inference.precision_check import check_precision as run_check
    from goatdna.inference.reference import Reference

    with Reference(fasta) as ref:
        alleles = _read_snvs(variants, ref, max_variants) if variants is not None else None
        report = run_check(
            loaded.model, ref, alleles, precision=precision, attention=attention,
            device=device, reference_dtype=reference, windows=windows, length=window,
            batch_size=batch_size, thresholds=Thresholds(max_nll_diff, max_logprob_error,
                                                         min_spearman),
            progress=ProgressLine("check-precision", "window passes"),
        )  # fmt: skip
    for line in report_lines(report):
        typer.echo(line)
    if out is not None:
        with atomic_path(out) as tmp:
            tmp.write_text(json_text(report.as_json()))
    if not report.passed:
        raise typer.Exit(FAILED_EXIT)


def _read_snvs(path: Path, reference, limit: int) -> list:
    """The first ``limit`` SNVs of the VCF or table whose REF matches the FASTA."""
    from goatdna.inference.variant_io import read_variants
    from goatdna.inference.variants import allele_status

    picked = [
        a for a in read_variants(path).alleles
        if len(a.ref) == len(a.alt) == 1 and allele_status(a, reference) == "ok"
    ][:limit]  # fmt: skip
    if not picked:
        raise GoatDNAError(
            f"{path}: no SNV matches the FASTA's bases (check the contig names and build)"
        )
    return picked
