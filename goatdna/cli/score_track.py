"""`goatdna score-track`: per-base log-probability / entropy tracks for genome browsers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from goatdna.cli.common import (
    AcceleratorOpt,
    DevicesOpt,
    NumNodesOpt,
    TrainCheckpointOpt,
    default_of,
    option,
)
from goatdna.inference.tracks import DEFAULT_BATCH_TOKENS, DEFAULT_ZOOM_LEVELS, TrackOptions
from goatdna.runtime import Runtime


def score_track(
    checkpoint: TrainCheckpointOpt,
    fasta: Annotated[Path, option("fasta")],
    out: Annotated[
        Path,
        option(
            "out",
            "TRACK.bw (bigWig) or TRACK.bedGraph; with several --what, one TRACK.<what>.bw each.",
        ),
    ],
    region: Annotated[
        list[str] | None,
        option(
            "region",
            "contig:start-end, 1-based inclusive (repeatable), e.g. 20:1000001-1100000.",
        ),
    ] = None,
    bed: Annotated[
        Path | None,
        typer.Option(
            "--bed", help="BED file of regions (0-based, half-open), instead of --region."
        ),
    ] = None,
    context: Annotated[
        int | None,
        typer.Option(
            "--context",
            help="Window length C (default: the training length; longer extrapolates).",
        ),
    ] = None,
    stride: Annotated[
        int | None,
        typer.Option("--stride", help="Window start step S, 1 <= S < C (default: C // 2)."),
    ] = None,
    what: Annotated[
        list[str] | None,
        typer.Option(
            "--what", help="logp (of the reference base) or entropy (repeatable; default logp)."
        ),
    ] = None,
    strands: Annotated[
        str, option("strands", "both (average with the reverse complement) or forward.")
    ] = default_of(TrackOptions, "strands"),
    batch_size: Annotated[
        int,
        option(
            "batch_size",
            f"Windows per forward pass (default 0: {DEFAULT_BATCH_TOKENS:,} // C).",
        ),
    ] = default_of(TrackOptions, "batch_size"),
    accelerator: AcceleratorOpt = default_of(Runtime, "accelerator"),
    devices: DevicesOpt = str(default_of(Runtime, "devices")),
    num_nodes: NumNodesOpt = default_of(Runtime, "num_nodes"),
    zoom_levels: Annotated[
        int,
        typer.Option(
            "--zoom-levels",
            help="bigWig zoom levels that browsers read when zoomed out, 0-10: the N finest of "
            "those written (160 bp, x4 per level); 0 = none, readers summarise the bases.",
        ),
    ] = DEFAULT_ZOOM_LEVELS,
    resume: Annotated[
        bool,
        option(
            "resume",
            "Continue an interrupted run with the same inputs from its last complete block.",
        ),
    ] = False,
    force: Annotated[bool, option("force", "Replace existing track files at --out.")] = False,
) -> None:
    """Score every base of the regions under a model and write bigWig or bedGraph tracks.

    Windows of C bases start every S bases from the region start; the base at offset i is scored in window 0 if i < C, else in window (i - C) // S + 1; both strands are averaged.
    """
    from goatdna.console import output_console
    from goatdna.inference.tracks import ScoreTrackRequest
    from goatdna.inference.tracks import score_track as run

    runtime = Runtime.from_options(accelerator, devices, num_nodes)
    request = ScoreTrackRequest(
        checkpoint=checkpoint,
        fasta=fasta,
        out=out,
        regions=tuple(region or ()),
        bed=bed,
        context=context,
        stride=stride,
        what=tuple(what or ()),
        strands=strands,
        batch_size=batch_size,
        zoom_levels=zoom_levels,
        resume=resume,
        force=force,
    )
    result = run(request, runtime)
    if result is None:  # not global rank 0: rank 0 reports
        return
    console = output_console(stderr=True)
    for quantity, path in result.paths.items():
        console.print(
            f"wrote {path} ({quantity}, {result.scored_bases:,} bases with a value)", markup=False
        )
