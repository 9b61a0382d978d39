"""Fine-tuning metrics against hand-computed values and brute-force references (no sklearn)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from goatdna.training.metrics import (
    auroc,
    binary_auroc,
    class_balance,
    classification_metrics,
    macro_f1,
    matthews_corrcoef,
    midranks,
    pearson,
    regression_metrics,
    spearman,
)


def brute_auroc(positive: np.ndarray, scores: np.ndarray) -> float:
    """Every positive/negative pair: 1 when the positive scores higher, 1/2 on a tie."""
    pos, neg = scores[positive], scores[~positive]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (pos.size * neg.size)


def gorodkin_mcc(labels: np.ndarray, preds: np.ndarray, k: int) -> float:
    """R_K as a correlation of one-hot matrices: cov(X, Y) / sqrt(cov(X, X) cov(Y, Y))."""
    x = np.eye(k)[labels]
    y = np.eye(k)[preds]

    def cov(a: np.ndarray, b: np.ndarray) -> float:
        return float(((a - a.mean(0)) * (b - b.mean(0))).sum())

    return cov(x, y) / math.sqrt(cov(x, x) * cov(y, y))


def test_binary_mcc_by_hand() -> None:
    labels = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 0])
    preds = np.array([1, 1, 1, 0, 0, 0, 0, 0, 1, 1])
    tp, tn, fp, fn = 3, 4, 2, 1
    expected = (tp * tn - fp * fn) / math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    assert matthews_corrcoef(labels, preds, 2) == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(10 / math.sqrt(5 * 4 * 6 * 5))


def test_multiclass_mcc_matches_onehot_correlation() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        labels = rng.integers(0, 3, 40)
        preds = np.where(rng.random(40) < 0.6, labels, rng.integers(0, 3, 40))
        expected = gorodkin_mcc(labels, preds, 3)
        assert matthews_corrcoef(labels, preds, 3) == pytest.approx(expected, abs=1e-12)


def test_mcc_of_constant_prediction_is_zero_and_perfect_is_one() -> None:
    labels = np.array([0, 1, 2, 1, 0])
    assert matthews_corrcoef(labels, np.zeros(5, dtype=int), 3) == 0.0
    assert matthews_corrcoef(labels, labels, 3) == pytest.approx(1.0)


def test_auroc_with_ties_by_hand() -> None:
    # pairs (pos, neg): (0.4, 0.1) win, (0.4, 0.4) tie, (0.8, 0.1) win, (0.8, 0.4) win -> 3.5 / 4
    labels = np.array([0, 0, 1, 1])
    scores = np.array([0.1, 0.4, 0.4, 0.8])
    assert binary_auroc(labels == 1, scores) == pytest.approx(0.875)
    probs = np.stack([1 - scores, scores], axis=1)
    assert auroc(labels, probs) == pytest.approx(0.875)
    # everything tied: exactly one half
    assert binary_auroc(labels == 1, np.full(4, 0.3)) == pytest.approx(0.5)


def test_auroc_matches_pairwise_count_on_heavily_tied_scores() -> None:
    rng = np.random.default_rng(1)
    for _ in range(20):
        positive = rng.random(30) < 0.4
        scores = rng.integers(0, 4, 30).astype(float)  # many ties
        if positive.all() or not positive.any():
            continue
        assert binary_auroc(positive, scores) == pytest.approx(brute_auroc(positive, scores))


def test_one_vs_rest_auroc_is_mean_of_pairwise_counts() -> None:
    rng = np.random.default_rng(2)
    labels = np.repeat([0, 1, 2], 8)
    probs = rng.dirichlet(np.ones(3), size=24).round(1)  # rounding makes ties
    expected = np.mean([brute_auroc(labels == k, probs[:, k]) for k in range(3)])
    assert auroc(labels, probs) == pytest.approx(expected)
    assert math.isnan(binary_auroc(np.ones(3, dtype=bool), np.arange(3.0)))


def test_macro_f1_by_hand() -> None:
    labels = np.array([0, 0, 1, 1, 2, 2])
    preds = np.array([0, 1, 1, 1, 0, 2])
    # class 0: tp 1 fp 1 fn 1 -> 0.5; class 1: tp 2 fp 1 fn 0 -> 0.8; class 2: tp 1 fn 1 -> 2/3
    assert macro_f1(labels, preds, 3) == pytest.approx((0.5 + 0.8 + 2 / 3) / 3)
    metrics = classification_metrics(labels, np.eye(3)[preds] * 0.9 + 0.05)
    assert metrics["accuracy"] == pytest.approx(4 / 6)


def test_midranks_and_spearman_with_ties() -> None:
    assert midranks(np.array([3.0, 1.0, 3.0, 2.0])).tolist() == [3.5, 1.0, 3.5, 2.0]
    x = np.array([1.0, 2.0, 2.0, 3.0])
    y = np.array([1.0, 3.0, 2.0, 4.0])
    # ranks x = [1, 2.5, 2.5, 4], y = [1, 3, 2, 4]; centred: [-1.5, 0, 0, 1.5], [-1.5, .5, -.5, 1.5]
    expected = (2.25 + 2.25) / math.sqrt(4.5 * 5.0)
    assert spearman(x, y) == pytest.approx(expected)
    assert spearman(np.arange(5.0), np.arange(5.0) ** 3) == pytest.approx(1.0)


def test_regression_metrics_by_hand() -> None:
    targets = np.array([1.0, 2.0, 3.0, 4.0])
    preds = np.array([1.5, 2.0, 2.5, 5.0])
    m = regression_metrics(targets, preds)
    assert m["mse"] == pytest.approx((0.25 + 0 + 0.25 + 1.0) / 4)
    # centred t = [-1.5, -.5, .5, 1.5], p = [-1.25, -.75, -.25, 2.25]
    num = 1.875 + 0.375 - 0.125 + 3.375
    den = math.sqrt(5.0 * (1.5625 + 0.5625 + 0.0625 + 5.0625))
    assert m["pearson"] == pytest.approx(num / den)
    assert math.isnan(pearson(np.ones(3), np.arange(3.0)))


def test_class_balance_reports_imbalance() -> None:
    balance = class_balance(np.array([0, 0, 0, 1]), ["a", "b"])
    assert balance["counts"] == {"a": 3, "b": 1}
    assert balance["majority_fraction"] == pytest.approx(0.75)
    assert balance["imbalance_ratio"] == pytest.approx(3.0)
