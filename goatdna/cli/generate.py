"""`goatdna generate`: continue a nucleotide prompt with a trained checkpoint."""

from __future__ import annotations

from pathlib import Path

import typer

from goatdna.errors import GoatDNAError


def generate(
    checkpoint: Path = typer.Option(
        ..., "--checkpoint", "-c", help="A .ckpt written by `goatdna train`."
    ),
    prompt: str | None = typer.Option(
        None, "--prompt", "-p", help="Prompt bases (A C G T N, any case; IUPAC codes read as N)."
    ),
    prompt_fasta: Path | None = typer.Option(
        None, "--prompt-fasta", help="Read the prompt from this FASTA file (use with --region)."
    ),
    region: str | None = typer.Option(
        None,
        "--region",
        help="chr:start-end (1-based, inclusive) or a record name in --prompt-fasta; "
        "optional when the file holds one record.",
    ),
    max_new_tokens: int = typer.Option(
        200, "--max-new-tokens", help="Bases to generate per sample (at most 100,000)."
    ),
    temperature: float = typer.Option(
        1.0, "--temperature", help="Softmax temperature; 0 = greedy."
    ),
    top_k: int | None = typer.Option(
        None, "--top-k", help="Sample among the k most likely bases (1..4)."
    ),
    num_samples: int = typer.Option(1, "--num-samples", "-n", help="Continuations to draw."),
    seed: int = typer.Option(0, "--seed", help="Random seed; equal seeds give equal samples."),
    out: Path | None = typer.Option(
        None,
        "--out",
        "-o",
        help="Write FASTA (.fa/.fasta/.fna) or JSON (.json); default: FASTA on stdout.",
    ),
    with_prompt: bool = typer.Option(
        False, "--with-prompt", help="Write prompt + continuation instead of the continuation only."
    ),
    device: str = typer.Option("cpu", "--device", help="torch device, e.g. cpu or cuda."),
) -> None:
    """Continue a DNA prompt with a trained model (KV-cached sampling; never emits N)."""
    from goatdna.analysis.checkpoint import load_checkpoint
    from goatdna.analysis.generate import (
        SamplingOptions,
        generate_continuations,
        parse_prompt,
        read_prompt_fasta,
    )
    from goatdna.analysis.output import atomic_write_text, format_generation, output_format
    from goatdna.atomic import check_output_file

    if (prompt is None) == (prompt_fasta is None):
        raise GoatDNAError("give exactly one of --prompt or --prompt-fasta")
    if region is not None and prompt_fasta is None:
        raise GoatDNAError("--region needs --prompt-fasta")
    if prompt_fasta is not None:
        text, label = read_prompt_fasta(prompt_fasta, region)
    else:
        text, label = prompt or "", "prompt"
    parse_prompt(text)  # fail on a bad prompt before loading the checkpoint
    fmt = output_format(out)
    if out is not None:
        check_output_file(out, "--out")  # before the checkpoint is loaded and decoding starts
    options = SamplingOptions(
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        num_samples=num_samples,
        seed=seed,
    )
    options.validate()
    model, _config = load_checkpoint(checkpoint, device=device)
    samples = generate_continuations(model, [text], options)[0]
    document = format_generation(
        fmt, str(checkpoint), label, text.strip(), samples, options, with_prompt
    )
    if out is None:
        typer.echo(document, nl=False)
    else:
        atomic_write_text(out, document)
        typer.echo(f"wrote {len(samples)} sample(s) to {out}", err=True)
