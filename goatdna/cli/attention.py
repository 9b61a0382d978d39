"""`goatdna attention`: one sequence's attention weights and their two GOAT terms, per head."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from goatdna.cli.common import (
    AcceleratorOpt,
    CacheDirOpt,
    CheckpointOpt,
    OneDeviceOpt,
    ThreadsOpt,
    option,
)


def attention(
    checkpoint: CheckpointOpt,
    out: Annotated[
        list[Path],
        option(
            "out",
            "Output, repeatable; the suffix picks it: .npz (weights, content and prior "
            "(n_layers, H, L, L), per-head summaries and profiles by distance), .png (the figure: "
            "heads x distance profiles, the prior's share, one head's maps).",
        ),
    ],
    sequence: Annotated[
        str | None,
        typer.Option(
            "--sequence", help="The DNA to read (A C G T N), or use --fasta and --region."
        ),
    ] = None,
    fasta: Annotated[Path | None, option("fasta")] = None,
    region: Annotated[
        str | None,
        option(
            "region", "With --fasta: contig:start-end, 1-based inclusive, e.g. 20:1000001-1000256."
        ),
    ] = None,
    layer: Annotated[
        list[int] | None,
        typer.Option(
            "--layer",
            help="A block whose attention to show (0-based; repeatable; default: every block). "
            "Block k reads `goatdna embed --layer k`'s hidden states.",
        ),
    ] = None,
    head: Annotated[
        int,
        typer.Option("--head", help="The head whose maps the figure shows (of the first --layer)."),
    ] = 0,
    force: Annotated[bool, option("force", "Replace existing --out files.")] = False,
    accelerator: AcceleratorOpt = "cpu",
    devices: OneDeviceOpt = "1",
    threads: ThreadsOpt = None,
    cache_dir: CacheDirOpt = None,
) -> None:
    """Show which heads are positional and which content-driven: weights, content logits and prior."""
    from goatdna.analysis.attention import summary_frame
    from goatdna.analysis.attention_run import AttentionRequest
    from goatdna.analysis.attention_run import attention as run
    from goatdna.cli.common import print_frame
    from goatdna.console import output_console
    from goatdna.inference.reference import read_region

    request = AttentionRequest(
        checkpoint=checkpoint,
        outs=tuple(out),
        sequence=sequence,
        fasta=fasta,
        region=region,
        layers=tuple(layer) if layer else None,
        head=head,
        force=force,
        accelerator=accelerator,
        devices=devices,
        threads=threads,
        cache_dir=cache_dir,
    )
    result = run(request, read_region)
    console = output_console()
    title = f"{result.label}: {result.bases:,} bases, {result.positional}"
    print_frame(summary_frame(result.maps), title, console=console)
    console.print(result.maps.note)
    if result.bases > result.train_length:
        console.print(
            f"note: {result.bases:,} bases is beyond the training length "
            f"{result.train_length:,} (extrapolation)"
        )
    for path in result.written:
        console.print(f"wrote {path}", markup=False)
