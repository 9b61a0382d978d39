"""Benchmark metrics of variant scores against labels, with bootstrap intervals.

Binary labels: AUROC and AUPRC. AUROC is the Mann-Whitney U statistic over mid-ranks
(`goatdna.metrics`, shared with fine-tuning), so a tied positive/negative pair counts one half, as
in ``sklearn.metrics.roc_auc_score``. AUPRC is average precision as
``sklearn.metrics.average_precision_score`` defines it (TraitGym's AUPRC):
``AP = sum_k (R_k - R_{k-1}) P_k`` over the distinct score thresholds in decreasing order, where
tied scores enter together (no interpolation). Continuous labels: Pearson r and Spearman rho
(`goatdna.metrics`). Pairwise accuracy within match groups: over every (positive, negative) pair
that shares a group, the fraction in which the positive scores higher, ties counting one half
(TraitGym's matched design: each causal variant with its matched controls).

Intervals are percentile bootstrap intervals (95% by default) from a seeded generator, so the
same inputs give the same interval everywhere; the interval itself is the one
`goatdna.metrics.percentile_interval` (shared with the NLL, recall and GC intervals), only the
resampling differs. For binary labels the resampling is stratified
(positives and negatives resampled separately, keeping their counts), so no resample lacks a
class; pairwise accuracy resamples whole match groups. Hand-written rather than
``scipy.stats.bootstrap`` because that offers neither stratified nor grouped resampling.
Every metric undefined for its input (one class only, a constant vector) is NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from goatdna.metrics import binary_auroc as auroc
from goatdna.metrics import pearson, percentile_interval, spearman

__all__ = ["auroc", "pearson", "spearman"]  # the shared definitions, used here by name


def _thresholds(
    labels: np.ndarray, scores: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cumulative true/false positives at each distinct score, highest first, and the scores."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="mergesort")
    s = np.asarray(scores, dtype=np.float64)[order]
    y = np.asarray(labels, dtype=bool)[order]
    last_of_run = np.r_[np.flatnonzero(s[1:] != s[:-1]), s.size - 1]  # tied scores enter together
    tp = np.cumsum(y)[last_of_run]
    fp = (last_of_run + 1) - tp
    return tp.astype(np.float64), fp.astype(np.float64), s[last_of_run]


def average_precision(labels: np.ndarray, scores: np.ndarray) -> float:
    """AUPRC as sklearn's ``average_precision_score``; NaN without a positive (or a negative)."""
    labels = np.asarray(labels, dtype=bool)
    n_pos = int(labels.sum())
    if n_pos == 0 or n_pos == labels.size:
        return math.nan
    tp, fp, _ = _thresholds(labels, scores)
    precision = tp / (tp + fp)
    recall = tp / n_pos
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def roc_points(labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(false positive rate, true positive rate) from (0, 0) to (1, 1), for a ROC plot."""
    labels = np.asarray(labels, dtype=bool)
    tp, fp, _ = _thresholds(labels, scores)
    return np.r_[0.0, fp / max(1, (~labels).sum())], np.r_[0.0, tp / max(1, labels.sum())]


def pr_points(labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(recall, precision) at each threshold, highest score first, for a PR plot."""
    labels = np.asarray(labels, dtype=bool)
    tp, fp, _ = _thresholds(labels, scores)
    return tp / max(1, labels.sum()), tp / (tp + fp)


def pairwise_accuracy(labels: np.ndarray, scores: np.ndarray, groups: np.ndarray) -> float:
    """Within each group, the share of (positive, negative) pairs ranked right (ties 1/2),
    pooled over all groups' pairs; NaN when no group holds both classes.

    Per group this is the Mann-Whitney U of its positives over mid-ranks within the group
    (vectorised: one sort by (group, score), no loop over groups).
    """
    labels = np.asarray(labels, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    _, group = np.unique(np.asarray(groups), return_inverse=True)
    if group.size == 0:
        return math.nan
    order = np.lexsort((scores, group))
    g, s, y = group[order], scores[order], labels[order]
    n = g.size
    start = np.searchsorted(g, g)  # first sorted index of each row's group
    run_start = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (s[1:] != s[:-1])])
    run_end = np.r_[run_start[1:], n]
    run_mid = (run_start + 1 + run_end) / 2.0  # mean 1-based global rank of each tie run
    mid = np.repeat(run_mid, run_end - run_start) - start  # mid-rank within the group
    n_groups = int(g.max()) + 1
    n_pos = np.bincount(g, weights=y, minlength=n_groups)
    n_all = np.bincount(g, minlength=n_groups)
    rank_sum = np.bincount(g, weights=np.where(y, mid, 0.0), minlength=n_groups)
    pairs = float((n_pos * (n_all - n_pos)).sum())
    if pairs == 0:
        return math.nan
    return float((rank_sum - n_pos * (n_pos + 1) / 2).sum()) / pairs


@dataclass(frozen=True)
class Estimate:
    """A metric's value and its bootstrap interval (NaN where undefined)."""

    value: float
    low: float
    high: float


def bootstrap_binary(
    metric: Callable[[np.ndarray, np.ndarray], float],
    labels: np.ndarray,
    scores: np.ndarray,
    resamples: int,
    seed: int,
    level: float = 0.95,
    on_resample: Callable[[], None] | None = None,
) -> Estimate:
    """``metric(labels, scores)`` with a stratified percentile bootstrap interval."""
    labels = np.asarray(labels, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    value = metric(labels, scores)
    pos, neg = np.flatnonzero(labels), np.flatnonzero(~labels)
    if math.isnan(value) or resamples < 1:
        return Estimate(value, math.nan, math.nan)
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(resamples):
        rows = np.r_[rng.choice(pos, pos.size), rng.choice(neg, neg.size)]
        values.append(metric(labels[rows], scores[rows]))
        if on_resample is not None:
            on_resample()
    return Estimate(value, *percentile_interval(np.asarray(values), level))


def bootstrap_paired(
    metric: Callable[[np.ndarray, np.ndarray], float],
    x: np.ndarray,
    y: np.ndarray,
    resamples: int,
    seed: int,
    level: float = 0.95,
    on_resample: Callable[[], None] | None = None,
) -> Estimate:
    """``metric(x, y)`` with a percentile bootstrap interval over resampled rows."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    value = metric(x, y)
    if math.isnan(value) or resamples < 1:
        return Estimate(value, math.nan, math.nan)
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(resamples):
        rows = rng.integers(0, x.size, x.size)
        values.append(metric(x[rows], y[rows]))
        if on_resample is not None:
            on_resample()
    return Estimate(value, *percentile_interval(np.asarray(values), level))


def bootstrap_grouped(
    labels: np.ndarray,
    scores: np.ndarray,
    groups: np.ndarray,
    resamples: int,
    seed: int,
    level: float = 0.95,
    on_resample: Callable[[], None] | None = None,
) -> Estimate:
    """Pairwise accuracy with a percentile interval over resampled match groups."""
    labels = np.asarray(labels, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    value = pairwise_accuracy(labels, scores, groups)
    if math.isnan(value) or resamples < 1:
        return Estimate(value, math.nan, math.nan)
    names, group_index = np.unique(np.asarray(groups), return_inverse=True)
    members = [np.flatnonzero(group_index == g) for g in range(names.size)]
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(resamples):
        picked = rng.integers(0, names.size, names.size)
        rows = np.concatenate([members[g] for g in picked])
        relabelled = np.repeat(np.arange(names.size), [members[g].size for g in picked])
        values.append(pairwise_accuracy(labels[rows], scores[rows], relabelled))
        if on_resample is not None:
            on_resample()
    return Estimate(value, *percentile_interval(np.asarray(values), level))
