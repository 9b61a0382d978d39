"""`goatdna prepare`: a reference FASTA (or the embedded synthetic genome) -> nucleotide shards."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from goatdna.cli.common import default_of, option
from goatdna.data_prep.options import DEFAULT_EXCLUDE_CONTIGS, PrepareOptions
from goatdna.data_prep.synthetic import SyntheticGenomeConfig


def _names(value: str | None) -> list[str] | None:
    """Comma-separated option -> list (None stays None = default; '' = empty list)."""
    if value is None:
        return None
    return [item.strip() for item in value.split(",") if item.strip()]


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
    contigs: Annotated[
        str | None,
        typer.Option(
            "--contigs",
            help="Comma-separated contig names or regexes (full match) to keep; default: all. "
            "Names given here must exist.",
        ),
    ] = None,
    exclude_contigs: Annotated[
        str | None,
        typer.Option(
            "--exclude-contigs",
            help="Comma-separated regexes searched in contig names to leave out; default: "
            f"{','.join(DEFAULT_EXCLUDE_CONTIGS)}  ('' excludes nothing).",
        ),
    ] = None,
    min_contig_length: Annotated[
        int,
        typer.Option("--min-contig-length", help="Leave out contigs shorter than this many bases."),
    ] = default_of(PrepareOptions, "min_contig_length"),
    val_contigs: Annotated[
        str | None,
        typer.Option(
            "--val-contigs",
            help="Comma-separated contigs held out for validation (default chr20 when chr20 and "
            "chr21 are both present; otherwise the tail of each contig, see --val-fraction).",
        ),
    ] = None,
    test_contigs: Annotated[
        str | None,
        typer.Option(
            "--test-contigs",
            help="Comma-separated contigs held out for test (default chr21, as --val-contigs).",
        ),
    ] = None,
    split_bed: Annotated[
        Path | None,
        typer.Option(
            "--split-bed",
            help="BED file 'chrom start end split' (split: train/val/test, e.g. HyenaDNA's "
            "sequences_human.bed); its intervals become the records. Overlaps are an error.",
        ),
    ] = None,
    val_fraction: Annotated[
        float,
        typer.Option(
            "--val-fraction",
            help="Without hold-out contigs: share of each contig's tail held out for validation.",
        ),
    ] = default_of(PrepareOptions, "val_fraction"),
    test_fraction: Annotated[
        float,
        typer.Option(
            "--test-fraction",
            help="Without hold-out contigs: share of each contig's tail (after val) held out for "
            "test.",
        ),
    ] = default_of(PrepareOptions, "test_fraction"),
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", "-j", help="Parallel worker processes (default: up to 4 CPU cores)."
        ),
    ] = None,
    force: Annotated[
        bool, option("force", "Overwrite a dataset or an interrupted run already in OUT.")
    ] = False,
    resume: Annotated[
        bool, option("resume", "Finish an interrupted run in OUT (same input and options).")
    ] = False,
    source_names: Annotated[
        str | None,
        typer.Option(
            "--source-names",
            help="Comma-separated name of each FASTA, in order (default: the file names without "
            ".fa/.gz). Contig options then take source:contig for one source; hold-outs apply "
            "per source; contigs found in several files are stored as source:contig.",
        ),
    ] = None,
    cache_dir: Annotated[
        Path | None,
        option("cache_dir", "Where a plain-gzip FASTA is decompressed once (default OUT/cache)."),
    ] = None,
) -> None:
    """Turn a reference FASTA into one-byte-per-base shards (train/val/test.bin + manifest.json).

    Bytes: A=0 C=1 G=2 T=3 N=4 (IUPAC codes -> N); bit 0x80 marks soft-masked (lowercase) bases.
    """
    from goatdna.data_prep.prepare import prepare_dataset
    from goatdna.data_prep.progress import Reporter

    # --workers: its range is checked as it is parsed (`common.NUMERIC_RANGES`)
    options = PrepareOptions(
        contigs=_names(contigs),
        exclude_contigs=_names(exclude_contigs),
        min_contig_length=min_contig_length,
        val_contigs=_names(val_contigs),
        test_contigs=_names(test_contigs),
        split_bed=split_bed,
        val_fraction=val_fraction,
        test_fraction=test_fraction,
        workers=workers,
        force=force,
        resume=resume,
        cache_dir=cache_dir,
        source_names=_names(source_names),
    )
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
