"""What every multi-device inference loop shares: the model on the rank's device, rank 0's bar.

`score-variants`, `score-track`, `embed` and `predict` are plain loops over a launched
`lightning_fabric.Fabric` (`goatdna.runtime.Runtime.fabric`): each rank runs the model over its
contiguous `goatdna.runtime.rank_block` of the inputs, the blocks come back in rank order, and
global rank 0 writes the output. Nothing is trained, so the model is only moved to
``fabric.device`` (a DDP wrapper would add a collective to every forward pass).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from goatdna.runtime import on_rank_zero
from goatdna.workdir import WorkDir, output_lock

if TYPE_CHECKING:  # Lightning and torch load with the model, not with this module
    from lightning_fabric import Fabric
    from torch import nn

Model = TypeVar("Model", bound="nn.Module")


def model_on_device(fabric: Fabric, model: Model) -> Model:
    """``model`` in eval mode on this rank's device (moved in place, so its own type is kept)."""
    fabric.to_device(model)
    return model.eval()


@contextmanager
def rank_zero_lock(
    fabric: Fabric, out: Path | Sequence[Path], option: str = "--out"
) -> Iterator[None]:
    """Hold the lock of ``out`` (or of each of several outputs) on global rank 0 for the block
    (`goatdna.workdir.output_lock`).

    Taken inside `goatdna.runtime.on_rank_zero`, so a refusal (another run holds it) is raised on
    every rank at once instead of leaving the others waiting at the next collective.
    """
    outs = [out] if isinstance(out, Path) else list(out)
    with ExitStack() as held:

        def lock() -> None:
            held.enter_context(output_lock(outs, True, option))

        on_rank_zero(fabric, lock)
        yield


@contextmanager
def rank_zero_progress(
    fabric: Fabric, total: int, label: str, unit: str, enabled: bool = True
) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)`` for a progress bar over ``total`` items, shown on global rank 0 only
    (`goatdna.progress.progress_bar`: a rich bar on a terminal, timed lines in a log).

    Other ranks (and ``enabled=False``) get an ``advance`` that does nothing; rank 0 counts
    its own block, which the ranks' blocks all match in size to within one item.
    """
    from goatdna.progress import progress_bar

    with progress_bar(label, total, unit, enabled and fabric.global_rank == 0) as advance:
        yield advance


def save_arrays(work: WorkDir, unit: int, arrays: Sequence[np.ndarray]) -> None:
    """Save one finished unit's arrays through ``work`` (one .npz payload, checksummed there)."""
    buffer = io.BytesIO()
    np.savez(buffer, *arrays)
    work.save(unit, buffer.getvalue())


def load_arrays(work: WorkDir, unit: int) -> list[np.ndarray]:
    """The arrays `save_arrays` saved for ``unit``, in their order."""
    with np.load(io.BytesIO(work.load(unit))) as data:
        return [data[f"arr_{i}"] for i in range(len(data.files))]
