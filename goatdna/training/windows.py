"""Which windows of a split the model may see, and which ones each step draws (numpy only).

A training sample is a window of ``seq_len + 1`` bases (inputs plus the shifted targets) that
lies inside one record (a window never joins two contigs) and holds at most ``max_n`` N bases.
hg38 has ~3e9 start positions, so the index keeps *intervals* of consecutive valid starts (found
by `goatdna.data_prep.window_search`), and a uniform draw over all valid starts is a draw of a
rank ``u`` in ``[0, total)`` mapped to its interval with a binary search.

Sampling is a pure function of ``(seed, micro_step, rank, index in batch)``: every micro-step
draws one global batch (all ranks together, without replacement) from a Philox generator keyed by
``(seed, micro_step)``, and rank ``r`` takes rows ``r*B .. r*B + B - 1``. A resumed run therefore
sees exactly the batches the uninterrupted run would have seen, and ranks never share a window
within a step. With ``data.source_weights`` each row first draws its FASTA source with those
weights, then a window of that source uniformly, from the same generator.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from goatdna.data_prep import ShardedGenome
from goatdna.data_prep.heldout import heldout_window_starts
from goatdna.data_prep.window_search import SEARCH_CHUNK, start_of_rank, valid_start_intervals
from goatdna.errors import GoatDNAError
from goatdna.io.tokens import REPEAT_FLAG, TOKEN_MASK
from goatdna.io.tokens import reverse_complement as complement_rows
from goatdna.training.config import DataConfig


@dataclass(frozen=True)
class WindowIndex:
    """Valid window starts of one split as intervals ``[starts[i], starts[i] + counts[i])``.

    With source weights (`plan_windows`), the intervals are grouped by FASTA source: group ``g``
    holds ranks ``[group_ends[g-1], group_ends[g])`` and is drawn with probability
    ``group_probs[g]``; without them every valid start is equally likely.
    """

    window: int
    """Bases per window (seq_len + 1)."""
    max_n: int
    """Most N bases a valid window may hold."""
    starts: np.ndarray  # (I,) int64 offsets into the split's .bin
    counts: np.ndarray  # (I,) int64 number of consecutive valid starts
    cum_counts: np.ndarray  # (I,) int64 inclusive prefix sums of counts
    groups: tuple[str, ...] = ()
    """Source names of the rank groups (empty: one ungrouped index)."""
    group_ends: np.ndarray | None = None  # (G,) int64 exclusive end rank of each group
    group_probs: np.ndarray | None = None  # (G,) float64 probability of drawing from each group

    @property
    def total(self) -> int:
        """Number of valid window starts."""
        return int(self.cum_counts[-1]) if self.cum_counts.size else 0

    def start_of_rank(self, ranks: np.ndarray) -> np.ndarray:
        """Map ranks ``u`` in ``[0, total)`` (the u-th valid start in index order) to offsets."""
        return start_of_rank(self.starts, self.counts, self.cum_counts, ranks)

    def all_starts(self) -> np.ndarray:
        """Every valid start (tests and small splits only: this is ``total`` integers)."""
        return self.start_of_rank(np.arange(self.total, dtype=np.int64))


def build_window_index(
    tokens: np.ndarray,
    records: Iterable[tuple[int, int]],
    window: int,
    max_n: int = 0,
    chunk: int = SEARCH_CHUNK,
) -> WindowIndex:
    """Intervals of starts ``s`` with ``[s, s + window)`` inside one record and <= max_n N bases.

    ``tokens`` is a split's raw bytes (flag included); ``records`` are ``(offset, length)`` pairs
    in that split (`goatdna.data_prep.window_search`, chunks of ``chunk`` starts).
    """
    s, c = valid_start_intervals(tokens, records, window, max_n, chunk)
    return WindowIndex(window=window, max_n=max_n, starts=s, counts=c, cum_counts=np.cumsum(c))


def build_weighted_index(
    tokens: np.ndarray,
    records: dict[str, list[tuple[int, int]]],
    window: int,
    max_n: int,
    weights: dict[str, float],
) -> WindowIndex:
    """One index whose rank groups are the sources of ``records`` (source -> its records), each
    drawn with its share of ``weights`` (normalised; every source of ``records`` has one)."""
    parts = [valid_start_intervals(tokens, recs, window, max_n) for recs in records.values()]
    starts = np.concatenate([p[0] for p in parts])
    counts = np.concatenate([p[1] for p in parts])
    totals = np.array([int(p[1].sum()) for p in parts], dtype=np.int64)
    probs = np.array([float(weights[name]) for name in records], dtype=np.float64)
    return WindowIndex(
        window=window,
        max_n=max_n,
        starts=starts,
        counts=counts,
        cum_counts=np.cumsum(counts),
        groups=tuple(records),
        group_ends=np.cumsum(totals),
        group_probs=probs / probs.sum(),
    )


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
        if self.index.group_probs is None:
            total = self.index.total
            ranks = rng.choice(total, size=n_global, replace=n_global > total)  # (world*B,)
        else:
            ranks = self._weighted_ranks(rng, n_global)
        flips = rng.random(n_global) < self.rc_prob  # (world*B,)
        rows = slice(rank * self.batch_size, (rank + 1) * self.batch_size)
        return self.index.start_of_rank(ranks[rows]), flips[rows]

    def _weighted_ranks(self, rng: np.random.Generator, n_global: int) -> np.ndarray:
        """Each row's source drawn with the index's group probabilities, then a window of that
        source uniformly (without replacement within the step while the source has enough)."""
        index = self.index
        assert index.group_probs is not None and index.group_ends is not None
        group = rng.choice(index.group_probs.size, size=n_global, p=index.group_probs)
        ranks = np.empty(n_global, dtype=np.int64)  # (world*B,)
        begin = 0
        for g, end in enumerate(index.group_ends.tolist()):
            rows = np.flatnonzero(group == g)
            if rows.size:
                size = end - begin
                ranks[rows] = begin + rng.choice(size, size=rows.size, replace=rows.size > size)
            begin = end
        return ranks


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
        ids[rows] = complement_rows(ids[rows])
        repeat[rows] = repeat[rows, ::-1]
    return ids, repeat


@dataclass(frozen=True)
class SplitWindows:
    """Everything training needs to know about the shards, computed once per process."""

    root: Path
    manifest_sha256: str
    train_index: WindowIndex
    val_starts: np.ndarray  # (n_val,) offsets of the held-out validation windows in val.bin


def _weighted_sources(
    genome: ShardedGenome, weights: dict[str, float]
) -> dict[str, list[tuple[int, int]]]:
    """Sources with a weight > 0, in the dataset's order; names checked against the data."""
    names = genome.source_names()
    for name in weights:
        if name not in names:
            raise GoatDNAError(
                f"data.source_weights: unknown source {name!r}; {genome.root} has the sources "
                f"{', '.join(names)} (see `goatdna info`)"
            )
    for name in names:
        if name not in weights:
            raise GoatDNAError(
                f"data.source_weights gives no weight to source {name!r} of {genome.root}: "
                f"give every source ({', '.join(names)}) a weight (0 leaves it out)"
            )
    return {name: [] for name in names if weights[name] > 0}


def _check_weighted(
    genome: ShardedGenome, index: WindowIndex, weights: dict[str, float], window: int, max_n: int
) -> None:
    assert index.group_ends is not None
    sizes = np.diff(index.group_ends, prepend=0)
    for name, size in zip(index.groups, sizes.tolist(), strict=True):
        if size == 0:
            raise GoatDNAError(
                f"{genome.root}: source {name!r} has weight {weights[name]} in "
                f"data.source_weights but no train window of {window} bases with at most "
                f"{max_n} N bases; give it weight 0, or lower data.seq_len"
            )


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
    tokens = genome.tokens("train")
    if config.source_weights is None:
        train_index = build_window_index(
            tokens, [(r.offset, r.length) for r in records], window, max_n
        )
    else:
        by_source = _weighted_sources(genome, config.source_weights)
        for rec in records:
            if rec.source in by_source:  # weight 0: left out
                by_source[rec.source].append((rec.offset, rec.length))
        train_index = build_weighted_index(tokens, by_source, window, max_n, config.source_weights)
        _check_weighted(genome, train_index, config.source_weights, window, max_n)
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
