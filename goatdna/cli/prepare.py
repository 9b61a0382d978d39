"""`goatdna prepare`: a reference FASTA (or the embedded synthetic genome) -> nucleotide shards.

Its flags that set `PrepareOptions` fields (``--contigs``, ``--val-fraction`` ...) are the
library's `PREPARE_FLAGS`, declared next to the dataclass; the signature Typer reads is built
from them (`config_flags`, with the fields' defaults), and `options_with_flags` fills it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from goatdna.cli.common import config_flags, default_of, option
from goatdna.data_prep.options import PREPARE_FLAGS, PrepareOptions
from goatdna.data_prep.synthetic import SyntheticGenomeConfig


def prepare(
    out: Annotated[
        Path, option("out", "Output directory for train/val/test.bin and manifest.json.")
    ],
    fasta: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Reference FASTA: plain, gzip or bgzip; several files make one multi-source "
            "dataset (see --source-names). Omit it with --synthetic.",
            show_default=False,
        ),
    ] = None,
    synthetic: Annotated[
        bool,
        typer.Option(
            "--synthetic",
            help="Write the embedded synthetic genome to OUT/synthetic.fa and prepare it "
            "(no FASTA argument needed).",
        ),
    ] = False,
    synthetic_length: Annotated[
        int, typer.Option("--synthetic-length", help="Total bases of the synthetic genome.")
    ] = default_of(SyntheticGenomeConfig, "total_length"),
    synthetic_contigs: Annotated[
        int, typer.Option("--synthetic-contigs", help="Number of contigs of the synthetic genome.")
    ] = default_of(SyntheticGenomeConfig, "n_contigs"),
    seed: Annotated[
        int, option("seed", "Seed of the synthetic genome (same seed, same bytes).")
    ] = default_of(SyntheticGenomeConfig, "seed"),
    **flags: Any,
) -> None:
    """Turn a reference FASTA into one-byte-per-base shards (train/val/test.bin + manifest.json).

    Bytes: A=0 C=1 G=2 T=3 N=4 (IUPAC codes -> N); bit 0x80 marks soft-masked (lowercase) bases.
    """
    from goatdna.configfile import options_with_flags
    from goatdna.data_prep.prepare import prepare_dataset
    from goatdna.data_prep.progress import Reporter

    # --workers: its range is checked as it is parsed (`PrepareOptions.workers`' bounds)
    options = options_with_flags(PrepareOptions, PREPARE_FLAGS, flags)
    config = SyntheticGenomeConfig(
        total_length=synthetic_length, n_contigs=synthetic_contigs, seed=seed
    )
    reporter = Reporter()
    try:
        genome = prepare_dataset(fasta, out, options, config if synthetic else None, reporter)
    finally:
        reporter.close()
    sizes = ", ".join(f"{s} {genome.split_length(s):,} bp" for s in genome.split_names())
    typer.echo(f"prepared {genome.root}: {sizes}")


config_flags(
    prepare,
    PrepareOptions,
    PREPARE_FLAGS,
    ("out", "fasta", "synthetic", "synthetic_length", "synthetic_contigs", "seed", ...),
    own_defaults=True,
)
