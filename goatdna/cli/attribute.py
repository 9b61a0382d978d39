"""`goatdna attribute`: per-base attributions (ISM, saliency, integrated gradients) of sequences."""

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
)
from goatdna.inference.attribute import AttributeOptions
from goatdna.runtime import Runtime


def attribute(
    checkpoint: Annotated[
        Path,
        option(
            "checkpoint",
            "A `goatdna finetune` checkpoint or export (explains a class or the regression "
            "output) or a pretrained `goatdna train` checkpoint (explains the log-likelihood).",
        ),
    ],
    out: Annotated[
        list[Path],
        option(
            "out",
            "Output, repeatable: .npz (attributions and hypothetical (N, L, 4), sequences, "
            "names); with --bed also .bw/.bedGraph (the present base's contribution per base).",
        ),
    ],
    sequences: Annotated[
        Path | None,
        option("sequences", "FASTA, or CSV/TSV/Parquet with a 'sequence' column."),
    ] = None,
    fasta: Annotated[
        Path | None, option("fasta", "Reference FASTA (indexed); use with --bed.")
    ] = None,
    bed: Annotated[
        Path | None,
        typer.Option("--bed", help="Regions (BED: chrom, 0-based start, end, name, strand)."),
    ] = None,
    method: Annotated[
        str, typer.Option("--method", help="ism | saliency | integrated-gradients.")
    ] = default_of(AttributeOptions, "method"),
    target: Annotated[
        str | None,
        typer.Option(
            "--target",
            help="Fine-tuned: the class whose log-probability is explained (default: the last "
            "class; none for regression), or log-odds:CLASS for its log-odds log p/(1-p), "
            "which does not saturate where the model is sure. Language model: loglik "
            "(default) or base:I (log p of base I, 1-based, given the bases before it; with "
            "--strands both averaged with the same base's reverse-strand value, as score-track).",
        ),
    ] = None,
    strands: Annotated[
        str,
        option(
            "strands", "both: explain the mean of both strands' outputs; forward: forward only."
        ),
    ] = default_of(AttributeOptions, "strands"),
    baseline: Annotated[
        str,
        typer.Option(
            "--baseline", help="integrated-gradients: zeros (the all-N sequence) | uniform (0.25)."
        ),
    ] = default_of(AttributeOptions, "baseline"),
    steps: Annotated[
        str,
        typer.Option(
            "--steps",
            metavar="<int|auto>",
            help="integrated-gradients: steps along the path (at most 2048), or auto: from 64, "
            "doubled per sequence until complete within --tolerance.",
        ),
    ] = str(default_of(AttributeOptions, "steps")),
    tolerance: Annotated[
        float,
        typer.Option(
            "--tolerance",
            help="integrated-gradients: the completeness gap |sum(attributions) - (f(x) - "
            "f(baseline))| / |f(x) - f(baseline)| that --steps auto aims for; sequences above "
            "it are warned about.",
        ),
    ] = default_of(AttributeOptions, "tolerance"),
    batch_size: Annotated[
        int,
        option(
            "batch_size",
            "Rows per pass: sequences (saliency), mutants (ism), sequences x path steps "
            "(integrated-gradients); fewer where a pass would pass the memory bound.",
        ),
    ] = default_of(AttributeOptions, "batch_size"),
    accelerator: AcceleratorOpt = default_of(Runtime, "accelerator"),
    devices: DevicesOpt = str(default_of(Runtime, "devices")),
    num_nodes: NumNodesOpt = default_of(Runtime, "num_nodes"),
    progress: Annotated[bool, option("progress")] = True,
    resume: WorkResumeOpt = False,
    force: WorkForceOpt = False,
) -> None:
    """Explain which bases drive a model's output: exact ISM, gradient x input or integrated gradients."""
    from goatdna.inference.attribute_run import AttributeRequest, check_outputs
    from goatdna.inference.attribute_run import attribute as run
    from goatdna.workdir import stops_with_resume_hint, work_dir_for

    options = AttributeOptions(method, target, strands, baseline, steps, batch_size, tolerance)
    check_outputs(out, bed is not None)  # before any work: formats we write, files we can write
    runtime = Runtime.from_options(accelerator, devices, num_nodes)
    request = AttributeRequest(
        checkpoint, tuple(out), options, sequences, fasta, bed, resume, force
    )
    with stops_with_resume_hint("attribute", work_dir_for(request.outs[0])):
        result = run(request, runtime.fabric(), progress=progress)
    if result is not None:  # global rank 0 reports
        typer.echo(result.summary(options), err=True)
