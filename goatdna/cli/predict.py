"""`goatdna predict`: a fine-tuned classifier applied to a table of sequences."""

from __future__ import annotations

from pathlib import Path

import typer


def predict(
    checkpoint: Path = typer.Option(
        ...,
        "--checkpoint",
        "-c",
        help="A `goatdna finetune` checkpoint (RUN_DIR/checkpoints/best.ckpt).",
    ),
    sequences: Path = typer.Option(
        ..., "--sequences", "-s", help="CSV/TSV/Parquet with a sequence column (or BED + --fasta)."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Output CSV (TSV when it ends in .tsv)."),
    sequence_column: str = typer.Option("sequence", "--sequence-column"),
    fasta: Path | None = typer.Option(None, "--fasta", help="Reference FASTA for BED input."),
    rc_average: bool | None = typer.Option(
        None,
        "--rc-average/--no-rc-average",
        help="Average both strands (default: as the model was fine-tuned).",
    ),
    batch_size: int = typer.Option(64, "--batch-size"),
    devices: str = typer.Option("1", "--devices", help="A count, -1 for all, or ids like 0,1."),
    accelerator: str = typer.Option("auto", "--accelerator", help="auto | cpu | gpu."),
    num_nodes: int = typer.Option(1, "--num-nodes"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bar."),
) -> None:
    """Write the input columns plus prob_<class> and pred (or pred alone for regression)."""
    from goatdna.errors import GoatDNAError
    from goatdna.inference.predict import predict_file
    from goatdna.runtime import Runtime

    if batch_size < 1:
        raise GoatDNAError(f"--batch-size {batch_size}: must be >= 1")
    from goatdna.atomic import check_output_file

    check_output_file(out, "--out")  # before any work: a file we can write
    runtime = Runtime.from_options(accelerator, devices, num_nodes)
    rows = predict_file(
        checkpoint, sequences, out, sequence_column=sequence_column, fasta=fasta,
        rc_average=rc_average, batch_size=batch_size, fabric=runtime.fabric(), progress=progress,
    )  # fmt: skip
    typer.echo(f"{rows} rows -> {out}")
