"""`goatdna generate`: continue a nucleotide prompt with a trained checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from goatdna.analysis.generate import MAX_NEW_TOKENS, SamplingOptions
from goatdna.cli.common import (
    AcceleratorOpt,
    CheckpointOpt,
    NumSamplesOpt,
    OneDeviceOpt,
    RopeExtensionOpt,
    SeedOpt,
    TemperatureOpt,
    ThreadsOpt,
    TopKOpt,
    option,
)

_SAMPLING = SamplingOptions()  # the library's sampling defaults


def generate(
    checkpoint: CheckpointOpt,
    prompt: Annotated[
        str | None,
        typer.Option(
            "--prompt", "-p", help="Prompt bases (A C G T N, any case; IUPAC codes read as N)."
        ),
    ] = None,
    prompt_fasta: Annotated[
        Path | None,
        typer.Option(
            "--prompt-fasta", help="Read the prompt from this FASTA file (use with --region)."
        ),
    ] = None,
    region: Annotated[
        str | None,
        option(
            "region",
            "chr:start-end (1-based, inclusive) or a record name in --prompt-fasta; optional when "
            "the file holds one record.",
        ),
    ] = None,
    max_new_tokens: Annotated[
        int,
        typer.Option(
            "--max-new-tokens", help=f"Bases to generate per sample (at most {MAX_NEW_TOKENS:,})."
        ),
    ] = _SAMPLING.max_new_tokens,
    temperature: TemperatureOpt = _SAMPLING.temperature,
    top_k: TopKOpt = _SAMPLING.top_k,
    num_samples: NumSamplesOpt = _SAMPLING.num_samples,
    seed: SeedOpt = _SAMPLING.seed,
    out: Annotated[
        Path | None,
        option("out", "Write FASTA (.fa/.fasta/.fna) or JSON (.json); default: FASTA on stdout."),
    ] = None,
    with_prompt: Annotated[
        bool,
        typer.Option(
            "--with-prompt", help="Write prompt + continuation instead of the continuation only."
        ),
    ] = False,
    force: Annotated[bool, option("force", "Replace an existing --out.")] = False,
    accelerator: AcceleratorOpt = "cpu",
    devices: OneDeviceOpt = "1",
    rope_extension: RopeExtensionOpt = None,
    threads: ThreadsOpt = None,
) -> None:
    """Continue a DNA prompt with a trained model (KV-cached sampling; never emits N)."""
    from goatdna.analysis.generate_run import GenerateRequest
    from goatdna.analysis.generate_run import generate as run

    sampling = SamplingOptions(
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        num_samples=num_samples,
        seed=seed,
    )
    request = GenerateRequest(
        checkpoint=checkpoint,
        sampling=sampling,
        prompt=prompt,
        prompt_fasta=prompt_fasta,
        region=region,
        out=out,
        with_prompt=with_prompt,
        force=force,
        accelerator=accelerator,
        devices=devices,
        rope_extension=rope_extension,
        threads=threads,
    )
    result = run(request)
    if out is None:
        typer.echo(result.document, nl=False)
    else:
        typer.echo(f"wrote {len(result.samples)} sample(s) to {out}", err=True)
