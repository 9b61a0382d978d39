"""The DataModule's loaders: per-rank batches from the resumed micro-step, padded validation."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from goatdna.data_prep import ShardedGenome
from goatdna.training.config import DataConfig
from goatdna.training.data import GenomeDataModule
from goatdna.training.windows import WindowSampler, plan_windows, read_windows


def _module(shards: Path, **data) -> GenomeDataModule:
    config = DataConfig(seq_len=32, micro_batch_size=3, num_workers=0, **data)
    plan = plan_windows(ShardedGenome(shards), config)
    return GenomeDataModule(plan, config, seed=11, accumulate=2, max_steps=6)


def _fake_trainer(global_step: int, rank: int, world: int) -> SimpleNamespace:
    return SimpleNamespace(
        global_step=global_step,
        global_rank=rank,
        world_size=world,
        strategy=SimpleNamespace(root_device=torch.device("cpu")),
    )


def test_train_loader_starts_at_the_restored_step_and_serves_this_rank(synthetic_shards: Path):
    dm = _module(synthetic_shards)
    dm.trainer = _fake_trainer(global_step=4, rank=1, world=2)
    loader = dm.train_dataloader()
    assert len(loader) == 6 * 2  # the whole run's micro-steps: Lightning's bookkeeping
    batches = list(loader)
    assert len(batches) == (6 - 4) * 2  # only what is left after step 4
    sampler = WindowSampler(dm.windows.train_index, seed=11, batch_size=3, world_size=2)
    tokens = ShardedGenome(synthetic_shards).tokens("train")
    for i, batch in enumerate(batches):
        starts, flips = sampler.draw(4 * 2 + i, rank=1)
        ids, repeat = read_windows(tokens, starts, 33, flips)
        assert batch["tokens"].dtype == torch.uint8 and batch["tokens"].shape == (3, 33)
        np.testing.assert_array_equal(batch["tokens"].numpy(), ids)
        np.testing.assert_array_equal(batch["repeat"].numpy(), repeat)
    other = _module(synthetic_shards)
    other.trainer = _fake_trainer(global_step=4, rank=0, world=2)
    first_other = next(iter(other.train_dataloader()))["tokens"]
    assert not torch.equal(first_other, batches[0]["tokens"])


@pytest.mark.parametrize("world", [1, 3])
def test_val_loader_covers_the_tiling_once_with_equal_rank_counts(
    synthetic_shards: Path, world: int
) -> None:
    dm = _module(synthetic_shards, val_max_windows=10, val_batch_size=4)
    seen, counts = [], []
    for rank in range(world):
        dm.trainer = _fake_trainer(global_step=0, rank=rank, world=world)
        rows = [b for b in dm.val_loader()]
        weights = torch.cat([b["weight"] for b in rows])
        tokens = torch.cat([b["tokens"] for b in rows])
        counts.append(weights.numel())
        seen += [tuple(t.tolist()) for t, w in zip(tokens, weights, strict=True) if w > 0]
    assert len(set(counts)) == 1  # FSDP-safe: same number of forward passes on every rank
    val = ShardedGenome(synthetic_shards).tokens("val")
    ids, _ = read_windows(val, dm.windows.val_starts, 33)
    assert sorted(seen) == sorted(tuple(r.tolist()) for r in ids)
