"""The data loaders: per-rank batches from the resumed micro-step, padded validation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from goatdna.data_prep import ShardedGenome
from goatdna.training.config import DataConfig
from goatdna.training.data import train_loader, val_loader
from goatdna.training.windows import WindowSampler, plan_windows, read_windows


def _plan(shards: Path, **data):
    config = DataConfig(seq_len=32, micro_batch_size=3, num_workers=0, **data)
    return plan_windows(ShardedGenome(shards), config), config


def test_train_loader_starts_at_the_restored_step_and_serves_this_rank(synthetic_shards: Path):
    windows, config = _plan(synthetic_shards)
    accumulate, start_step, max_steps = 2, 4, 6
    micro_steps = range(start_step * accumulate, max_steps * accumulate)
    batches = list(train_loader(windows, config, 11, micro_steps, rank=1, world=2))
    assert len(batches) == (6 - 4) * 2  # only what is left after step 4
    sampler = WindowSampler(windows.train_index, seed=11, batch_size=3, world_size=2)
    tokens = ShardedGenome(synthetic_shards).tokens("train")
    for i, batch in enumerate(batches):
        starts, flips = sampler.draw(4 * 2 + i, rank=1)
        ids, _ = read_windows(tokens, starts, 33, flips)
        assert batch.dtype == torch.uint8 and batch.shape == (3, 33)  # tokens only, no flags
        np.testing.assert_array_equal(batch.numpy(), ids)
    other = next(iter(train_loader(windows, config, 11, micro_steps, rank=0, world=2)))
    assert not torch.equal(other, batches[0])


@pytest.mark.parametrize("world", [1, 3])
def test_val_loader_covers_the_tiling_once_with_equal_rank_counts(
    synthetic_shards: Path, world: int
) -> None:
    windows, config = _plan(synthetic_shards, val_max_windows=10, val_batch_size=4)
    seen, counts = [], []
    for rank in range(world):
        rows = list(val_loader(windows, config, rank, world))
        weights = torch.cat([b["weight"] for b in rows])
        tokens = torch.cat([b["tokens"] for b in rows])
        counts.append(weights.numel())
        seen += [tuple(t.tolist()) for t, w in zip(tokens, weights, strict=True) if w > 0]
    assert len(set(counts)) == 1  # FSDP-safe: same number of forward passes on every rank
    val = ShardedGenome(synthetic_shards).tokens("val")
    ids, _ = read_windows(val, windows.val_starts, 33)
    assert sorted(seen) == sorted(tuple(r.tolist()) for r in ids)
