"""`goatdna mutagenesis`: every position of a region x 3 alternative bases (in-silico mutagenesis)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from goatdna.cli.common import (
    AcceleratorOpt,
    DevicesOpt,
    NumNodesOpt,
    OutCacheDirOpt,
    TrainCheckpointOpt,
    WorkForceOpt,
    WorkResumeOpt,
    config_flags,
    default_of,
    option,
)
from goatdna.inference.mutagenesis_run import (
    MUTAGENESIS_FLAGS,
    MutagenesisRequest,
    MutagenesisResult,
)
from goatdna.runtime import Runtime


def _draw(result: MutagenesisResult, path: Path) -> object:
    from goatdna.analysis.plots import plot_ism

    return plot_ism(result.scores, result.ref, path, **result.figure_labels())


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
    accelerator: AcceleratorOpt = default_of(Runtime, "accelerator"),
    devices: DevicesOpt = str(default_of(Runtime, "devices")),
    num_nodes: NumNodesOpt = default_of(Runtime, "num_nodes"),
    resume: WorkResumeOpt = False,
    force: WorkForceOpt = False,
    cache_dir: OutCacheDirOpt = None,
    **flags: Any,
) -> None:
    """Score every position of a region x its 3 alternative bases: exact LLRs or a fast local one."""
    from goatdna.atomic import check_output_file
    from goatdna.configfile import options_with_flags
    from goatdna.inference.mutagenesis_run import mutagenesis as run
    from goatdna.workdir import stops_with_resume_hint, work_dir_for

    for path in out:
        check_output_file(path, "--out")  # before any work: files we can write
    runtime = Runtime.from_options(accelerator, devices, num_nodes)
    request = options_with_flags(
        MutagenesisRequest,
        MUTAGENESIS_FLAGS,
        flags,
        checkpoint=checkpoint,
        fasta=fasta,
        region=region,
        outs=tuple(out),
        resume=resume,
        force=force,
        cache_dir=cache_dir,
    )
    with stops_with_resume_hint("mutagenesis", work_dir_for(request.outs[0])):
        result = run(request, runtime.fabric(), draw=_draw)
    if result is not None:  # global rank 0 reports
        result.print_report()


config_flags(
    mutagenesis,
    MutagenesisRequest,
    MUTAGENESIS_FLAGS,
    ("checkpoint", "fasta", "region", "out", ..., "accelerator", "devices", "num_nodes")
    + ("resume", "force", "cache_dir"),
    own_defaults=True,
)
