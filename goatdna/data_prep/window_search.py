"""Where a window of ``window`` bases fits: inside one record, with at most ``max_n`` N bases.

The one N-aware window search of goatdna (issue 42: one definition each). Training indexes
every valid start of its split with it (`goatdna.training.windows`), the GC study draws its
N-free prompts from it (`goatdna.analysis.prompts`), check-precision spreads its windows over
the N-free starts of a FASTA (`goatdna.inference.precision_check`), the recall probe tests its
drawn segments with `window_is_n_free` (`goatdna.analysis.recall`) and make-task keeps the
N-free tiles of a split with `is_n` (`goatdna.data_prep.tasks`).
``tests/test_data_window_search.py`` fails on a second N test or N-free search elsewhere.

hg38 has ~3e9 start positions, so the answer is kept as *intervals* of consecutive valid
starts, found chunk by chunk:

* ``max_n == 0`` (the default everywhere): the N-free runs of the chunk come from the edges of
  its N indicator, and a run of ``r >= window`` bases holds ``r - window + 1`` valid starts;
* ``max_n > 0``: cumulative sums of the N indicator count the N bases of every window.

A split read through a memmap is read chunk by chunk with ``pread`` instead, so that the pages
of a 3 GB split never accumulate in the process's resident memory.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterable

import numpy as np

from goatdna.io.tokens import TOKEN_MASK, N

SEARCH_CHUNK = 1 << 24
"""Start positions examined per vectorised pass (bounds the search's memory)."""


def is_n(tokens: np.ndarray) -> np.ndarray:
    """True where a token byte is N, whatever its repeat flag: the one N test of a window."""
    return (np.asarray(tokens) & TOKEN_MASK) == N


def window_is_n_free(tokens: np.ndarray, start: int, window: int) -> bool:
    """Whether bases ``[start, start + window)`` of ``tokens`` hold no N (one drawn window: the
    recall probe redraws a segment until this holds, so its draws stay a function of the seed)."""
    return not is_n(tokens[start : start + window]).any()


class _Reader:
    """Byte ranges of a split: ``pread`` from its file when it is a whole-file memmap."""

    def __init__(self, tokens: np.ndarray) -> None:
        self.tokens = tokens
        self.fd: int | None = None
        self.offset = 0
        if isinstance(tokens, np.memmap) and isinstance(tokens.base, mmap.mmap):
            self.fd = os.open(tokens.filename, os.O_RDONLY)
            self.offset = int(tokens.offset)

    def read(self, lo: int, hi: int) -> np.ndarray:
        if self.fd is None:
            return np.asarray(self.tokens[lo:hi])
        return np.frombuffer(os.pread(self.fd, hi - lo, self.offset + lo), dtype=np.uint8)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def valid_start_intervals(
    tokens: np.ndarray,
    records: Iterable[tuple[int, int]],
    window: int,
    max_n: int = 0,
    chunk: int = SEARCH_CHUNK,
) -> tuple[np.ndarray, np.ndarray]:
    """Maximal intervals ``[starts[i], starts[i] + counts[i])`` of starts ``s`` such that
    ``[s, s + window)`` lies inside one record and holds at most ``max_n`` N bases.

    ``tokens`` is a split's raw bytes (repeat flag included); ``records`` are ``(offset,
    length)`` pairs in that split, in file order. Returns int64 ``(starts, counts)``, ascending.
    """
    if window <= 0:
        raise ValueError(f"window must be > 0, got {window}")
    if chunk <= 0:
        raise ValueError(f"chunk must be > 0, got {chunk}")
    starts: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    reader = _Reader(tokens)
    try:
        for offset, length in records:
            last_start = offset + length - window  # inclusive
            c0 = offset
            while c0 <= last_start:
                c1 = min(c0 + chunk, last_start + 1)  # starts [c0, c1)
                n_here = is_n(reader.read(c0, c1 - 1 + window))
                if not n_here.any():  # the common case on real genomes: every start is valid
                    begin = np.array([0], dtype=np.int64)
                    end = np.array([c1 - c0], dtype=np.int64)
                elif max_n == 0:
                    begin, end = _n_free_starts(n_here, window)
                else:
                    begin, end = _n_poor_starts(n_here, window, max_n, c1 - c0)
                starts.append(begin + c0)
                counts.append(end - begin)
                c0 = c1
    finally:
        reader.close()
    if not starts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return _merge_adjacent(np.concatenate(starts), np.concatenate(counts))


def longest_n_free_run(
    tokens: np.ndarray, records: Iterable[tuple[int, int]], chunk: int = SEARCH_CHUNK
) -> int:
    """Bases in the longest run without N inside one record (0 when every base is N): the
    longest window `valid_start_intervals` can find there, which a refusal can name."""
    longest = 0
    for record in records:  # one at a time: windows of 1 base in two records would merge
        _, counts = valid_start_intervals(tokens, [record], 1, 0, chunk)  # a start per N-free base
        longest = max(longest, int(counts.max()) if counts.size else 0)
    return longest


def start_of_rank(
    starts: np.ndarray, counts: np.ndarray, cum_counts: np.ndarray, ranks: np.ndarray | int
) -> np.ndarray:
    """The ``u``-th valid start (in interval order) for each rank ``u`` in ``[0, counts.sum())``;
    ``cum_counts`` is ``np.cumsum(counts)``."""
    ranks = np.asarray(ranks, dtype=np.int64)
    interval = np.searchsorted(cum_counts, ranks, side="right")
    first_rank = cum_counts[interval] - counts[interval]
    return starts[interval] + (ranks - first_rank)


def _n_free_starts(n_mask: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Local [begin, end) runs of starts whose window holds no N, from the N-free base runs."""
    padded = np.ones(n_mask.size + 2, dtype=bool)  # an N before and after the chunk
    padded[1:-1] = n_mask
    edges = np.flatnonzero(padded[1:] != padded[:-1])  # alternating N-free run begin / end
    run_begin, run_end = edges[0::2], edges[1::2] - window + 1  # last start + 1
    keep = run_end > run_begin
    return run_begin[keep].astype(np.int64), run_end[keep].astype(np.int64)


def _n_poor_starts(
    n_mask: np.ndarray, window: int, max_n: int, n_starts: int
) -> tuple[np.ndarray, np.ndarray]:
    """Local [begin, end) runs of starts whose window holds at most ``max_n`` N bases."""
    cum = np.zeros(n_mask.size + 1, dtype=np.int32)  # chunk < 2**31: int32 is exact
    np.cumsum(n_mask, out=cum[1:], dtype=np.int32)
    n_in_window = cum[window : window + n_starts] - cum[:n_starts]  # (n_starts,)
    padded = np.zeros(n_starts + 2, dtype=np.int8)
    padded[1:-1] = n_in_window <= max_n
    edges = np.flatnonzero(padded[1:] != padded[:-1])  # alternating run begin / end
    return edges[0::2].astype(np.int64), edges[1::2].astype(np.int64)


def _merge_adjacent(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Join intervals that continue each other (split only by a chunk edge)."""
    if starts.size < 2:
        return starts, counts
    continues = starts[1:] == starts[:-1] + counts[:-1]
    group = np.concatenate(([0], np.cumsum(~continues)))  # interval -> merged interval id
    merged_starts = starts[np.concatenate(([True], ~continues))]
    merged_counts = np.bincount(group, weights=counts).astype(np.int64)
    return merged_starts, merged_counts
