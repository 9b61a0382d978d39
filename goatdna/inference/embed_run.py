"""`goatdna embed`: resumable units of records, a plain loop over Fabric (many devices).

The records are cut into groups of ``batch_size`` in input order and the groups into units of
``UNIT_GROUPS``; `goatdna.inference.loop.run_units` gives each rank its contiguous block of the
unfinished units (`goatdna.runtime.rank_block`) and saves each unit as it finishes in the work
folder beside the output, so ``--resume`` continues a killed run. Every group is embedded alone
with `embed_records`, so a forward pass holds the same records whatever the number of devices
or of restarts and the vectors are the same to the byte. Global rank 0 writes the output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from goatdna.runtime import single_process_fabric
from goatdna.workdir import JSONValue, WorkDir, input_stamp
from goatdna.workdir import work_dir_for as work_dir_for  # where embed's work folder is

if TYPE_CHECKING:
    from lightning_fabric import Fabric

    from goatdna.model import DNADecoder

from .embed import EmbedOptions, SequenceRecord, embed_records
from .loop import Arrays, FinishedUnits, load_arrays, model_on_device, run_units, save_arrays

R = TypeVar("R")

UNIT_GROUPS = 16
"""Groups of ``batch_size`` records per resumable unit (the work a kill can lose at most)."""


_save_unit = save_arrays  # module names kept: tests wrap them to drill a kill
_load_unit = load_arrays


def embed_work(out: Path, checkpoint: Path, inputs: Sequence[Path | None],
               options: EmbedOptions, max_length: int, records: int) -> WorkDir:  # fmt: skip
    """The work folder of an `embed` run writing ``out``; its state is what decides the
    vectors (the input stamps, the options, ``max_length``, the unit size)."""
    state: dict[str, JSONValue] = {
        "checkpoint": input_stamp(checkpoint).as_json(),
        "inputs": [input_stamp(p).as_json() for p in inputs if p is not None],
        "options": {k: v for k, v in asdict(options).items() if k != "max_length"},
        "max_length": max_length,
        "records": records,
        "unit_groups": UNIT_GROUPS,
    }
    return WorkDir(work_dir_for(out), "embed", state, lambda i: f"unit-{i:06d}.npz")


def embed_resumable(
    model: DNADecoder,
    records: Sequence[SequenceRecord],
    options: EmbedOptions,
    max_length: int,
    work: WorkDir,
    write: Callable[[list[np.ndarray]], R],
    *,
    resume: bool,
    force: bool,
    fabric: Fabric | None = None,
    progress: bool = True,
) -> R | None:
    """Embed ``records`` unit by unit through `goatdna.inference.loop.run_units` (``work``
    opened with ``resume`` and ``force``), then ``write(vectors)`` with the vectors in input
    order on the writing process (global rank 0); its result there, None on the others.

    A unit is ``UNIT_GROUPS`` groups of ``batch_size`` records, each group embedded alone
    exactly as an uninterrupted run embeds it, so a resumed run gives the bytes of one that
    never stopped. ``fabric``: a launched Fabric; None runs one CPU process.
    """
    fabric = fabric or single_process_fabric()
    size = options.batch_size * UNIT_GROUPS
    n_units = -(-len(records) // size)
    model = model_on_device(fabric, model)

    def compute(units: list[int], _advance: Callable[[int], None]) -> Iterator[tuple[int, Arrays]]:
        for unit in units:
            vectors: list[np.ndarray] = []
            stop = min((unit + 1) * size, len(records))
            for start in range(unit * size, stop, options.batch_size):
                group = records[start : start + options.batch_size]
                with fabric.autocast():
                    vectors.extend(embed_records(model, group, options, max_length))
            yield unit, vectors

    def write_all(done: FinishedUnits) -> R:
        return write([v for unit in range(n_units) for v in _load_unit(done.work, unit)])

    return run_units(
        fabric, work, n_units, compute, write_all, resume=resume, force=force,
        message=print if progress else _quiet,
        save=lambda *unit: _save_unit(*unit),  # looked up per call: a test wraps it
    )  # fmt: skip


def _quiet(_text: str) -> None:
    return None
