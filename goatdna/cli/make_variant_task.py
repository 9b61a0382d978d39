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
    from goatdna.atomic import check_output_file
    from goatdna.errors import GoatDNAError
    from goatdna.formats import output_format
    from goatdna.workdir import output_lock

    kind = output_format(out, (".tsv", ".parquet")).kind  # the one suffix rule
    check_output_file(out, "--out")  # a file we can write, before any work
    if positives < 1:
        raise GoatDNAError(f"--positives {positives}: must be >= 1")
    if not 0 < held_out <= 1:
        raise GoatDNAError(f"--held-out {held_out}: must be in (0, 1]")
    if not fasta.is_file():
        raise GoatDNAError(f"--fasta {fasta}: file not found")
    with output_lock(out, True):  # one writer of --out, from before the FASTA is read
        _build_and_write(fasta, out, kind, VariantTaskOptions(positives, held_out, seed), force)


def _build_and_write(
    fasta: Path, out: Path, kind: str, options: VariantTaskOptions, force: bool
) -> None:
    from goatdna.atomic import atomic_path
    from goatdna.data_prep.variant_task import CONTROLS, has_planted_truth
    from goatdna.data_prep.variant_task import make_variant_task as build
    from goatdna.errors import GoatDNAError
    from goatdna.workdir import claim_output

    claim_output([out], force, inputs=[fasta])
    frame = build(fasta, options)
    if frame.empty:
        raise GoatDNAError(
            f"--fasta {fasta}: no soft-masked homopolymer runs nor background bases found; pass "
            "a synthetic genome (goatdna prepare --synthetic, or the demo's shards/synthetic.fa)"
        )
    with atomic_path(out) as tmp:
        if kind == "parquet":
            frame.to_parquet(tmp, index=False)
        else:
            frame.to_csv(tmp, sep="\t", index=False)
    if not has_planted_truth(fasta):
        typer.echo(
            f"warning: --fasta {fasta} is not a goatdna synthetic genome (no 'synthetic seed=' "
            "in its headers): the labels mark soft-masked homopolymer breaks and new CpGs, but "
            "carry no planted truth here",
            err=True,
        )
    made, positives, held_out = int(frame.label.sum()), options.positives, options.held_out
    negatives = len(frame) - made
    if made < positives or negatives < CONTROLS * positives:
        typer.echo(
            f"warning: made {made:,} positives and {negatives:,} negatives of the {positives:,} "
            f"and {CONTROLS * positives:,} asked: --held-out {held_out} leaves too few positions "
            "(raise --held-out, or ask for fewer --positives)",
            err=True,
        )
    counts = frame.element.value_counts().to_dict()
    typer.echo(
        f"{len(frame):,} SNVs: " + ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items()))
    )
    typer.echo(f"wrote {out}")
