"""ROC, precision-recall and score-label scatter plots of `goatdna eval-variants` (PNG).

Drawn in the report's house style (`goatdna.analysis.plots`: explicit figures, no pyplot,
atomic writes). One curve for all evaluated alleles and, with ``--subset``, one per value of the
first subset column; each legend entry carries the metric and its bootstrap interval.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from goatdna.analysis import variant_metrics as vm
from goatdna.analysis.plots import _PALETTE, REFERENCE_COLOR, _save, new_figure, styled
from goatdna.analysis.variant_eval import MetricRow, VariantEvaluation


def _interval(rows: list[MetricRow], column: str, subset: str, metric: str) -> str:
    for row in rows:
        if (row.subset_column, row.subset, row.metric) == (column, subset, metric):
            if np.isnan(row.low):
                return f"{row.value:.3f}"
            return f"{row.value:.3f} [{row.low:.3f}, {row.high:.3f}]"
    return "n/a"


def _curves(evaluation: VariantEvaluation):
    """(name, labels, scores, subset column, subset value) for 'all' and each first-subset value."""
    yield "all", evaluation.labels, evaluation.scores, "all", "all"
    if evaluation.subset_values:
        column, keys = next(iter(evaluation.subset_values.items()))
        for value in sorted(set(keys)):
            member = keys == value
            yield (
                f"{column}={value}",
                evaluation.labels[member],
                evaluation.scores[member],
                column,
                value,
            )


@styled
def plot_roc(evaluation: VariantEvaluation, path: Path) -> Path:
    fig = new_figure(figsize=(5.2, 4.8))
    ax = fig.subplots()
    colors = itertools.cycle(_PALETTE)
    for name, labels, scores, column, value in _curves(evaluation):
        if labels.all() or not labels.any():
            continue
        fpr, tpr = vm.roc_points(labels, scores)
        auc = _interval(evaluation.metrics, column, value, "auroc")
        ax.plot(fpr, tpr, lw=2 if name == "all" else 1.2, color=next(colors),
                label=f"{name} (n={labels.size}): AUROC {auc}")  # fmt: skip
    ax.plot([0, 1], [0, 1], color=REFERENCE_COLOR, ls=":", lw=1, label="chance")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title(f"ROC of score {evaluation.score} for label {evaluation.label}")
    ax.legend(loc="lower right")
    ax.grid(True, alpha=0.3)
    return _save(fig, path)


@styled
def plot_pr(evaluation: VariantEvaluation, path: Path) -> Path:
    fig = new_figure(figsize=(5.2, 4.8))
    ax = fig.subplots()
    colors = itertools.cycle(_PALETTE)
    for name, labels, scores, column, value in _curves(evaluation):
        if labels.all() or not labels.any():
            continue
        color = next(colors)
        recall, precision = vm.pr_points(labels, scores)
        ap = _interval(evaluation.metrics, column, value, "auprc")
        ax.step(np.r_[0.0, recall], np.r_[precision[0], precision], where="pre",
                lw=2 if name == "all" else 1.2, color=color,
                label=f"{name} (n={labels.size}): AUPRC {ap}")  # fmt: skip
        ax.axhline(labels.mean(), color=color, ls=":", lw=0.8)  # a random score's precision
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"Precision-recall of score {evaluation.score} (dotted: positives' share)")
    ax.legend(loc="best")
    ax.grid(True, alpha=0.3)
    return _save(fig, path)


@styled
def plot_scatter(evaluation: VariantEvaluation, path: Path) -> Path:
    fig = new_figure(figsize=(5.2, 4.8))
    ax = fig.subplots()
    ax.scatter(evaluation.scores, evaluation.labels, s=6, alpha=0.5, color=_PALETTE[0])
    rho = _interval(evaluation.metrics, "all", "all", "spearman")
    ax.set_xlabel(f"score {evaluation.score}")
    ax.set_ylabel(f"label {evaluation.label}")
    ax.set_title(f"n={evaluation.labels.size}: Spearman {rho}")
    ax.grid(True, alpha=0.3)
    return _save(fig, path)


def plot_evaluation(evaluation: VariantEvaluation, folder: Path) -> list[Path]:
    """roc.png and pr.png (binary labels) or scatter.png (continuous) in ``folder`` (made by
    the first write, and removed again if that one fails: no empty folder is left)."""
    if evaluation.kind == "binary":
        return [plot_roc(evaluation, folder / "roc.png"), plot_pr(evaluation, folder / "pr.png")]
    return [plot_scatter(evaluation, folder / "scatter.png")]
