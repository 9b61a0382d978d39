"""What every multi-device inference loop shares: the resumable unit loop (`run_units`), the
model on the rank's device, the output lock and rank 0's bar.

`score-variants`, `score-track`, `mutagenesis`, `embed`, `predict` and `attribute` are plain loops
over a launched `lightning_fabric.Fabric` (`goatdna.runtime.Runtime.fabric`), all run by
`run_units`: each rank runs the model over its contiguous `goatdna.runtime.rank_block` of the
unfinished units, saving each in the run's work folder (`goatdna.workdir.WorkDir`), and global
rank 0 writes the output from the units in order. Nothing is trained, so the model is only moved
to ``fabric.device`` (a DDP wrapper would add a collective to every forward pass).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from goatdna.faults import crash_point
from goatdna.runtime import on_rank_zero, rank_block
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


# ---------------------------------------------------------------------------------------------
# the resumable unit loop


Arrays = Sequence[np.ndarray]
Compute = Callable[[list[int], Callable[[int], None]], Iterable[tuple[int, Arrays]]]
"""``compute(units, advance)``: yields ``(unit, arrays)`` for each of ``units`` in their order,
calling ``advance(n)`` for its progress (after a ``yield`` it runs once that unit is saved)."""
R = TypeVar("R")


def _quiet(_text: str) -> None:
    return None


@dataclass(frozen=True)
class UnitProgress:
    """A rank-0 progress bar over this rank's units: ``size(unit)`` items of ``unit`` each."""

    label: str
    unit: str
    size: Callable[[int], int]
    enabled: bool = True


@dataclass(frozen=True)
class FinishedUnits:
    """What the writer of a `run_units` run gets: every unit finished, in the work folder."""

    work: WorkDir
    n_units: int
    resumed: int  # units an earlier, interrupted run had finished

    def load(self, unit: int) -> list[np.ndarray]:
        return load_arrays(self.work, unit)


def run_units(
    fabric: Fabric,
    work: WorkDir,
    n_units: int,
    compute: Compute,
    write: Callable[[FinishedUnits], R],
    *,
    resume: bool,
    force: bool,
    message: Callable[[str], None] = _quiet,
    opened: Callable[[], None] = lambda: None,
    listed: Callable[[list[int], list[int]], None] = lambda _finished, _pending: None,
    progress: UnitProgress | None = None,
    split: bool = True,
    crash: str | None = None,
    save: Callable[[WorkDir, int, Arrays], None] = save_arrays,
    crash_at: Callable[[str, int], None] = crash_point,
    drop_unsaved: bool = False,
) -> R | None:
    """The one resumable, sharded unit loop of every inference command; ``write``'s result on
    global rank 0, None on the other ranks.

    Units ``0..n_units-1`` are the work: global rank 0 opens ``work`` (`WorkDir.open` with
    ``resume`` and ``force``; then ``opened()``), lists the unfinished units once (damaged ones
    said through ``message``; then ``listed(finished, pending)``) and every rank gets that list
    (`goatdna.runtime.on_rank_zero`, so a refusal is raised on all ranks at once). With
    ``split`` each rank computes its contiguous block of it (`goatdna.runtime.rank_block`) and
    saves each unit as it finishes; without, every rank takes part in each unit (a ``compute``
    that is itself sharded) and rank 0 saves it. After each save the crash point ``crash``
    (`goatdna.faults`) counts the units this process has saved. After a barrier rank 0 calls
    ``write`` and removes the folder, so the output is the same bytes however many ranks ran
    and however often the run was resumed.

    Each command keeps only its inputs, its per-unit ``compute`` and its ``write``: the
    skeleton lives here once, so a fix to resuming or sharding reaches every command.
    ``save`` and ``crash_at`` (`save_arrays`, `goatdna.faults.crash_point`) are the saver and the
    crash point (a module may pass its own names, looked up per call, so a test can wrap them);
    ``drop_unsaved`` removes the folder when a single-process run stops before it saved
    anything and nothing was resumed (a next run must not be told to pass ``--resume``).
    The caller holds the outputs' lock (`rank_zero_lock`) around the call.
    """

    def prepare() -> tuple[int, list[int]]:  # rank 0 only; the ranks agree on its listing
        work.open(resume, force=force)
        opened()
        finished, pending = work.pending(range(n_units), message=message)
        listed(finished, pending)
        return len(finished), pending

    resumed, pending = on_rank_zero(fabric, prepare)
    rank, world = fabric.global_rank, fabric.world_size
    mine = [pending[i] for i in rank_block(len(pending), rank, world)] if split else pending
    saves = split or rank == 0
    saved = 0
    total = sum(progress.size(u) for u in mine) if progress is not None else 0
    try:
        with (
            rank_zero_progress(fabric, total, progress.label, progress.unit, progress.enabled)
            if progress is not None
            else nullcontext(_ignore)
        ) as advance:
            units = iter(compute(mine, advance))
            try:
                for unit, arrays in units:
                    if saves:
                        save(work, unit, arrays)
                        saved += 1
                        if crash is not None:
                            crash_at(crash, saved)
            finally:  # a generator's own `with` blocks end here, not whenever it is collected
                close = getattr(units, "close", None)
                if close is not None:
                    close()
    except BaseException:
        if drop_unsaved and resumed == 0 and saved == 0 and world == 1:
            work.remove()
        raise
    fabric.barrier()
    if rank != 0:
        return None
    result = write(FinishedUnits(work, n_units, resumed))
    work.remove()
    return result


def _ignore(_n: int) -> None:
    return None
