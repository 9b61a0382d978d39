"""Data loaders of pretraining: per-micro-step training batches and the fixed validation tiling.

The training "dataset" is indexed by micro-step: item ``k`` is this rank's micro-batch of
micro-step ``k`` (see `goatdna.training.windows.WindowSampler`), and the loader iterates the
micro-steps ``start .. total - 1`` in order. A run resumed at optimizer step ``s`` starts at
``s * accumulate`` and so continues with exactly the batches the uninterrupted run would have
drawn. Memmaps are opened lazily in whichever process reads (each DataLoader worker opens its own).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from goatdna.data_prep import ShardedGenome
from goatdna.training.config import DataConfig
from goatdna.training.windows import SplitWindows, WindowSampler, read_windows


class _LazySplit:
    """A split's memmap, opened on first use in the current process (never pickled)."""

    def __init__(self, root: Path, split: str) -> None:
        self.root = Path(root)
        self.split = split
        self._tokens: np.ndarray | None = None

    @property
    def tokens(self) -> np.ndarray:
        if self._tokens is None:
            self._tokens = ShardedGenome(self.root).tokens(self.split)
        return self._tokens

    def __getstate__(self) -> dict[str, Any]:
        return {"root": self.root, "split": self.split, "_tokens": None}


class TrainBatches(Dataset):
    """Item ``k``: this rank's micro-batch of micro-step ``k``, ``(B, seq_len + 1)`` uint8 ids 0..4."""

    def __init__(self, split: _LazySplit, sampler: WindowSampler, rank: int) -> None:
        self.split = split
        self.sampler = sampler
        self.rank = rank

    def __getitem__(self, micro_step: int) -> torch.Tensor:
        starts, flips = self.sampler.draw(micro_step, self.rank)
        ids, _ = read_windows(self.split.tokens, starts, self.sampler.index.window, flips)
        return torch.from_numpy(ids)


class ValWindows(Dataset):
    """This rank's share of the validation tiling; padding rows carry weight 0.

    Every rank gets the same number of rows, so sharded models (FSDP) run the same number of
    forward passes on every rank.
    """

    def __init__(self, split: _LazySplit, starts: np.ndarray, window: int, weights: np.ndarray):
        self.split = split
        self.starts = starts
        self.window = window
        self.weights = weights

    def __len__(self) -> int:
        return int(self.starts.size)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids, _ = read_windows(self.split.tokens, self.starts[i : i + 1], self.window)
        return {
            "tokens": torch.from_numpy(ids[0]),  # (W,)
            "weight": torch.tensor(float(self.weights[i])),
        }


def train_loader(
    windows: SplitWindows,
    config: DataConfig,
    seed: int,
    micro_steps: range,
    rank: int,
    world: int,
    pin_memory: bool = False,
) -> DataLoader:
    """This rank's micro-batches of ``micro_steps``, in order."""
    sampler = WindowSampler(
        index=windows.train_index,
        seed=seed,
        batch_size=config.micro_batch_size,
        world_size=world,
        rc_prob=config.rc_prob,
    )
    dataset = TrainBatches(_LazySplit(windows.root, "train"), sampler, rank)
    return _loader(dataset, micro_steps, None, config.num_workers, pin_memory)


def val_loader(
    windows: SplitWindows, config: DataConfig, rank: int, world: int, pin_memory: bool = False
) -> DataLoader:
    """This rank's validation windows, padded to the same count on every rank."""
    starts = windows.val_starts
    per_rank = -(-starts.size // world)  # ceil
    mine = starts[rank::world]
    weights = np.ones(per_rank, dtype=np.float32)
    if mine.size < per_rank:
        weights[mine.size :] = 0.0
        mine = np.concatenate([mine, np.repeat(starts[:1], per_rank - mine.size)])
    dataset = ValWindows(_LazySplit(windows.root, "val"), mine, config.seq_len + 1, weights)
    return _loader(dataset, None, config.val_batch_size, config.num_workers, pin_memory)


def _loader(
    dataset: Dataset, order: range | None, batch_size: int | None, workers: int, pin: bool
) -> DataLoader:
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=order,
        shuffle=False,
        num_workers=workers,
        pin_memory=pin,
        persistent_workers=False,
        prefetch_factor=4 if workers > 0 else None,
    )
