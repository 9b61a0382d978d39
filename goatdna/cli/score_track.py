"""`goatdna score-track`: per-base log-probability / entropy tracks for genome browsers."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated

import typer

from goatdna.cli.common import (
    AcceleratorOpt,
    DevicesOpt,
    NumNodesOpt,
    default_of,
    option,
)
from goatdna.inference.tracks import DEFAULT_BATCH_TOKENS, DEFAULT_ZOOM_LEVELS, TrackOptions
from goatdna.runtime import Runtime


def score_track(
    checkpoint: Annotated[Path, option("checkpoint", "A .ckpt written by `goatdna train`.")],
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
    from goatdna.checkpoint import load_checkpoint
    from goatdna.console import output_console
    from goatdna.errors import GoatDNAError
    from goatdna.inference.reference import Reference
    from goatdna.inference.tracks import (
        TrackRequest,
        output_paths,
        read_bed,
        resolve_regions,
        write_tracks,
    )
    from goatdna.io.regions import parse_region

    what = what or list(default_of(TrackOptions, "what"))
    runtime = Runtime.from_options(accelerator, devices, num_nodes)
    if bool(region) == (bed is not None):
        raise GoatDNAError("give the regions with --region (repeatable) or with --bed, not both")
    from goatdna.atomic import check_output_file
    from goatdna.workdir import claim_output, input_stamp

    for path in output_paths(out, what).values():  # bad extension or folder: before any work
        check_output_file(path, "--out")
    claim_output(output_paths(out, what).values(), force, inputs=[fasta, checkpoint, bed])
    if not 0 <= zoom_levels <= 10:
        raise GoatDNAError(f"--zoom-levels {zoom_levels}: must be between 0 and 10")
    if context is not None and context < 2:
        raise GoatDNAError(f"--context {context}: must be >= 2")
    if region:
        requested = [parse_region(text) for text in region]
    else:
        assert bed is not None  # exactly one of the two, checked above
        requested = read_bed(bed)
    fabric = runtime.fabric()
    rank_zero = fabric.global_rank == 0  # rank 0 reports and writes; the others only score
    console = output_console(stderr=True, quiet=not rank_zero)
    from goatdna.inference.loop import rank_zero_lock
    from goatdna.progress import progress_bar

    with (
        rank_zero_lock(fabric, out),  # before anything is said: a refusal is the only line
        Reference(fasta, message=lambda text: console.print(text, markup=False)) as reference,
    ):
        regions = resolve_regions(requested, reference)
        loaded = load_checkpoint(checkpoint, "cpu", lm_command="score-track")
        model, train_length = loaded.model, loaded.train_length
        C = context if context is not None else train_length
        options = TrackOptions(
            context=C,
            stride=stride if stride is not None else max(1, C // 2),
            what=tuple(what),
            strands=strands,
            batch_size=batch_size,
        )
        positional = model.config.positional
        note = " (longer than training: extrapolation)" if train_length < C else ""
        total = sum(r.length for r in regions)
        display = ExitStack()
        bars: list[Callable[[int], None]] = []  # the bar's advance, once the run starts

        def advance(bases: int) -> None:
            for bar in bars:
                bar(bases)

        def started() -> None:  # rank 0, once the work folder is open: the run really starts
            console.print(
                f"{positional} model, training length {train_length}; context {C}{note}, "
                f"stride {options.stride}, strands {strands}; {len(regions)} region(s), "
                f"{total:,} bases"
            )
            bars.append(
                display.enter_context(
                    progress_bar("score-track", total, "bases", rank_zero, console)
                )
            )

        from goatdna.workdir import stops_with_resume_hint, work_dir_for

        with display, stops_with_resume_hint("score-track", work_dir_for(out)):
            result = write_tracks(
                model,
                reference,
                regions,
                TrackRequest(
                    out,
                    options,
                    track_name=f"goatdna {positional} C={C}",
                    model_id=str(input_stamp(checkpoint)),
                    zoom_levels=zoom_levels,
                    resume=resume,
                    force=force,
                    locked=True,
                ),
                fabric,
                advance if rank_zero else None,
                message=lambda text: console.print(text, markup=False),
                started=started,
            )
    if result is None:  # not global rank 0: rank 0 reports
        return
    for quantity, path in result.paths.items():
        console.print(
            f"wrote {path} ({quantity}, {result.scored_bases:,} bases with a value)", markup=False
        )
