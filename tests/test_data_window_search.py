"""The one N-aware window search (`data_prep.window_search`) and the GC study's prompts drawn
from it: brute-force equality, the pread path over a memmap, deterministic prompts."""

from __future__ import annotations

import numpy as np
import pytest

from goatdna.analysis.prompts import draw_prompts
from goatdna.data_prep import ShardedGenome
from goatdna.data_prep.window_search import start_of_rank, valid_start_intervals
from goatdna.io.tokens import TOKEN_MASK, N, encode


def _split(seed: int, length: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, 4, length).astype(np.uint8)
    tokens[rng.random(length) < 0.01] = N
    for start in rng.integers(0, length - 40, 4):
        tokens[start : start + int(rng.integers(5, 40))] = N
    tokens[:3] = N  # an N run at the very start of a record
    tokens[rng.random(length) < 0.3] |= 0x80
    return tokens


def _brute(tokens, records, window, max_n) -> list[int]:
    is_n = (tokens & TOKEN_MASK) == N
    return [
        s
        for offset, length in records
        for s in range(offset, offset + length - window + 1)
        if is_n[s : s + window].sum() <= max_n
    ]


def _all(starts, counts) -> list[int]:
    cum = np.cumsum(counts)
    total = int(cum[-1]) if cum.size else 0
    return start_of_rank(starts, counts, cum, np.arange(total)).tolist()


@pytest.mark.parametrize("max_n", [0, 1, 3])
@pytest.mark.parametrize("chunk", [1, 5, 64, 1 << 20])
@pytest.mark.parametrize("window", [1, 7, 30])
def test_intervals_equal_brute_force(max_n, chunk, window):
    tokens = _split(seed=max_n * 100 + window, length=700)
    records = [(0, 250), (250, 6), (256, 300), (556, 144)]
    starts, counts = valid_start_intervals(tokens, records, window, max_n, chunk)
    assert _all(starts, counts) == _brute(tokens, records, window, max_n)
    assert np.all(counts > 0) and np.all(np.diff(starts) > 0)


def test_a_memmap_is_read_through_pread_with_the_same_answer(tmp_path):
    tokens = _split(seed=5, length=5_000)
    path = tmp_path / "train.bin"
    tokens.tofile(path)
    mapped = np.memmap(path, dtype=np.uint8, mode="r", shape=(tokens.size,))
    records = [(0, 2_000), (2_000, 3_000)]
    for max_n in (0, 2):
        got = valid_start_intervals(mapped, records, 50, max_n, chunk=333)
        want = valid_start_intervals(tokens, records, 50, max_n, chunk=333)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    # a slice of a memmap is no whole-file map: it is read as an array, still correct
    view = mapped[1_000:]
    got = valid_start_intervals(view, [(0, 4_000)], 50)
    assert _all(*got) == _brute(tokens[1_000:], [(0, 4_000)], 50, 0)


def test_prompts_are_n_free_disjoint_inside_records_and_deterministic(synthetic_shards):
    genome = ShardedGenome(synthetic_shards)
    prompts = draw_prompts(genome, "test", 12, prompt_length=60, continuation_length=40, seed=3)
    again = draw_prompts(genome, "test", 12, prompt_length=60, continuation_length=40, seed=3)
    other = draw_prompts(genome, "test", 12, prompt_length=60, continuation_length=40, seed=4)
    assert prompts == again and prompts != other
    tokens = genome.tokens("test")
    spans = []
    for p in prompts:
        name, coords = p.region.rsplit(":", 1)
        first, last = (int(x) for x in coords.split("-"))
        rec = next(r for r in genome.records("test") if r.name == name)
        assert rec.start < first <= last <= rec.end and last - first + 1 == 100
        offset = rec.offset + first - 1 - rec.start
        piece = np.asarray(tokens[offset : offset + 100]) & TOKEN_MASK
        assert (piece != N).all()
        assert (encode(p.prompt + p.reference) == piece).all()
        spans.append((offset, offset + 100))
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_prompts_say_when_the_split_has_too_few_windows(synthetic_shards):
    from goatdna.errors import GoatDNAError

    genome = ShardedGenome(synthetic_shards)
    longest = max(r.length for r in genome.records("test"))
    with pytest.raises(GoatDNAError, match="no record of at least"):
        draw_prompts(genome, "test", 1, prompt_length=longest, continuation_length=1)
    half = longest // 2  # at most one window of `longest` bases fits in a record
    n = len(genome.records("test")) + 1
    with pytest.raises(GoatDNAError, match="found only"):
        draw_prompts(genome, "test", n, prompt_length=half, continuation_length=longest - half)
