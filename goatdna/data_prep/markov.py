"""A k-th order Markov baseline in bits/base: the floor any DNA language model must beat.

Fitted by counting (k+1)-mers over ACGT-only windows of a token array (soft-mask flag ignored),
coded by `goatdna.data_prep.kmers`: a (k+1)-mer's code is its k-mer context times 4 plus its
last base, so the counts reshape to (context, next base).
"""

from __future__ import annotations

import numpy as np

from goatdna.data_prep.kmers import kmer_codes, kmer_counts
from goatdna.io.tokens import NUM_BASES


def markov_counts(tokens: np.ndarray, order: int) -> np.ndarray:
    """Counts of (context, next base); shape (4**order, 4)."""
    return kmer_counts(tokens, order + 1).reshape(NUM_BASES**order, NUM_BASES)


def markov_bits_per_base(
    train: np.ndarray, evaluate: np.ndarray, order: int = 6, pseudocount: float = 0.5
) -> float:
    """Cross-entropy (bits/base) on ``evaluate`` of an order-``order`` model fitted on ``train``."""
    counts = markov_counts(train, order) + pseudocount
    log_probs = np.log2(counts / counts.sum(axis=1, keepdims=True)).ravel()
    codes = kmer_codes(evaluate, order + 1)
    if codes.size == 0:
        raise ValueError("evaluation sequence has no ACGT window of length order + 1")
    return float(-log_probs[codes].mean())
