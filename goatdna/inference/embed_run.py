"""`goatdna embed --devices`: the same embeddings from a plain loop over Fabric (many devices).

The records are cut into groups of ``batch_size`` in input order; each rank embeds its
contiguous block of groups (`goatdna.runtime.rank_block`) with `embed_records`, one group at a
time, so every forward pass holds the same records whatever the number of devices and the
vectors are the same to the byte. The blocks are gathered in rank order (which is the input
order) and global rank 0 writes the output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING

import numpy as np

from goatdna.runtime import on_rank_zero, rank_block
from goatdna.workdir import WorkDir
from goatdna.workdir import work_dir_for as work_dir_for  # where embed's work folder is

if TYPE_CHECKING:
    from lightning_fabric import Fabric

    from goatdna.model import DNADecoder

from .embed import EmbedOptions, SequenceRecord, embed_records
from .loop import load_arrays, model_on_device, save_arrays

UNIT_GROUPS = 16
"""Groups of ``batch_size`` records per resumable unit (the work a kill can lose at most)."""


_save_unit = save_arrays  # module names kept: tests wrap them to drill a kill
_load_unit = load_arrays


def embed_resumable(
    model: DNADecoder,
    records: Sequence[SequenceRecord],
    options: EmbedOptions,
    max_length: int,
    work: WorkDir,
    open_work: Callable[[], None],
    fabric: Fabric | None = None,
    progress: bool = True,
) -> list[np.ndarray] | None:
    """Embed ``records`` unit by unit, saving each finished unit in ``work``; the vectors in
    input order on the writing process (global rank 0), None on the others.

    ``open_work`` creates or checks the work folder (`WorkDir.open` with the run's ``--resume``
    and ``--force``); it runs on rank 0 only, which then lists the unfinished units once for all
    ranks. A unit is ``UNIT_GROUPS`` groups of ``batch_size`` records, each group embedded alone
    exactly as an uninterrupted run embeds it, so a resumed run gives the bytes of one that never
    stopped.
    Without ``fabric`` the model runs where it is, in this process.
    """
    size = options.batch_size * UNIT_GROUPS
    n_units = -(-len(records) // size)

    def prepare() -> list[int]:
        open_work()
        return work.pending(range(n_units), message=print if progress else lambda _t: None)[1]

    if fabric is None:
        pending, rank, world = prepare(), 0, 1
    else:
        pending = on_rank_zero(fabric, prepare)
        model = model_on_device(fabric, model)
        rank, world = fabric.global_rank, fabric.world_size
    mine = [pending[i] for i in rank_block(len(pending), rank, world)]
    for unit in mine:
        vectors: list[np.ndarray] = []
        for start in range(unit * size, min((unit + 1) * size, len(records)), options.batch_size):
            group = records[start : start + options.batch_size]
            with fabric.autocast() if fabric is not None else nullcontext():
                vectors.extend(embed_records(model, group, options, max_length))
        _save_unit(work, unit, vectors)
    if fabric is not None:
        fabric.barrier()
    if rank != 0:
        return None
    return [v for unit in range(n_units) for v in _load_unit(work, unit)]
