"""Lightning data pieces: per-micro-step training batches and the fixed validation tiling.

The training "dataset" is indexed by micro-step: item ``k`` is this rank's micro-batch of
micro-step ``k`` (see `goatdna.training.windows.WindowSampler`). The sampler starts at
``global_step * accumulate`` when the loader is iterated, so a run resumed from a checkpoint
continues with exactly the batches the uninterrupted run would have drawn. Memmaps are opened
lazily in whichever process reads (each DataLoader worker opens its own).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

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
    """Item ``k``: this rank's micro-batch of micro-step ``k`` as uint8 tensors.

    Returns ``{"tokens": (B, seq_len + 1) uint8 ids 0..4, "repeat": (B, seq_len + 1) bool}``.
    """

    def __init__(
        self, split: _LazySplit, sampler: WindowSampler, rank: int, total_micro_steps: int
    ) -> None:
        self.split = split
        self.sampler = sampler
        self.rank = rank
        self.total_micro_steps = total_micro_steps

    def __len__(self) -> int:
        return self.total_micro_steps

    def __getitem__(self, micro_step: int) -> dict[str, torch.Tensor]:
        starts, flips = self.sampler.draw(micro_step, self.rank)
        ids, repeat = read_windows(self.split.tokens, starts, self.sampler.index.window, flips)
        return {"tokens": torch.from_numpy(ids), "repeat": torch.from_numpy(repeat)}


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
        ids, repeat = read_windows(self.split.tokens, self.starts[i : i + 1], self.window)
        return {
            "tokens": torch.from_numpy(ids[0]),  # (W,)
            "repeat": torch.from_numpy(repeat[0]),
            "weight": torch.tensor(float(self.weights[i])),
        }


class ResumingSampler(Sampler[int]):
    """Yields micro-step numbers ``start() .. total - 1``; ``start`` is read when iteration begins.

    ``len`` is the whole run's count so Lightning's batch bookkeeping (restored from the
    checkpoint) lines up with the batches still to come.
    """

    def __init__(self, total: int, start: Callable[[], int]) -> None:
        self.total = total
        self.start = start

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start(), self.total))

    def __len__(self) -> int:
        return self.total


class GenomeDataModule(pl.LightningDataModule):
    """Training batches drawn per micro-step and the fixed validation tiling, per rank.

    Lightning's own validation loop is not used: `goatdna.training.lifecycle` validates at
    optimizer-step boundaries through `val_loader()`, so validation never shifts the data stream.
    """

    def __init__(
        self, windows: SplitWindows, config: DataConfig, seed: int, accumulate: int, max_steps: int
    ) -> None:
        super().__init__()
        self.windows = windows
        self.config = config
        self.seed = seed
        self.accumulate = accumulate
        self.max_steps = max_steps

    def _rank_world(self) -> tuple[int, int]:
        trainer = self.trainer
        if trainer is None:
            return 0, 1
        return trainer.global_rank, trainer.world_size

    def _start_micro_step(self) -> int:
        trainer = self.trainer
        return 0 if trainer is None else trainer.global_step * self.accumulate

    def train_dataloader(self) -> DataLoader:
        rank, world = self._rank_world()
        sampler = WindowSampler(
            index=self.windows.train_index,
            seed=self.seed,
            batch_size=self.config.micro_batch_size,
            world_size=world,
            rc_prob=self.config.rc_prob,
        )
        total = self.max_steps * self.accumulate
        dataset = TrainBatches(_LazySplit(self.windows.root, "train"), sampler, rank, total)
        return self._loader(dataset, ResumingSampler(total, self._start_micro_step), None)

    def val_loader(self) -> DataLoader:
        """This rank's validation windows, padded to the same count on every rank."""
        rank, world = self._rank_world()
        starts = self.windows.val_starts
        per_rank = -(-starts.size // world)  # ceil
        mine = starts[rank::world]
        weights = np.ones(per_rank, dtype=np.float32)
        if mine.size < per_rank:
            weights[mine.size :] = 0.0
            mine = np.concatenate([mine, np.repeat(starts[:1], per_rank - mine.size)])
        dataset = ValWindows(
            _LazySplit(self.windows.root, "val"), mine, self.config.seq_len + 1, weights
        )
        return self._loader(dataset, None, self.config.val_batch_size)

    def _loader(self, dataset: Dataset, sampler: Sampler | None, batch_size: int | None):
        workers = self.config.num_workers
        pin = self.trainer is not None and self.trainer.strategy.root_device.type == "cuda"
        return DataLoader(
            dataset,
            batch_size=batch_size,
            sampler=sampler,
            shuffle=False,
            num_workers=workers,
            pin_memory=pin,
            persistent_workers=False,
            prefetch_factor=4 if workers > 0 else None,
        )
