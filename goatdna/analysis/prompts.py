"""Drawing prompts (with their reference continuations) from a held-out split.

The GC study needs N windows of ``prompt_length + continuation_length`` bases from the test split,
each inside one record (never across a contig/interval boundary), free of N in both parts, and
non-overlapping so that no prompt is counted twice. The draw is a pure function of the seed and the
shards, so GOAT and RoPE are always compared on the same prompts.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from goatdna.data_prep.window_search import start_of_rank, valid_start_intervals
from goatdna.errors import GoatDNAError
from goatdna.io.tokens import TOKEN_MASK, decode

if TYPE_CHECKING:
    from goatdna.data_prep import ShardedGenome


@dataclass(frozen=True)
class Prompt:
    """A prompt and the bases that really follow it in the genome (both uppercase)."""

    region: str  # source coordinates of prompt + reference, samtools style: chr:start-end (1-based)
    prompt: str
    reference: str


def draw_prompts(
    genome: ShardedGenome,
    split: str = "test",
    n_prompts: int = 100,
    prompt_length: int = 200,
    continuation_length: int = 200,
    seed: int = 0,
) -> list[Prompt]:
    """Draw ``n_prompts`` non-overlapping N-free windows from ``split`` of a ShardedGenome.

    Start positions are drawn uniformly over all N-free window starts of all records (found by
    `goatdna.data_prep.window_search`, so a long contig gets proportionally more prompts); a
    start whose window overlaps one already chosen is drawn again. Raises GoatDNAError when the
    split cannot supply that many windows.
    """
    if n_prompts < 1 or prompt_length < 1 or continuation_length < 1:
        raise GoatDNAError(
            "GC study: the number of prompts, the prompt length and the continuation length "
            "must all be >= 1"
        )
    window = prompt_length + continuation_length
    tokens = genome.tokens(split)  # (split_length,) uint8 with the repeat flag
    records = genome.records(split)
    if not any(r.length >= window for r in records):
        raise GoatDNAError(
            f"split '{split}' of {genome.root} has no record of at least {window} bases "
            f"for {prompt_length}-nt prompts with {continuation_length}-nt continuations; "
            "prepare a larger genome or shorten the prompts"
        )
    starts, counts = valid_start_intervals(tokens, [(r.offset, r.length) for r in records], window)
    cum_counts = np.cumsum(counts)
    total = int(cum_counts[-1]) if cum_counts.size else 0
    record_offsets = np.array([r.offset for r in records], dtype=np.int64)

    rng = np.random.default_rng(seed)
    chosen: list[Prompt] = []
    taken: list[int] = []  # chosen offsets, sorted
    attempts = 0
    max_attempts = 200 * n_prompts + 1000
    while total and len(chosen) < n_prompts and attempts < max_attempts:
        attempts += 1
        offset = int(start_of_rank(starts, counts, cum_counts, int(rng.integers(total))))
        at = bisect.bisect_left(taken, offset)
        if (at < len(taken) and taken[at] - offset < window) or (
            at and offset - taken[at - 1] < window
        ):
            continue
        taken.insert(at, offset)
        rec = records[int(np.searchsorted(record_offsets, offset, side="right")) - 1]
        local = offset - rec.offset
        text = decode(np.asarray(tokens[offset : offset + window]) & TOKEN_MASK)
        chosen.append(
            Prompt(
                region=f"{rec.name}:{rec.start + local + 1}-{rec.start + local + window}",
                prompt=text[:prompt_length],
                reference=text[prompt_length:],
            )
        )
    if len(chosen) < n_prompts:
        raise GoatDNAError(
            f"split '{split}' of {genome.root}: found only {len(chosen)} non-overlapping N-free "
            f"windows of {window} bases, {n_prompts} requested; ask for fewer prompts"
        )
    return chosen
