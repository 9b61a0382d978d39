"""`goatdna make-variant-task`: a labelled SNV set with known truth on the synthetic genome."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from goatdna.cli.common import SeedOpt, default_of, option
from goatdna.data_prep.variant_task import VariantTaskOptions


def make_variant_task(
    fasta: Annotated[
        Path,
        option("fasta", "The synthetic genome's FASTA (the demo's OUT/shards/synthetic.fa)."),
    ],
    out: Annotated[
        Path,
        option("out", "The task table: .tsv or .parquet (chrom, pos, ref, alt, label, ...)."),
    ],
    positives: Annotated[
        int,
        typer.Option(
            "--positives",
            help="Positive SNVs: half break planted homopolymers (fewer if the genome has "
            "fewer), the rest create a CpG; three background negatives each.",
        ),
    ] = default_of(VariantTaskOptions, "positives"),
    held_out: Annotated[
        float,
        typer.Option(
            "--held-out",
            help="Draw positions from the last fraction of each contig (prepare's val + test).",
        ),
    ] = default_of(VariantTaskOptions, "held_out"),
    seed: SeedOpt = default_of(VariantTaskOptions, "seed"),
    force: Annotated[bool, option("force", "Replace an existing --out.")] = False,
) -> None:
    """SNVs that break what the synthetic generator planted (label 1) and background SNVs (0)."""
    from goatdna.data_prep.variant_task import VariantTaskRequest, write_variant_task

    options = VariantTaskOptions(positives, held_out, seed)
    result = write_variant_task(VariantTaskRequest(fasta, out, options, force))
    for warning in result.warnings:
        typer.echo(warning, err=True)
    counts = sorted(result.counts.items())
    typer.echo(f"{result.rows:,} SNVs: " + ", ".join(f"{k} {v:,}" for k, v in counts))
    typer.echo(f"wrote {out}")
