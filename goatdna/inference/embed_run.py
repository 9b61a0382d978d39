"""`goatdna embed --devices`: the same embeddings from a plain loop over Fabric (many devices).

The records are cut into groups of ``batch_size`` in input order; each rank embeds its
contiguous block of groups (`goatdna.runtime.rank_block`) with `embed_records`, one group at a
time, so every forward pass holds the same records whatever the number of devices and the
vectors are the same to the byte. The blocks are gathered in rank order (which is the input
order) and global rank 0 writes the output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from goatdna.runtime import gather_objects, rank_block

from .embed import EmbedOptions, SequenceRecord, embed_records
from .loop import model_on_device, rank_zero_progress


def embed_on_fabric(
    model: Any,
    records: Sequence[SequenceRecord],
    options: EmbedOptions,
    max_length: int,
    fabric: Any,
    progress: bool = True,
) -> tuple[list[np.ndarray], bool]:
    """(vectors in input order, is global rank 0) on a launched Fabric; every rank gets all."""
    model = model_on_device(fabric, model)
    size = options.batch_size
    groups = rank_block(-(-len(records) // size), fabric.global_rank, fabric.world_size)
    first, stop = groups.start * size, min(groups.stop * size, len(records))
    mine: list[np.ndarray] = []
    with rank_zero_progress(fabric, stop - first, "embed", "records", progress) as advance:
        for start in range(first, stop, size):
            group = records[start : start + size]
            with fabric.autocast():
                mine.extend(embed_records(model, group, options, max_length))
            advance(len(group))
    vectors = gather_objects(fabric, mine)
    if len(vectors) != len(records):
        raise RuntimeError("the ranks' blocks lost records")  # a bug, not a user error
    return vectors, fabric.global_rank == 0
