"""Downstream-task metrics in numpy (no scikit-learn): what fine-tuning reports and selects on.

Classification: accuracy, Matthews correlation (multi-class: Gorodkin's R_K, the Nucleotide
Transformer tasks' metric), macro F1, and AUROC (binary; one-vs-rest macro average for more
classes) computed from ranks with mid-ranks for ties, i.e. the Mann-Whitney U statistic, so a tied
positive/negative pair counts one half. Regression: MSE, Pearson r and Spearman rho (Pearson of
mid-ranks). Every metric that is undefined for its input (a constant vector, a class absent from
the labels) is NaN rather than a made-up number.
"""

from __future__ import annotations

import math

import numpy as np

from goatdna.metrics import binary_auroc, midranks, pearson, spearman

__all__ = ["binary_auroc", "midranks", "pearson", "spearman"]  # shared with eval-variants

CLASSIFICATION_METRICS = ("accuracy", "mcc", "macro_f1", "auroc")
REGRESSION_METRICS = ("mse", "pearson", "spearman")
HIGHER_IS_BETTER = {"accuracy": True, "mcc": True, "macro_f1": True, "auroc": True,
                    "mse": False, "pearson": True, "spearman": True}  # fmt: skip


def confusion_matrix(labels: np.ndarray, preds: np.ndarray, n_classes: int) -> np.ndarray:
    """C[i, j] = number of rows with true class i predicted as class j."""
    labels = np.asarray(labels, dtype=np.int64)
    preds = np.asarray(preds, dtype=np.int64)
    flat = np.bincount(labels * n_classes + preds, minlength=n_classes * n_classes)
    return flat.reshape(n_classes, n_classes)


def accuracy(labels: np.ndarray, preds: np.ndarray) -> float:
    labels, preds = np.asarray(labels), np.asarray(preds)
    return float(np.mean(labels == preds)) if labels.size else math.nan


def matthews_corrcoef(labels: np.ndarray, preds: np.ndarray, n_classes: int) -> float:
    """Gorodkin's multi-class MCC from the confusion matrix; the binary MCC for two classes.

    0 when a constant prediction (or constant labels) makes the denominator zero, the usual
    convention (the prediction carries no information).
    """
    c = confusion_matrix(labels, preds, n_classes).astype(np.float64)
    n = c.sum()
    correct = np.trace(c)
    t = c.sum(axis=1)  # true counts per class
    p = c.sum(axis=0)  # predicted counts per class
    cov_tp = correct * n - float(t @ p)
    cov_pp = n * n - float(p @ p)
    cov_tt = n * n - float(t @ t)
    denom = math.sqrt(cov_pp * cov_tt)
    return float(cov_tp / denom) if denom > 0 else 0.0


def macro_f1(labels: np.ndarray, preds: np.ndarray, n_classes: int) -> float:
    """Unweighted mean over classes of F1 = 2 TP / (2 TP + FP + FN); a class absent from both
    labels and predictions scores 0 (as it contributes no evidence of skill)."""
    c = confusion_matrix(labels, preds, n_classes).astype(np.float64)
    tp = np.diag(c)
    fp = c.sum(axis=0) - tp
    fn = c.sum(axis=1) - tp
    denom = 2 * tp + fp + fn
    f1 = np.divide(2 * tp, denom, out=np.zeros_like(tp), where=denom > 0)
    return float(f1.mean())


def auroc(labels: np.ndarray, probs: np.ndarray) -> float:
    """Binary AUROC of P(class 1) for two classes; else the macro mean of one-vs-rest AUROCs over
    the classes present (NaN when fewer than two classes are present)."""
    labels = np.asarray(labels, dtype=np.int64)
    probs = np.asarray(probs, dtype=np.float64)
    n_classes = probs.shape[1]
    if n_classes == 2:
        return binary_auroc(labels == 1, probs[:, 1])
    values = [binary_auroc(labels == k, probs[:, k]) for k in range(n_classes)]
    values = [v for v in values if not math.isnan(v)]
    return float(np.mean(values)) if values else math.nan


def classification_metrics(labels: np.ndarray, probs: np.ndarray) -> dict[str, float]:
    """All classification metrics from integer labels (N,) and class probabilities (N, K)."""
    probs = np.asarray(probs, dtype=np.float64)
    preds = probs.argmax(axis=1)
    k = probs.shape[1]
    return {
        "accuracy": accuracy(labels, preds),
        "mcc": matthews_corrcoef(labels, preds, k),
        "macro_f1": macro_f1(labels, preds, k),
        "auroc": auroc(labels, probs),
    }


def regression_metrics(targets: np.ndarray, preds: np.ndarray) -> dict[str, float]:
    targets = np.asarray(targets, dtype=np.float64)
    preds = np.asarray(preds, dtype=np.float64)
    return {
        "mse": float(np.mean((targets - preds) ** 2)) if targets.size else math.nan,
        "pearson": pearson(targets, preds),
        "spearman": spearman(targets, preds),
    }


def class_balance(labels: np.ndarray, classes: list[str]) -> dict[str, object]:
    """Counts per class, the majority class's share, and the accuracy a constant guess reaches."""
    counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=len(classes))
    total = int(counts.sum())
    majority = float(counts.max() / total) if total else math.nan
    return {
        "counts": {name: int(c) for name, c in zip(classes, counts, strict=True)},
        "majority_fraction": majority,
        "imbalance_ratio": float(counts.max() / counts.min()) if counts.min() > 0 else math.inf,
    }
