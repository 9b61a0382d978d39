"""`goatdna predict`: a fine-tuned classifier applied to a table of sequences."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from goatdna.cli.common import (
    AcceleratorOpt,
    DevicesOpt,
    NumNodesOpt,
    WorkForceOpt,
    WorkResumeOpt,
    default_of,
    option,
    say_once,
)
from goatdna.inference.predict import predict_file
from goatdna.runtime import Runtime


def predict(
    checkpoint: Annotated[
        Path,
        option("checkpoint", "A `goatdna finetune` checkpoint (RUN_DIR/checkpoints/best.ckpt)."),
    ],
    sequences: Annotated[
        Path,
        option("sequences", "CSV/TSV/Parquet with a sequence column (or BED + --fasta)."),
    ],
    out: Annotated[
        Path,
        option(
            "out",
            "Output table; its suffix picks the format: .tsv, .csv, .parquet, or .tsv.gz/.csv.gz "
            "(gzipped).",
        ),
    ],
    sequence_column: Annotated[
        str, typer.Option("--sequence-column", help="Column holding the sequences.")
    ] = default_of(predict_file, "sequence_column"),
    fasta: Annotated[Path | None, option("fasta", "Reference FASTA for BED input.")] = None,
    rc_average: Annotated[
        bool | None,
        typer.Option(
            "--rc-average/--no-rc-average",
            help="Average both strands (default: as the model was fine-tuned).",
        ),
    ] = None,
    batch_size: Annotated[int, option("batch_size", "Sequences per forward pass.")] = default_of(
        predict_file, "batch_size"
    ),
    devices: DevicesOpt = str(default_of(Runtime, "devices")),
    accelerator: AcceleratorOpt = default_of(Runtime, "accelerator"),
    num_nodes: NumNodesOpt = default_of(Runtime, "num_nodes"),
    progress: Annotated[bool, option("progress")] = True,
    resume: WorkResumeOpt = False,
    force: WorkForceOpt = False,
) -> None:
    """Write the input columns plus prob_<class> and pred (or pred alone for regression)."""
    from goatdna.errors import GoatDNAError

    if batch_size < 1:
        raise GoatDNAError(f"--batch-size {batch_size}: must be >= 1")
    from goatdna.atomic import check_output_file
    from goatdna.formats import TABLE_SUFFIXES, output_format

    output_format(out, TABLE_SUFFIXES)  # before any work: a format we write
    check_output_file(out, "--out")  # and a file we can write
    runtime = Runtime.from_options(accelerator, devices, num_nodes)
    from goatdna.workdir import stops_with_resume_hint, work_dir_for

    with stops_with_resume_hint("predict", work_dir_for(out)):
        rows = predict_file(
            checkpoint, sequences, out, sequence_column=sequence_column, fasta=fasta,
            rc_average=rc_average, batch_size=batch_size, fabric=runtime.fabric(),
            progress=progress, resume=resume, force=force,
        )  # fmt: skip
    say_once(f"{rows} rows -> {out}")
