"""Running `goatdna generate`: the prompt to continue, the checks before any work, the sampling
(`goatdna.analysis.generate`) and the FASTA/JSON document (`goatdna.analysis.output`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from goatdna.analysis.generate import SamplingOptions
from goatdna.errors import GoatDNAError

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


@dataclass(frozen=True)
class GenerateRequest:
    """Everything one `generate` run needs (the CLI's options): the prompt as text or a FASTA
    (with an optional ``region``), the sampling, and ``out`` (None: the document is returned)."""

    checkpoint: Path
    sampling: SamplingOptions
    prompt: str | None = None
    prompt_fasta: Path | None = None
    region: str | None = None
    out: Path | None = None
    with_prompt: bool = False
    force: bool = False
    accelerator: str = "cpu"
    devices: str = "1"
    rope_extension: str | None = None
    threads: int | None = None


@dataclass(frozen=True)
class GenerateResult:
    """The document (FASTA or JSON; written to ``out`` when there is one) and its samples."""

    document: str
    samples: list[str]


def generate(request: GenerateRequest) -> GenerateResult:
    """Check the prompt and ``out`` before loading the checkpoint, sample the continuations
    (KV-cached; a progress bar for long jobs) and render them, written to ``out`` if given."""
    from goatdna.analysis.generate import generate_continuations, parse_prompt, read_prompt_fasta
    from goatdna.analysis.output import format_generation, output_format
    from goatdna.atomic import atomic_write_text, check_output_file
    from goatdna.checkpoint import load_checkpoint
    from goatdna.runtime import single_device

    if (request.prompt is None) == (request.prompt_fasta is None):
        raise GoatDNAError("give exactly one of --prompt or --prompt-fasta")
    if request.region is not None and request.prompt_fasta is None:
        raise GoatDNAError("--region needs --prompt-fasta")
    if request.prompt_fasta is not None:
        text, label = read_prompt_fasta(request.prompt_fasta, request.region)
    else:
        text, label = request.prompt or "", "prompt"
    parse_prompt(text)  # fail on a bad prompt before loading the checkpoint
    device = single_device(request.accelerator, request.devices)
    fmt = output_format(request.out)
    if request.out is not None:  # before the checkpoint is loaded and decoding starts
        from goatdna.workdir import claim_output

        check_output_file(request.out, "--out")
        inputs = [request.checkpoint, request.prompt_fasta]
        claim_output([request.out], request.force, inputs=inputs)
    options = request.sampling
    options.validate()
    model = load_checkpoint(
        request.checkpoint,
        device=device,
        rope_extension=request.rope_extension,
        lm_command="generate",
    ).model
    batches = -(-options.num_samples // options.batch_size)
    with decoding_progress(len(text.strip()), options.max_new_tokens * batches) as on_step:
        samples = generate_continuations(model, [text], options, on_step, request.threads)[0]
    prompt = text.strip()
    document = format_generation(
        fmt, str(request.checkpoint), label, prompt, samples, options, request.with_prompt
    )
    if request.out is not None:
        atomic_write_text(request.out, document)
    return GenerateResult(document, samples)
