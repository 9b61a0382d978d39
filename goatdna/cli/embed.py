"""`goatdna embed`: per-sequence or per-base embeddings of BED regions or a file of sequences."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from goatdna.cli.common import (
    AcceleratorOpt,
    CheckpointOpt,
    DevicesOpt,
    NumNodesOpt,
    WorkForceOpt,
    WorkResumeOpt,
    default_of,
    option,
)
from goatdna.inference.embed import EmbedOptions
from goatdna.runtime import Runtime


def embed(
    checkpoint: CheckpointOpt,
    out: Annotated[Path, option("out", "Output: .npz, .parquet or .zarr.")],
    fasta: Annotated[
        Path | None,
        option("fasta", "Reference FASTA (indexed; bgzip if compressed); use with --bed."),
    ] = None,
    bed: Annotated[
        Path | None,
        typer.Option(
            "--bed",
            help="Regions to embed (BED: chrom, 0-based start, end, optional name and strand).",
        ),
    ] = None,
    sequences: Annotated[
        Path | None,
        option(
            "sequences",
            "FASTA, or CSV/TSV with a 'sequence' column (other columns are carried to --out).",
        ),
    ] = None,
    layer: Annotated[
        int | None,
        typer.Option(
            "--layer",
            help="1-based block whose output to take (default: the final norm's; for a "
            "`goatdna finetune` probe checkpoint, the layer its probe reads).",
        ),
    ] = None,
    pool: Annotated[
        str | None,
        typer.Option(
            "--pool",
            help=f"mean | last | none (one vector per base) (default: {default_of(EmbedOptions, 'pool')}; "
            "for a `goatdna finetune` probe checkpoint, the pooling its probe reads).",
        ),
    ] = None,
    strands: Annotated[
        str, option("strands", "forward | both (average with the reverse complement).")
    ] = default_of(EmbedOptions, "strands"),
    max_length: Annotated[
        int | None,
        typer.Option(
            "--max-length",
            help="Chunk length M (default: 4x training length for GOAT, 1x for RoPE); longer "
            "sequences are cut into consecutive chunks of M.",
        ),
    ] = None,
    batch_size: Annotated[int, option("batch_size", "Chunks per forward pass.")] = default_of(
        EmbedOptions, "batch_size"
    ),
    accelerator: AcceleratorOpt = default_of(Runtime, "accelerator"),
    devices: DevicesOpt = str(default_of(Runtime, "devices")),
    num_nodes: NumNodesOpt = default_of(Runtime, "num_nodes"),
    resume: WorkResumeOpt = False,
    force: WorkForceOpt = False,
) -> None:
    """Embed DNA with a trained model: hidden states of a layer, pooled per sequence or per base."""
    from functools import partial

    from goatdna.inference.embed_run import EmbedRequest
    from goatdna.inference.embed_run import embed as run

    request = EmbedRequest(
        checkpoint=checkpoint,
        out=out,
        fasta=fasta,
        bed=bed,
        sequences=sequences,
        layer=layer,
        pool=pool,
        strands=strands,
        max_length=max_length,
        batch_size=batch_size,
        resume=resume,
        force=force,
    )
    result = run(request, partial(Runtime.from_options, accelerator, devices, num_nodes))
    if result is not None:  # global rank 0 wrote it
        options = result.options
        typer.echo(
            f"wrote {result.records} embedding(s) (layer {options.layer or 'final norm'}, pool "
            f"{options.pool}, M={result.max_length}) to {out}",
            err=True,
        )
