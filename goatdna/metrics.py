"""Rank and correlation metrics shared by fine-tuning (`goatdna.training.metrics`), variant
benchmarks (`goatdna.analysis.variant_metrics`) and the precision check: one definition each.

AUROC is the Mann-Whitney U statistic over mid-ranks, so a tied positive/negative pair counts
one half (as ``sklearn.metrics.roc_auc_score``); Spearman rho is Pearson r of the mid-ranks (ties
as ``scipy.stats.spearmanr``). Numpy only, so every layer may import it; metrics undefined for
their input (one class, a constant or too short vector) are NaN. Tested against brute force,
scipy and scikit-learn.
"""

from __future__ import annotations

import math

import numpy as np


def midranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks where tied values share the mean of the ranks they span."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="mergesort")
    sorted_vals = values[order]
    n = values.size
    # boundaries of runs of equal values
    starts = np.flatnonzero(np.r_[True, sorted_vals[1:] != sorted_vals[:-1]])
    ends = np.r_[starts[1:], n]
    run_rank = (starts + 1 + ends) / 2.0  # mean of ranks starts+1 .. ends
    ranks_sorted = np.repeat(run_rank, ends - starts)
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = ranks_sorted
    return ranks


def binary_auroc(positive: np.ndarray, scores: np.ndarray) -> float:
    """P(score of a random positive > a random negative) + 0.5 P(tie); NaN without both classes."""
    positive = np.asarray(positive, dtype=bool)
    n_pos = int(positive.sum())
    n_neg = positive.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return math.nan
    ranks = midranks(scores)
    u = ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson r in float64; NaN when either vector is constant."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.size < 2:
        return math.nan
    dx, dy = x - x.mean(), y - y.mean()
    denom = math.sqrt(float(dx @ dx) * float(dy @ dy))
    return float(dx @ dy) / denom if denom > 0 else math.nan


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rho: Pearson r of the mid-ranks (ties handled as scipy does)."""
    return pearson(midranks(x), midranks(y))
