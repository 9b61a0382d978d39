"""`goatdna mutagenesis`: every position of a region x 3 alternative bases (in-silico mutagenesis)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from goatdna.cli.common import (
    AcceleratorOpt,
    DevicesOpt,
    NumNodesOpt,
    OutCacheDirOpt,
    TrainCheckpointOpt,
    WorkForceOpt,
    WorkResumeOpt,
    default_of,
    option,
)
from goatdna.inference.mutagenesis_run import MutagenesisRequest, MutagenesisResult
from goatdna.runtime import Runtime


def _draw(result: MutagenesisResult, path: Path) -> object:
    from goatdna.analysis.plots import plot_ism

    return plot_ism(
        result.scores,
        result.ref,
        path,
        start=result.region.start,
        title=result.title,
        score_label=f"{result.score_name} (nats)",
    )


def mutagenesis(
    checkpoint: TrainCheckpointOpt,
    fasta: Annotated[Path, option("fasta")],
    region: Annotated[
        str, option("region", "contig:start-end, 1-based inclusive, e.g. 20:1000001-1000200.")
    ],
    out: Annotated[
        list[Path],
        option(
            "out",
            "Output, repeatable; the suffix picks it: .tsv/.parquet (one row per position and "
            "alternative), .npz (the L x 4 matrix), .bw/.bedGraph (NAME.min.bw and NAME.mean.bw: "
            "minimum and mean over the 3 alternatives), .png (heatmap under the reference logo).",
        ),
    ],
    method: Annotated[
        str,
        typer.Option(
            "--method",
            help="full: the exact score-variants LLR of each SNV; local: log p(alt | left) - "
            "log p(ref | left) at the base itself (a fast approximation).",
        ),
    ] = default_of(MutagenesisRequest, "method"),
    window: Annotated[
        int | None,
        typer.Option(
            "--window",
            help="W: W // 2 reference bases on each side (default: training length).",
        ),
    ] = None,
    strands: Annotated[
        str,
        option("strands", "both: average forward and reverse complement; forward: forward only."),
    ] = default_of(MutagenesisRequest, "strands"),
    batch_size: Annotated[
        int,
        option(
            "batch_size",
            "full: positions per pass, one strand each (s_ref + 3 ALT suffixes); local: windows.",
        ),
    ] = default_of(MutagenesisRequest, "batch_size"),
    chunk_size: Annotated[
        int,
        typer.Option(
            "--chunk-size", help="Positions per resumable unit (the unit --resume keeps)."
        ),
    ] = default_of(MutagenesisRequest, "chunk_size"),
    accelerator: AcceleratorOpt = default_of(Runtime, "accelerator"),
    devices: DevicesOpt = str(default_of(Runtime, "devices")),
    num_nodes: NumNodesOpt = default_of(Runtime, "num_nodes"),
    resume: WorkResumeOpt = False,
    force: WorkForceOpt = False,
    cache_dir: OutCacheDirOpt = None,
) -> None:
    """Score every position of a region x its 3 alternative bases: exact LLRs or a fast local one."""
    from goatdna.atomic import check_output_file
    from goatdna.console import output_console
    from goatdna.inference.mutagenesis_run import mutagenesis as run
    from goatdna.workdir import stops_with_resume_hint, work_dir_for

    for path in out:
        check_output_file(path, "--out")  # before any work: files we can write
    runtime = Runtime.from_options(accelerator, devices, num_nodes)
    request = MutagenesisRequest(
        checkpoint=checkpoint,
        fasta=fasta,
        region=region,
        outs=tuple(out),
        window=window,
        method=method,
        strands=strands,
        batch_size=batch_size,
        chunk_size=chunk_size,
        resume=resume,
        force=force,
        cache_dir=cache_dir,
    )
    with stops_with_resume_hint("mutagenesis", work_dir_for(request.outs[0])):
        result = run(request, runtime.fabric(), draw=_draw)
    if result is None:  # not global rank 0: rank 0 reports
        return
    console = output_console()
    console.print(result.summary(), markup=False)
    if result.resumed_units:
        console.print(f"resumed: {result.resumed_units} unit(s) were already scored")
    for path in result.written:
        console.print(f"wrote {path}", markup=False)
