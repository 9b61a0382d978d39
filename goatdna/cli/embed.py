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
    from goatdna.checkpoint import load_checkpoint, task_head
    from goatdna.inference.embed import default_max_length
    from goatdna.inference.embed_io import (
        check_output,
        write_embeddings,
        zarr_entry,
    )
    from goatdna.io.records import check_record_sources, read_records

    check_record_sources(sequences, fasta, bed)
    # a probe's pooling is mean or last, which every output format takes: checked as mean here
    suffix = check_output(out, pool or default_of(EmbedOptions, "pool"))  # before any work
    from goatdna.atomic import check_output_dir, check_output_file

    (check_output_dir if suffix == ".zarr" else check_output_file)(out, "--out")
    from goatdna.workdir import claim_output, claim_output_folder

    read = [sequences, fasta, bed, checkpoint]
    if suffix == ".zarr":  # a folder, swapped in whole: never one holding more than a store
        claim_output_folder(out, force, owns=zarr_entry, what="zarr store", inputs=read)
    else:
        claim_output([out], force, inputs=read)
    runtime = Runtime.from_options(accelerator, devices, num_nodes)
    records = read_records(sequences, fasta, bed)
    loaded = load_checkpoint(checkpoint, device="cpu")
    model = loaded.model
    head = task_head(loaded.run_config)
    if head is not None:  # the layer and pooling the fine-tuned head reads (ckpt or export)
        layer = head.get("layer") if layer is None else layer
        pool = head.get("pool", default_of(EmbedOptions, "pool")) if pool is None else pool
    pool = default_of(EmbedOptions, "pool") if pool is None else pool
    options = EmbedOptions(layer, pool, strands, max_length, batch_size)  # type: ignore[arg-type]
    options.validate(model.n_layers)
    length = max_length if max_length is not None else default_max_length(dict(loaded.run_config))
    from goatdna.inference.embed_run import embed_resumable, embed_work
    from goatdna.inference.loop import rank_zero_lock
    from goatdna.workdir import stops_with_resume_hint

    inputs = [sequences] if sequences else [fasta, bed]
    work = embed_work(out, checkpoint, inputs, options, length, len(records))
    fabric = runtime.fabric()

    def write(vectors: list) -> bool:
        write_embeddings(out, records, vectors, pool, then=work.then)
        return True

    with (
        rank_zero_lock(fabric, out),  # the writing process holds --out for the whole run
        stops_with_resume_hint("embed", work.dir),
    ):
        wrote = embed_resumable(
            model, records, options, length, work, write, resume=resume, force=force, fabric=fabric
        )
        if wrote is not None:  # global rank 0 wrote it
            typer.echo(
                f"wrote {len(records)} embedding(s) (layer {options.layer or 'final norm'}, pool "
                f"{options.pool}, "
                f"M={length}) to {out}",
                err=True,
            )
