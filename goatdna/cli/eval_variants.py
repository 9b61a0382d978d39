"""`goatdna eval-variants`: benchmark numbers of variant scores against labels."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from goatdna.analysis.variant_eval import EvalOptions
from goatdna.cli.common import ProgressLine, SeedOpt, default_of, option
from goatdna.configfile import comma_list


def eval_variants(
    scores: Annotated[
        Path,
        typer.Option(
            "--scores",
            help="score-variants output (.tsv, .parquet, or .vcf.gz with INFO/GOATDNA_LLR), or "
            "any table with chrom, pos, ref, alt and the score column.",
        ),
    ],
    label: Annotated[
        str,
        typer.Option(
            "--label",
            help="The label: a column of --scores (a carried column), of the --labels table, or "
            "an INFO field of the --labels VCF (e.g. CLNSIG).",
        ),
    ] = default_of(EvalOptions, "label"),
    labels: Annotated[
        Path | None,
        typer.Option(
            "--labels",
            help="Labels joined on chrom/pos/ref/alt: a table (.tsv, .csv, .parquet) or a VCF "
            "(.vcf, .vcf.gz, .bcf; the label is an INFO field).",
        ),
    ] = None,
    score: Annotated[
        str,
        typer.Option(
            "--score",
            help="The score and its sign: -llr (higher = more damaging), llr, or |llr| "
            "(any change); any numeric column of --scores works the same way.",
        ),
    ] = default_of(EvalOptions, "score"),
    kind: Annotated[
        str,
        typer.Option(
            "--kind",
            help="binary (AUROC, AUPRC), continuous (Spearman, Pearson), or auto: 0/1 or "
            "true/false labels are binary, other numbers continuous.",
        ),
    ] = default_of(EvalOptions, "kind"),
    positive: Annotated[
        str | None,
        typer.Option(
            "--positive",
            help="Comma-separated label values counted as positive, e.g. "
            "Pathogenic,Likely_pathogenic (then the label is binary).",
        ),
    ] = None,
    negative: Annotated[
        str | None,
        typer.Option(
            "--negative",
            help="Comma-separated label values counted as negative (default: every value not "
            "in --positive); values in neither are unlabelled.",
        ),
    ] = None,
    subset: Annotated[
        list[str] | None,
        typer.Option("--subset", help="A column to report the metrics per value of (repeatable)."),
    ] = None,
    match_group: Annotated[
        str | None,
        typer.Option(
            "--match-group",
            help="A column of matched groups (TraitGym's match_group): adds pairwise accuracy.",
        ),
    ] = None,
    bootstrap: Annotated[
        int,
        typer.Option("--bootstrap", help="Bootstrap resamples for the intervals (0: none)."),
    ] = default_of(EvalOptions, "resamples"),
    level: Annotated[
        float, typer.Option("--level", help="Confidence level of the intervals.")
    ] = default_of(EvalOptions, "level"),
    seed: SeedOpt = default_of(EvalOptions, "seed"),
    out: Annotated[
        Path | None,
        option("out", "Write the metrics: .tsv (one row per metric) or .json."),
    ] = None,
    plots: Annotated[
        Path | None,
        typer.Option(
            "--plots",
            help="Folder for roc.png and pr.png (binary labels) or scatter.png (continuous).",
        ),
    ] = None,
    force: Annotated[bool, option("force", "Replace existing --out / --plots files.")] = False,
) -> None:
    """AUROC/AUPRC (binary labels) or Spearman/Pearson (continuous) of variant scores, with
    bootstrap intervals, per subset and within match groups."""
    from goatdna.analysis.variant_eval import join_labels
    from goatdna.analysis.variant_eval_run import check_eval_outputs, run_eval
    from goatdna.inference.variant_io import read_labels, read_scores

    check_eval_outputs(out, plots)  # before any work
    options = EvalOptions(
        label=label, score=score, kind=kind, positive=tuple(comma_list(positive or "")),
        negative=tuple(comma_list(negative or "")), subsets=tuple(subset or ()),
        match_group=match_group, resamples=bootstrap, seed=seed, level=level,
    )  # fmt: skip

    def read():
        frame = read_scores(scores)
        if labels is None:
            return frame
        extra = [*options.subsets, *([match_group] if match_group else [])]
        return join_labels(frame, read_labels(labels, label), label, f"--labels {labels}", extra)

    run_eval(read, options, out, plots, force, [scores, labels],
             ProgressLine("bootstrap", "resamples"), lambda text, err: typer.echo(text, err=err))  # fmt: skip
