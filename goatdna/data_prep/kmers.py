"""The one k-mer coder: every A/C/G/T-only k-mer of a token array as a base-4 integer.

The code of ``x_1 .. x_k`` is ``sum x_i * 4^(k-i)`` (A=0 .. T=3, first base most significant),
so codes index a ``4**k`` count table directly and the last base is the fastest-varying digit:
``codes // 4`` is the (k-1)-mer context and ``codes % 4`` the next base, which is what the Markov
baseline (`markov`) reshapes its counts by. GC statistics (`goatdna.analysis.gc`) count k-mer
spectra with the same codes. A k-mer that contains N (or any token >= NUM_BASES) has no code and
is skipped; the soft-mask flag is ignored.
"""

from __future__ import annotations

import numpy as np

from goatdna.io.tokens import NUM_BASES, TOKEN_MASK

MAX_K = 31
"""Largest k whose codes fit in int64 (4**31 = 2**62)."""


def kmer_codes(tokens: np.ndarray, k: int) -> np.ndarray:
    """Base-4 codes of the A/C/G/T-only k-mers of ``tokens``, in order; int64, shape (n_valid,).

    ``tokens`` are token bytes (the repeat flag may be set). Built digit by digit over k shifted
    views, so memory stays O(n) whatever k is.
    """
    if not 1 <= k <= MAX_K:
        raise ValueError(f"k must be in 1..{MAX_K}, got {k}")
    plain = np.asarray(tokens, dtype=np.uint8) & TOKEN_MASK
    n = plain.size - k + 1
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    codes = np.zeros(n, dtype=np.int64)
    valid = np.ones(n, dtype=bool)
    for j in range(k):
        digit = plain[j : j + n]
        codes = codes * NUM_BASES + (digit % NUM_BASES)
        valid &= digit < NUM_BASES
    return codes[valid]


def kmer_counts(tokens: np.ndarray, k: int) -> np.ndarray:
    """Counts of the ``4**k`` k-mers of ``tokens`` indexed by `kmer_codes`; int64."""
    return np.bincount(kmer_codes(tokens, k), minlength=NUM_BASES**k).astype(np.int64)
