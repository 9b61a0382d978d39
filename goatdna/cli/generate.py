"""`goatdna generate`: continue a nucleotide prompt with a trained checkpoint."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

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
from goatdna.errors import GoatDNAError

_SAMPLING = SamplingOptions()  # the library's sampling defaults

LONG_JOB_STEPS = 20_000
"""Decoding steps (or prompt bases) above which generate shows a progress bar on stderr."""


@contextlib.contextmanager
def decoding_progress(prompt_length: int, total_steps: int) -> Iterator[Any]:
    """Progress on stderr for long jobs (`goatdna.progress.progress_bar`: a bar on a terminal,
    timed lines in a log): the prompt's prefill first, then one tick per base."""
    if max(prompt_length, total_steps) < LONG_JOB_STEPS:
        yield None
        return
    from goatdna.progress import progress_bar

    label = f"generate after a {prompt_length:,}-base prompt"
    with progress_bar(label, total_steps, "bases") as advance:
        yield advance


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
    from goatdna.analysis.generate import (
        generate_continuations,
        parse_prompt,
        read_prompt_fasta,
    )
    from goatdna.analysis.output import format_generation, output_format
    from goatdna.atomic import atomic_write_text, check_output_file
    from goatdna.checkpoint import load_checkpoint
    from goatdna.runtime import single_device

    if (prompt is None) == (prompt_fasta is None):
        raise GoatDNAError("give exactly one of --prompt or --prompt-fasta")
    if region is not None and prompt_fasta is None:
        raise GoatDNAError("--region needs --prompt-fasta")
    if prompt_fasta is not None:
        text, label = read_prompt_fasta(prompt_fasta, region)
    else:
        text, label = prompt or "", "prompt"
    parse_prompt(text)  # fail on a bad prompt before loading the checkpoint
    device = single_device(accelerator, devices)
    fmt = output_format(out)
    if out is not None:  # before the checkpoint is loaded and decoding starts
        from goatdna.workdir import claim_output

        check_output_file(out, "--out")
        claim_output([out], force, inputs=[checkpoint, prompt_fasta])
    options = SamplingOptions(
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        num_samples=num_samples,
        seed=seed,
    )
    options.validate()
    model = load_checkpoint(
        checkpoint, device=device, rope_extension=rope_extension, lm_command="generate"
    ).model
    batches = -(-num_samples // options.batch_size)
    with decoding_progress(len(text.strip()), max_new_tokens * batches) as on_step:
        samples = generate_continuations(model, [text], options, on_step, threads)[0]
    document = format_generation(
        fmt, str(checkpoint), label, text.strip(), samples, options, with_prompt
    )
    if out is None:
        typer.echo(document, nl=False)
    else:
        atomic_write_text(out, document)
        typer.echo(f"wrote {len(samples)} sample(s) to {out}", err=True)
