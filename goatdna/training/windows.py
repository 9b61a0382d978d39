"""Which windows of a split the model may see, and which ones each step draws (numpy only).

A training sample is a window of ``seq_len + 1`` bases (inputs plus the shifted targets) that
lies inside one record (a window never joins two contigs) and holds at most ``max_n`` N bases.
hg38 has ~3e9 start positions, so the index keeps *intervals* of consecutive valid starts, found
chunk by chunk with cumulative sums of the N indicator, and a uniform draw over all valid starts
is a draw of a rank ``u`` in ``[0, total)`` mapped to its interval with a binary search.

Sampling is a pure function of ``(seed, micro_step, rank, index in batch)``: every micro-step
draws one global batch (all ranks together, without replacement) from a Philox generator keyed by
``(seed, micro_step)``, and rank ``r`` takes rows ``r*B .. r*B + B - 1``. A resumed run therefore
sees exactly the batches the uninterrupted run would have seen, and ranks never share a window
within a step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from goatdna.data_prep import ShardedGenome
from goatdna.data_prep.heldout import heldout_window_starts
from goatdna.data_prep.tokens import COMPLEMENT, REPEAT_FLAG, TOKEN_MASK, N
from goatdna.errors import GoatDNAError
from goatdna.training.config import DataConfig

INDEX_CHUNK = 1 << 24
"""Start positions examined per vectorised pass (bounds the index builder's memory)."""


@dataclass(frozen=True)
class WindowIndex:
    """Valid window starts of one split as intervals ``[starts[i], starts[i] + counts[i])``."""

    window: int
    """Bases per window (seq_len + 1)."""
    max_n: int
    """Most N bases a valid window may hold."""
    starts: np.ndarray  # (I,) int64 offsets into the split's .bin
    counts: np.ndarray  # (I,) int64 number of consecutive valid starts
    cum_counts: np.ndarray  # (I,) int64 inclusive prefix sums of counts

    @property
    def total(self) -> int:
        """Number of valid window starts."""
        return int(self.cum_counts[-1]) if self.cum_counts.size else 0

    def start_of_rank(self, ranks: np.ndarray) -> np.ndarray:
        """Map ranks ``u`` in ``[0, total)`` (the u-th valid start in split order) to offsets."""
        ranks = np.asarray(ranks, dtype=np.int64)
        interval = np.searchsorted(self.cum_counts, ranks, side="right")
        first_rank = self.cum_counts[interval] - self.counts[interval]
        return self.starts[interval] + (ranks - first_rank)

    def all_starts(self) -> np.ndarray:
        """Every valid start (tests and small splits only: this is ``total`` integers)."""
        return self.start_of_rank(np.arange(self.total, dtype=np.int64))


def build_window_index(
    tokens: np.ndarray,
    records: Iterable[tuple[int, int]],
    window: int,
    max_n: int = 0,
    chunk: int = INDEX_CHUNK,
) -> WindowIndex:
    """Intervals of starts ``s`` with ``[s, s + window)`` inside one record and <= max_n N bases.

    ``tokens`` is a split's raw bytes (flag included); ``records`` are ``(offset, length)`` pairs
    in that split. Work is vectorised per chunk of ``chunk`` starts, so memory stays bounded.
    """
    if window <= 0:
        raise ValueError(f"window must be > 0, got {window}")
    starts: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    for offset, length in records:
        last_start = offset + length - window  # inclusive
        c0 = offset
        while c0 <= last_start:
            c1 = min(c0 + chunk, last_start + 1)  # starts [c0, c1)
            n_starts = c1 - c0
            is_n = (np.asarray(tokens[c0 : c1 - 1 + window]) & TOKEN_MASK) == N
            if not is_n.any():  # the common case on real genomes: every start is valid
                starts.append(np.array([c0], dtype=np.int64))
                counts.append(np.array([n_starts], dtype=np.int64))
                c0 = c1
                continue
            cum = np.zeros(is_n.size + 1, dtype=np.int32)  # chunk < 2**31: int32 is exact
            np.cumsum(is_n, out=cum[1:], dtype=np.int32)
            n_in_window = cum[window : window + n_starts] - cum[:n_starts]  # (n_starts,)
            padded = np.zeros(n_starts + 2, dtype=np.int8)
            padded[1:-1] = n_in_window <= max_n
            edges = np.flatnonzero(padded[1:] != padded[:-1])  # alternating run begin / end
            run_begin, run_end = edges[0::2], edges[1::2]
            starts.append(run_begin.astype(np.int64) + c0)
            counts.append((run_end - run_begin).astype(np.int64))
            c0 = c1
    if starts:
        s, c = _merge_adjacent(np.concatenate(starts), np.concatenate(counts))
    else:
        s = np.zeros(0, dtype=np.int64)
        c = np.zeros(0, dtype=np.int64)
    return WindowIndex(window=window, max_n=max_n, starts=s, counts=c, cum_counts=np.cumsum(c))


def _merge_adjacent(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Join intervals that continue each other (split only by a chunk edge)."""
    if starts.size < 2:
        return starts, counts
    continues = starts[1:] == starts[:-1] + counts[:-1]
    group = np.concatenate(([0], np.cumsum(~continues)))  # interval -> merged interval id
    merged_starts = starts[np.concatenate(([True], ~continues))]
    merged_counts = np.bincount(group, weights=counts).astype(np.int64)
    return merged_starts, merged_counts


def max_n_for(window: int, max_n_fraction: float) -> int:
    """Most N bases allowed in a window of ``window`` bases."""
    return int(np.floor(max_n_fraction * window + 1e-9))


@dataclass(frozen=True)
class WindowSampler:
    """Draws the windows of micro-step ``k`` for rank ``r``: a pure function of its arguments."""

    index: WindowIndex
    seed: int
    batch_size: int  # per rank
    world_size: int = 1
    rc_prob: float = 0.5

    def draw(self, micro_step: int, rank: int) -> tuple[np.ndarray, np.ndarray]:
        """(starts (B,) int64, reverse_complement (B,) bool) of this rank's micro-batch."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} outside world of size {self.world_size}")
        seq = np.random.SeedSequence(entropy=self.seed, spawn_key=(micro_step,))
        rng = np.random.Generator(np.random.Philox(seq))
        n_global = self.batch_size * self.world_size
        total = self.index.total
        ranks = rng.choice(total, size=n_global, replace=n_global > total)  # (world*B,)
        flips = rng.random(n_global) < self.rc_prob  # (world*B,)
        rows = slice(rank * self.batch_size, (rank + 1) * self.batch_size)
        return self.index.start_of_rank(ranks[rows]), flips[rows]


def read_windows(
    tokens: np.ndarray,
    starts: np.ndarray,
    window: int,
    reverse_complement: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Gather windows -> (token ids (B, window) uint8 in 0..4, repeat flags (B, window) bool).

    Reverse-complemented rows are reversed and mapped A<->T, C<->G, N->N; their repeat flags are
    reversed with them (the flag describes the base, whichever strand is read).
    """
    raw = np.stack([np.asarray(tokens[s : s + window]) for s in starts.tolist()])  # (B, W)
    ids = raw & TOKEN_MASK
    repeat = (raw & REPEAT_FLAG) != 0
    if reverse_complement is not None and reverse_complement.any():
        rows = np.flatnonzero(reverse_complement)
        ids[rows] = COMPLEMENT[ids[rows, ::-1]]
        repeat[rows] = repeat[rows, ::-1]
    return ids, repeat


@dataclass(frozen=True)
class SplitWindows:
    """Everything training needs to know about the shards, computed once per process."""

    root: Path
    manifest_sha256: str
    train_index: WindowIndex
    val_starts: np.ndarray  # (n_val,) offsets of the held-out validation windows in val.bin


def plan_windows(genome: ShardedGenome, config: DataConfig) -> SplitWindows:
    """Index the train split and take the val split's held-out windows; a clear error when
    nothing fits.

    Validation scores `heldout_window_starts` at L = seq_len (capped at ``val_max_windows``):
    the windows `goatdna evaluate` scores at that length and cap, so the two numbers agree.
    """
    window = config.seq_len + 1
    max_n = max_n_for(window, config.max_n_fraction)
    for split in ("train", "val"):
        if split not in genome.split_names():
            raise GoatDNAError(
                f"{genome.root}: the data has no '{split}' split; prepare it with a held-out "
                "validation split (goatdna prepare --val-contigs / --val-fraction)"
            )
    records = genome.records("train")
    train_index = build_window_index(
        genome.tokens("train"), [(r.offset, r.length) for r in records], window, max_n
    )
    if train_index.total == 0:
        longest = max((r.length for r in records), default=0)
        raise GoatDNAError(
            f"{genome.root}: no train window of seq_len + 1 = {window} bases fits in one "
            f"record with at most {max_n} N bases (longest train record: {longest} bases); "
            "lower data.seq_len and model.train_length, or raise data.max_n_fraction"
        )
    val_records = genome.records("val")
    val_starts = heldout_window_starts(
        [(r.offset, r.length) for r in val_records], config.seq_len, config.val_max_windows
    )
    if val_starts.size == 0:
        longest = max((r.length for r in val_records), default=0)
        raise GoatDNAError(
            f"{genome.root}: no val window of seq_len + 1 = {window} bases fits in one record "
            f"(longest val record: {longest} bases); lower data.seq_len and model.train_length"
        )
    return SplitWindows(
        root=Path(genome.root),
        manifest_sha256=genome.manifest_sha256,
        train_index=train_index,
        val_starts=val_starts,
    )
