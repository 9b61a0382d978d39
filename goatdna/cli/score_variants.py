"""`goatdna score-variants`: zero-shot log-likelihood ratios of the ALT alleles of a VCF or table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from goatdna.cli.common import (
    AcceleratorOpt,
    DevicesOpt,
    NumNodesOpt,
    WorkResumeOpt,
    default_of,
    option,
)
from goatdna.inference.calibration import CalibrationRequest
from goatdna.inference.variant_run import ScoreVariantsRequest
from goatdna.runtime import Runtime


def score_variants(
    checkpoint: Annotated[Path, option("checkpoint", "A .ckpt written by `goatdna train`.")],
    fasta: Annotated[
        Path,
        option("fasta", "Reference FASTA (.fa, .fa.gz or bgzip) the VCF is called against."),
    ],
    variants: Annotated[
        Path,
        typer.Option(
            "--variants",
            "--vcf",
            help="Input variants: a VCF (.vcf, .vcf.gz, .bcf) or a table with columns chrom, "
            "pos (1-based), ref, alt (.tsv, .csv, .parquet; other columns are carried to the "
            "output). Chosen by the suffix; --vcf is the same option.",
        ),
    ],
    out: Annotated[
        Path,
        option(
            "out",
            "Output: .tsv, .parquet (one row per ALT allele) or .vcf.gz (the input VCF with "
            "INFO/GOATDNA_LLR added; bgzipped and tabix-indexed).",
        ),
    ],
    window: Annotated[
        int | None,
        typer.Option(
            "--window",
            help="W: W // 2 reference bases on each side of the alleles (default: training "
            "length). At most the model's memory bound (docs/variants.md); alleles longer than "
            "W are not scored (status too_long).",
        ),
    ] = None,
    strands: Annotated[
        str,
        option(
            "strands",
            "both: average the forward and reverse-complement LLRs; forward: forward only.",
        ),
    ] = default_of(ScoreVariantsRequest, "strands"),
    length_fair: Annotated[
        bool,
        typer.Option(
            "--length-fair/--length-unfair",
            help="Indels: extend the shorter allele's window so both score the same number of "
            "positions (default), or score the plain windows of unequal length (the earlier "
            "definition).",
        ),
    ] = default_of(ScoreVariantsRequest, "length_fair"),
    batch_size: Annotated[
        int, option("batch_size", "Allele pairs (one strand each) per forward pass.")
    ] = default_of(ScoreVariantsRequest, "batch_size"),
    chunk_size: Annotated[
        int,
        typer.Option("--chunk-size", help="Alleles per resumable chunk (the unit --resume keeps)."),
    ] = default_of(ScoreVariantsRequest, "chunk_size"),
    accelerator: AcceleratorOpt = default_of(Runtime, "accelerator"),
    devices: DevicesOpt = str(default_of(Runtime, "devices")),
    num_nodes: NumNodesOpt = default_of(Runtime, "num_nodes"),
    resume: WorkResumeOpt = False,
    force: Annotated[
        bool,
        option(
            "force",
            "Replace an existing file at --out, and start over an interrupted run's work.",
        ),
    ] = False,
    cache_dir: Annotated[
        Path | None,
        option(
            "cache_dir",
            "Where a plain-gzip FASTA is decompressed once (default: OUT's folder/.goatdna-cache).",
        ),
    ] = None,
    calibrate: Annotated[
        bool,
        typer.Option(
            "--calibrate",
            help="Add context, llr_percentile and llr_z per SNV against a seeded null of random "
            "SNVs of its trinucleotide context (scored once, then reused from the cache folder).",
        ),
    ] = False,
    null: Annotated[
        Path | None,
        typer.Option(
            "--null",
            help="The null's file (.npz): made on the first run, reused while the inputs and "
            "options match (implies --calibrate).",
        ),
    ] = None,
    seed: Annotated[int, option("seed", "Seed of the null's SNVs (same seed, same null).")] = (
        default_of(CalibrationRequest, "seed")
    ),
    null_size: Annotated[
        int, typer.Option("--null-size", help="Null SNVs per trinucleotide context (32 contexts).")
    ] = default_of(CalibrationRequest, "per_context"),
) -> None:
    """Score each ALT allele of a VCF or table: LL(alt window) - LL(ref window), strands averaged."""
    from goatdna.atomic import check_output_file
    from goatdna.console import output_console
    from goatdna.inference.variant_run import no_score_warning, summary_table
    from goatdna.inference.variant_run import score_variants as run
    from goatdna.workdir import stops_with_resume_hint, work_dir_for

    check_output_file(out, "--out")  # before any work: a file we can write (and its cache)
    runtime = Runtime.from_options(accelerator, devices, num_nodes)
    calibration = CalibrationRequest(null, seed, null_size) if calibrate or null else None
    request = ScoreVariantsRequest(
        checkpoint=checkpoint,
        fasta=fasta,
        variants=variants,
        out=out,
        window=window,
        strands=strands,
        batch_size=batch_size,
        chunk_size=chunk_size,
        resume=resume,
        force=force,
        cache_dir=cache_dir,
        length_fair=length_fair,
        calibration=calibration,
    )
    with stops_with_resume_hint("score-variants", work_dir_for(out)):
        summary = run(request, runtime.fabric())
    if summary is None:  # not global rank 0: rank 0 reports
        return
    console = output_console()
    console.print(summary_table(summary))
    if summary.resumed_chunks:
        console.print(f"resumed: {summary.resumed_chunks} chunk(s) were already scored")
    tbi = " (+ .tbi)" if str(out).endswith(".vcf.gz") else ""
    console.print(f"wrote {summary.out}{tbi}", markup=False)
    warning = no_score_warning(summary)
    if warning is not None:
        typer.echo(warning, err=True)
