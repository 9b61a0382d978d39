"""The one k-mer coder (data_prep.kmers) against brute force, and its two users built on it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goatdna.analysis.gc import kmer_counts as gc_kmer_counts
from goatdna.data_prep.kmers import MAX_K, kmer_codes, kmer_counts
from goatdna.data_prep.markov import markov_bits_per_base, markov_counts
from goatdna.io.tokens import BASES, REPEAT_FLAG, N, decode, encode


def _brute_codes(tokens: np.ndarray, k: int) -> list[int]:
    """Each k-mer's letters read as a base-4 number with Python's int(.., 4); N-containing skipped."""
    text = decode(tokens).upper()
    digits = str.maketrans("ACGT", "0123")
    return [
        int(text[i : i + k].translate(digits), 4)
        for i in range(len(text) - k + 1)
        if "N" not in text[i : i + k]
    ]


token_arrays = st.lists(st.tuples(st.integers(0, N), st.booleans()), min_size=0, max_size=60).map(
    lambda xs: np.array([t | (REPEAT_FLAG if rep else 0) for t, rep in xs], dtype=np.uint8)
)


@settings(max_examples=150, deadline=None)
@given(tokens=token_arrays, k=st.integers(1, 7))
def test_kmer_codes_match_brute_force(tokens: np.ndarray, k: int) -> None:
    assert kmer_codes(tokens, k).tolist() == _brute_codes(tokens, k)
    counts = kmer_counts(tokens, k)
    assert counts.shape == (4**k,) and counts.dtype == np.int64
    assert counts.tolist() == np.bincount(_brute_codes(tokens, k), minlength=4**k).tolist()


def test_kmer_codes_order_and_limits() -> None:
    assert kmer_codes(encode("ACGT"), 4).tolist() == [0 * 64 + 1 * 16 + 2 * 4 + 3]
    assert kmer_codes(encode("acgNT"), 2).tolist() == [1, 6]  # soft mask ignored, N skipped
    assert kmer_codes(encode("T" * MAX_K), MAX_K).tolist() == [4**MAX_K - 1]
    assert kmer_codes(encode("AC"), 3).size == 0
    for bad in (0, MAX_K + 1):
        with pytest.raises(ValueError, match="k must be"):
            kmer_codes(encode("ACGT"), bad)


def test_markov_and_gc_count_with_the_same_codes() -> None:
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, len(BASES), 2_000).astype(np.uint8)
    order = 3
    table = markov_counts(tokens, order)
    brute = np.zeros((4**order, 4), dtype=np.int64)
    for code in _brute_codes(tokens, order + 1):
        brute[code // 4, code % 4] += 1
    assert np.array_equal(table, brute)
    assert np.array_equal(
        gc_kmer_counts([tokens[:700], tokens[700:]], 2),
        (kmer_counts(tokens[:700], 2) + kmer_counts(tokens[700:], 2)),
    )
    # an order-0 model of a sequence scored on itself: the entropy of its base frequencies
    freqs = (kmer_counts(tokens, 1) + 0.5) / (kmer_counts(tokens, 1).sum() + 2.0)
    acgt = tokens[tokens < N]
    expected = -np.log2(freqs[acgt]).mean()
    assert markov_bits_per_base(tokens, tokens, order=0) == pytest.approx(expected, rel=1e-12)
