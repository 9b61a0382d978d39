"""Which figures a report draws, for which runs, under which file names (drawing: `plots`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from goatdna.analysis.report_options import ReportOptions
from goatdna.analysis.report_runs import RunData, file_safe, prior_layer

if TYPE_CHECKING:
    import pandas as pd

    from goatdna.model import GoatPrior


@dataclass(frozen=True)
class PriorImages:
    """The two figures of one GOAT run's prior at one layer."""

    name: str
    layer: int
    curves: Path
    heatmap: Path
    heatmap_positions: str  # which positions the heat map shows (plots.heatmap_positions)


def draw_figures(
    options: ReportOptions,
    runs: Sequence[RunData],
    gc_rows: pd.DataFrame,
    recall_summaries: Mapping[str, pd.DataFrame],
    out_dir: Path,
) -> dict[str, Path]:
    """Every run in one figure each: NLL vs context, training curves (runs with a metrics.csv),
    GC trajectories and, when the probe ran, recall. Keys: nll, training, gc, recall."""
    from goatdna.analysis import plots

    train_lengths = {run.name: run.train_length for run in runs}
    images = {
        "nll": plots.plot_nll_vs_context(
            {run.name: run.evaluated().frame() for run in runs},
            train_lengths,
            out_dir / "nll_vs_context.png",
        )
    }
    with_metrics = {run.name: run.metrics for run in runs if run.metrics is not None}
    if with_metrics:
        images["training"] = plots.plot_training_curves(
            with_metrics, out_dir / "training_curves.png"
        )
    images["gc"] = plots.plot_gc_trajectories(
        gc_rows, out_dir / "gc_trajectories.png", options.trajectory_prompts
    )
    if recall_summaries:
        images["recall"] = plots.plot_recall(
            recall_summaries, train_lengths, options.recall_segment, out_dir / "recall.png"
        )
    return images


def draw_priors(
    options: ReportOptions, runs: Sequence[RunData], out_dir: Path
) -> list[PriorImages]:
    """Each GOAT run's prior at the chosen layer: the curves and the masked heat map."""
    from goatdna.analysis import plots

    priors: list[PriorImages] = []
    used_stems: set[str] = set()
    for run in runs:
        if run.positional != "goat":
            continue
        layer = prior_layer(options.prior_layer, run)
        prior = cast("GoatPrior", run.model.prior(layer))  # a GOAT run: its blocks hold one
        stem = file_safe(run.name)
        while stem in used_stems:  # two names that differ only in unsafe characters
            stem += "_"
        used_stems.add(stem)
        curves = plots.plot_prior_curves(
            prior, run.train_length, layer, out_dir / f"prior_curves_{stem}_layer{layer}.png"
        )
        shown = min(options.heatmap_length, run.train_length)
        heatmap = plots.plot_prior_heatmap(
            prior,
            layer,
            out_dir / f"prior_heatmap_{stem}_layer{layer}.png",
            shown,
            run.train_length,
        )
        positions = plots.heatmap_positions(shown, run.train_length)
        priors.append(PriorImages(run.name, layer, curves, heatmap, positions))
    return priors
