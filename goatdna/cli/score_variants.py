"""`goatdna score-variants`: zero-shot log-likelihood ratios of the ALT alleles of a VCF or table.

Its flags that set `ScoreVariantsRequest` and `CalibrationRequest` fields (``--window``,
``--null-size`` ...) are the library's `SCORE_VARIANTS_FLAGS` and `CALIBRATION_FLAGS`, declared
next to the requests (`config_flags`, with the fields' defaults).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from goatdna.cli.common import (
    AcceleratorOpt,
    DevicesOpt,
    NumNodesOpt,
    OutCacheDirOpt,
    TrainCheckpointOpt,
    WorkResumeOpt,
    config_flags,
    default_of,
    option,
)
from goatdna.inference.calibration import CalibrationRequest
from goatdna.inference.variant_run import (
    CALIBRATION_FLAGS,
    SCORE_VARIANTS_FLAGS,
    ScoreVariantsRequest,
)
from goatdna.runtime import Runtime


def score_variants(
    checkpoint: TrainCheckpointOpt,
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
    accelerator: AcceleratorOpt = default_of(Runtime, "accelerator"),
    devices: DevicesOpt = str(default_of(Runtime, "devices")),
    num_nodes: NumNodesOpt = default_of(Runtime, "num_nodes"),
    resume: WorkResumeOpt = False,
    force: Annotated[
        bool,
        option(
            "force", "Replace an existing file at --out, and start over an interrupted run's work."
        ),
    ] = False,
    cache_dir: OutCacheDirOpt = None,
    calibrate: Annotated[
        bool,
        typer.Option(
            "--calibrate",
            help="Add context, llr_percentile and llr_z per SNV against a seeded null of random "
            "SNVs of its trinucleotide context (scored once, then reused from the cache folder).",
        ),
    ] = False,
    **flags: Any,
) -> None:
    """Score each ALT allele of a VCF or table: LL(alt window) - LL(ref window), strands averaged."""
    from goatdna.atomic import check_output_file
    from goatdna.configfile import options_with_flags
    from goatdna.inference.variant_run import calibration_request, print_summary
    from goatdna.inference.variant_run import score_variants as run
    from goatdna.workdir import stops_with_resume_hint, work_dir_for

    check_output_file(out, "--out")  # before any work: a file we can write (and its cache)
    runtime = Runtime.from_options(accelerator, devices, num_nodes)
    request = options_with_flags(
        ScoreVariantsRequest,
        SCORE_VARIANTS_FLAGS,
        flags,
        checkpoint=checkpoint,
        fasta=fasta,
        variants=variants,
        out=out,
        resume=resume,
        force=force,
        cache_dir=cache_dir,
        calibration=calibration_request(calibrate, flags),
    )
    with stops_with_resume_hint("score-variants", work_dir_for(out)):
        summary = run(request, runtime.fabric())
    if summary is not None:  # global rank 0 reports
        print_summary(summary)


config_flags(
    score_variants,
    ScoreVariantsRequest,
    SCORE_VARIANTS_FLAGS,
    ("checkpoint", "fasta", "variants", "out", ..., "accelerator", "devices", "num_nodes")
    + ("resume", "force", "cache_dir", "calibrate", "null", "seed", "null_size"),
    own_defaults=True,
    more={CalibrationRequest: CALIBRATION_FLAGS},
)
