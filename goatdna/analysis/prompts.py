"""Drawing prompts (with their reference continuations) from a held-out split.

The GC study needs N windows of ``prompt_length + continuation_length`` bases from the test split,
each inside one record (never across a contig/interval boundary), free of N in both parts, and
non-overlapping so that no prompt is counted twice. The draw is a pure function of the seed and the
shards, so GOAT and RoPE are always compared on the same prompts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from goatdna.data_prep.tokens import TOKEN_MASK, N, decode
from goatdna.errors import GoatDNAError


@dataclass(frozen=True)
class Prompt:
    """A prompt and the bases that really follow it in the genome (both uppercase)."""

    region: str  # source coordinates of prompt + reference, samtools style: chr:start-end (1-based)
    prompt: str
    reference: str


def _record_windows(length: int, window: int) -> int:
    return max(0, length - window + 1)


def draw_prompts(
    genome: Any,
    split: str = "test",
    n_prompts: int = 100,
    prompt_length: int = 200,
    continuation_length: int = 200,
    seed: int = 0,
) -> list[Prompt]:
    """Draw ``n_prompts`` non-overlapping N-free windows from ``split`` of a ShardedGenome.

    Start positions are drawn uniformly over all valid window starts of all records (so a long
    contig gets proportionally more prompts). Raises GoatDNAError when the split cannot supply
    that many windows.
    """
    if n_prompts < 1 or prompt_length < 1 or continuation_length < 1:
        raise GoatDNAError(
            "GC study: the number of prompts, the prompt length and the continuation length "
            "must all be >= 1"
        )
    window = prompt_length + continuation_length
    tokens = genome.tokens(split)  # (split_length,) uint8 with the repeat flag
    records = [r for r in genome.records(split) if r.length >= window]
    if not records:
        raise GoatDNAError(
            f"split '{split}' of {genome.root} has no record of at least {window} bases "
            f"for {prompt_length}-nt prompts with {continuation_length}-nt continuations; "
            "prepare a larger genome or shorten the prompts"
        )
    counts = np.array([_record_windows(r.length, window) for r in records], dtype=np.int64)
    cumulative = np.cumsum(counts)
    total = int(cumulative[-1])

    rng = np.random.default_rng(seed)
    chosen: list[Prompt] = []
    taken: dict[int, list[int]] = {}  # record index -> chosen local starts
    attempts = 0
    max_attempts = 200 * n_prompts + 1000
    while len(chosen) < n_prompts and attempts < max_attempts:
        attempts += 1
        flat = int(rng.integers(total))
        rec_idx = int(np.searchsorted(cumulative, flat, side="right"))
        local = flat - (int(cumulative[rec_idx - 1]) if rec_idx else 0)
        if any(abs(local - s) < window for s in taken.get(rec_idx, [])):
            continue
        rec = records[rec_idx]
        piece = np.asarray(tokens[rec.offset + local : rec.offset + local + window]) & TOKEN_MASK
        if (piece == N).any():
            continue
        taken.setdefault(rec_idx, []).append(local)
        text = decode(piece)
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
