"""`goatdna embed --devices`: the same embeddings through Lightning's predict loop (many devices).

Each rank takes a contiguous block of the records (`goatdna.runtime.rank_block`) and embeds it in
batches with `embed_records`; the blocks are gathered to every rank in rank order, which restores
the input order exactly, and rank 0 writes the output.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch

from goatdna.runtime import Runtime, rank_block

from .embed import EmbedOptions, SequenceRecord, embed_records


class _EmbedModule(pl.LightningModule):
    """Holds the model; each predict batch is a list of record indices of this rank's block."""

    def __init__(
        self,
        model: torch.nn.Module,
        records: Sequence[SequenceRecord],
        options: EmbedOptions,
        max_length: int,
    ) -> None:
        super().__init__()
        self.model = model
        self.records = records
        self.options = options
        self.max_length = max_length

    def predict_dataloader(self) -> Any:
        block = rank_block(len(self.records), self.global_rank, self.trainer.world_size)
        return torch.utils.data.DataLoader(
            list(block), batch_size=self.options.batch_size, collate_fn=list
        )

    def predict_step(self, batch: list[int], batch_idx: int) -> list[tuple[int, np.ndarray]]:
        chosen = [self.records[i] for i in batch]
        vectors = embed_records(self.model, chosen, self.options, self.max_length)
        return list(zip(batch, vectors, strict=True))


def embed_with_runtime(
    model: torch.nn.Module,
    records: Sequence[SequenceRecord],
    options: EmbedOptions,
    max_length: int,
    runtime: Runtime,
    progress: bool = True,
) -> tuple[list[np.ndarray] | None, bool]:
    """(vectors in input order, is rank 0); ranks other than 0 get (None, False)."""
    module = _EmbedModule(model, records, options, max_length)
    trainer = runtime.predict_trainer(progress=progress)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*isinstance\\(treespec, LeafSpec\\).*")
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        outputs = trainer.predict(module, return_predictions=True) or []
    mine = [pair for batch in outputs for pair in batch]
    if trainer.world_size > 1:
        gathered: list[Any] = [None] * trainer.world_size
        torch.distributed.all_gather_object(gathered, mine)
        mine = [pair for part in gathered for pair in part]
    vectors: list[np.ndarray | None] = [None] * len(records)
    for index, vector in mine:
        vectors[index] = vector
    if any(v is None for v in vectors):
        raise RuntimeError("predict loop lost records")  # a bug, not a user error
    return vectors, trainer.is_global_zero  # type: ignore[return-value]
