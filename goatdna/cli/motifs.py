"""`goatdna motifs`: TF-MoDISco motifs (MEME file, seqlets, logos) from `attribute` output."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from goatdna.analysis.motifs import MotifOptions
from goatdna.cli.common import default_of, option


def motifs(
    attributions: Annotated[
        Path,
        typer.Option(
            "--attributions",
            help="A `goatdna attribute` .npz, or a `goatdna mutagenesis --out x.npz` matrix.",
        ),
    ],
    out: Annotated[Path, option("out", "Folder for motifs.meme, seqlets.tsv and motifs.html.")],
    window: Annotated[
        int, typer.Option("--window", help="Seqlet scoring window (modisco's sliding window).")
    ] = default_of(MotifOptions, "window"),
    flank: Annotated[
        int, typer.Option("--flank", help="Bases added on each side of a seqlet.")
    ] = default_of(MotifOptions, "flank"),
    trim: Annotated[
        int, typer.Option("--trim", help="Width patterns are trimmed to.")
    ] = default_of(MotifOptions, "trim"),
    min_seqlets: Annotated[
        int, typer.Option("--min-seqlets", help="Fewest seqlets a reported pattern has.")
    ] = default_of(MotifOptions, "min_seqlets"),
    max_seqlets: Annotated[
        int, typer.Option("--max-seqlets", help="Seqlets clustered per sign (+/-).")
    ] = default_of(MotifOptions, "max_seqlets"),
    min_metacluster: Annotated[
        int,
        typer.Option("--min-metacluster", help="Fewest seqlets of one sign worth clustering."),
    ] = default_of(MotifOptions, "min_metacluster"),
    leiden_runs: Annotated[
        int,
        typer.Option(
            "--leiden-runs", help="Leiden clusterings per round, best kept (fewer: faster)."
        ),
    ] = default_of(MotifOptions, "leiden_runs"),
    force: Annotated[bool, option("force", "Replace an existing --out folder.")] = False,
) -> None:
    """Discover motifs in attributions with TF-MoDISco and write them as MEME, TSV and HTML logos."""
    import numpy as np

    from goatdna.analysis.motif_report import html_page, meme_text, seqlet_rows
    from goatdna.analysis.motifs import OUTPUT_FILES, discover, read_attributions
    from goatdna.atomic import atomic_dir, check_output_dir
    from goatdna.inference.attribute_run import need_library
    from goatdna.workdir import claim_output_folder, output_lock

    options = MotifOptions(
        window, flank, trim, min_seqlets, max_seqlets, min_metacluster, leiden_runs
    )
    check_output_dir(out, "--out")  # before any work: a folder we can write

    def claim() -> None:  # the one rule: only an earlier motifs folder, never an input's
        claim_output_folder(out, force, owns=lambda entry: entry.name in OUTPUT_FILES,
                            what="motifs output", inputs=[attributions])  # fmt: skip

    claim()
    need_library("modiscolite", "goatdna motifs")
    data = read_attributions(attributions)
    with output_lock(out, True):  # one writer of --out: a second run is refused
        claim()  # again, now that no other run can write there
        patterns = discover(data, options)
        counts = data.one_hot.sum(axis=(0, 1))
        background = counts / counts.sum() if counts.sum() else np.full(4, 0.25)
        with atomic_dir(out) as folder:  # the old folder goes only once the new one is whole
            (folder / "motifs.meme").write_text(meme_text(patterns, background))
            (folder / "seqlets.tsv").write_text(seqlet_rows(patterns, data.names))
            (folder / "motifs.html").write_text(html_page(patterns, data.source, len(data.names)))
    summary = ", ".join(f"{p.name} ({len(p.seqlets)} seqlets)" for p in patterns) or "none"
    typer.echo(f"{len(patterns)} pattern(s): {summary} -> {out}")
