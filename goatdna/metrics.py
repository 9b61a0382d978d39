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


BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_LEVEL = 0.95
_DRAW_CHUNK = 1 << 22  # indices drawn per block: memory stays bounded for any number of units


def resampled_ratios(
    numerators: np.ndarray,
    denominators: np.ndarray,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> np.ndarray:
    """``sum(num[idx]) / sum(den[idx])`` for ``resamples`` draws of ``idx`` (units taken with
    replacement), as float64 of shape (resamples,).

    The draws depend only on (number of units, resamples, seed), so two estimates over the same
    units (two models scored on the same held-out windows) are resampled alike, and the
    differences of their resampled ratios bootstrap their paired difference.
    """
    num = np.asarray(numerators, dtype=np.float64)
    den = np.asarray(denominators, dtype=np.float64)
    n = num.size
    if n == 0 or resamples < 1:
        return np.full(max(resamples, 0), math.nan)
    rng = np.random.default_rng(seed)
    per_block = max(1, _DRAW_CHUNK // n)
    out = np.empty(resamples, dtype=np.float64)
    for first in range(0, resamples, per_block):
        rows = min(per_block, resamples - first)
        idx = rng.integers(0, n, size=(rows, n))  # (rows, n)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[first : first + rows] = num[idx].sum(axis=1) / den[idx].sum(axis=1)
    return out


def percentile_interval(
    resampled: np.ndarray, level: float = BOOTSTRAP_LEVEL
) -> tuple[float, float]:
    """The central ``level`` percentile interval of bootstrap values (NaN ones left out)."""
    values = np.asarray(resampled, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return math.nan, math.nan
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(values, [alpha, 1.0 - alpha])
    return float(low), float(high)
