"""`RecordDigest`: one record's sha256 and counts, inline or in its helper thread, any chunking."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from goatdna.data_prep.record_digest import COUNT_BLOCK, RecordDigest, count_bases
from goatdna.io.tokens import BYTE_LUT, REPEAT_FLAG, C, G, N

VALID = np.array(sorted(set(BYTE_LUT.tolist()) - {0xFF}), dtype=np.uint8)  # every token byte


def _tokens(size: int, seed: int = 0) -> bytes:
    return VALID[np.random.default_rng(seed).integers(0, VALID.size, size)].tobytes()


def _brute(tokens: bytes) -> tuple[int, int, int, str]:
    """Counted byte by byte from the token contract (low 7 bits token, 0x80 soft-mask flag)."""
    plain = [b & 0x7F for b in tokens]
    return (
        sum(t == N for t in plain),
        sum(b & REPEAT_FLAG != 0 for b in tokens),
        sum(t in (C, G) for t in plain),
        hashlib.sha256(tokens).hexdigest(),
    )


def _vectorised(tokens: bytes) -> tuple[int, int, int, str]:
    arr = np.frombuffer(tokens, dtype=np.uint8)
    plain = arr & 0x7F
    return (
        int((plain == N).sum()),
        int((arr >= REPEAT_FLAG).sum()),
        int(((plain == C) | (plain == G)).sum()),
        hashlib.sha256(tokens).hexdigest(),
    )


def _digest(tokens: bytes, chunk: int, background: bool) -> tuple[int, int, int, str]:
    with RecordDigest(background) as digest:
        for lo in range(0, len(tokens), chunk):
            digest.add(tokens[lo : lo + chunk])
        return digest.finish()


@pytest.mark.parametrize("background", [False, True])
@pytest.mark.parametrize("chunk", [997, COUNT_BLOCK + 3, 10**6])
def test_digest_is_the_same_for_any_chunking(background: bool, chunk: int) -> None:
    tokens = _tokens(2 * COUNT_BLOCK + 12_345, seed=chunk)
    assert _digest(tokens, chunk, background) == _vectorised(tokens)


@pytest.mark.parametrize("background", [False, True])
def test_digest_equals_brute_force(background: bool) -> None:
    tokens = _tokens(5_000, seed=3)
    assert _digest(tokens, 7, background) == _brute(tokens)


def test_count_bases_small_inputs_against_brute_force() -> None:
    for size in (0, 1, 7, 300):
        tokens = _tokens(size, seed=size)
        assert count_bases(tokens) == _brute(tokens)[:3]


def test_an_error_in_the_helper_thread_reaches_the_caller() -> None:
    with RecordDigest(background=True) as digest:
        digest.add(_tokens(100))
        digest.add("not bytes")  # type: ignore[arg-type]  # hashlib raises TypeError in the thread
        with pytest.raises(TypeError):
            digest.finish()
