"""A k-th order Markov baseline in bits/base: the floor any DNA language model must beat.

Fitted by counting (k+1)-mers over ACGT-only windows of a token array (soft-mask flag ignored);
vectorised with numpy (base-4 rolling codes + bincount), so a few Mbp take well under a second.
"""

from __future__ import annotations

import numpy as np

from goatdna.data_prep.tokens import TOKEN_MASK


def _kmer_codes(tokens: np.ndarray, k: int) -> np.ndarray:
    """Base-4 codes of every (k+1)-mer made only of A/C/G/T; shape (n_valid,)."""
    plain = np.asarray(tokens, dtype=np.uint8) & TOKEN_MASK
    n = plain.size - k
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    codes = np.zeros(n, dtype=np.int64)
    valid = np.ones(n, dtype=bool)
    for j in range(k + 1):
        window = plain[j : j + n]
        codes = codes * 4 + (window & 3)
        valid &= window < 4
    return codes[valid]


def markov_counts(tokens: np.ndarray, order: int) -> np.ndarray:
    """Counts of (context, next base); shape (4**order, 4)."""
    counts = np.bincount(_kmer_codes(tokens, order), minlength=4 ** (order + 1))
    return counts.reshape(4**order, 4)


def markov_bits_per_base(
    train: np.ndarray, evaluate: np.ndarray, order: int = 6, pseudocount: float = 0.5
) -> float:
    """Cross-entropy (bits/base) on ``evaluate`` of an order-``order`` model fitted on ``train``."""
    counts = markov_counts(train, order) + pseudocount
    log_probs = np.log2(counts / counts.sum(axis=1, keepdims=True)).ravel()
    codes = _kmer_codes(evaluate, order)
    if codes.size == 0:
        raise ValueError("evaluation sequence has no ACGT window of length order + 1")
    return float(-log_probs[codes].mean())
