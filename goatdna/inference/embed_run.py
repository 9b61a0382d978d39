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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from goatdna.runtime import single_process_fabric
from goatdna.workdir import JSONValue, WorkDir, input_stamp
from goatdna.workdir import work_dir_for as work_dir_for  # where embed's work folder is

if TYPE_CHECKING:
    from lightning_fabric import Fabric

    from goatdna.model import DNADecoder
    from goatdna.runtime import Runtime

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


# ---------------------------------------------------------------------------------------------
# the `embed` command


@dataclass(frozen=True)
class EmbedRequest:
    """Everything one `embed` run needs (the CLI's options): ``sequences``, or ``fasta`` with
    ``bed``; ``layer`` and ``pool`` None: a probe checkpoint's own, else `EmbedOptions`'."""

    checkpoint: Path
    out: Path
    fasta: Path | None = None
    bed: Path | None = None
    sequences: Path | None = None
    layer: int | None = None
    pool: str | None = None
    strands: str = EmbedOptions.strands
    max_length: int | None = None
    batch_size: int = EmbedOptions.batch_size
    resume: bool = False
    force: bool = False


@dataclass(frozen=True)
class EmbedResult:
    """What global rank 0 wrote: how many records, with which options and chunk length."""

    records: int
    options: EmbedOptions
    max_length: int


def embed(request: EmbedRequest, runtime: Callable[[], Runtime]) -> EmbedResult | None:
    """Check ``request`` (before any work), read the records, load the model and embed them
    resumably into ``request.out`` (`embed_resumable`); the result on global rank 0, None on the
    others. ``runtime()`` builds the devices' `goatdna.runtime.Runtime` once the outputs are
    claimed. A probe checkpoint's head gives the layer and pooling it reads when not asked."""
    from goatdna.atomic import check_output_dir, check_output_file
    from goatdna.checkpoint import load_checkpoint, task_head
    from goatdna.io.records import check_record_sources, read_records
    from goatdna.workdir import claim_output, claim_output_folder, stops_with_resume_hint

    from .embed import default_max_length
    from .embed_io import check_output, write_embeddings, zarr_entry
    from .loop import rank_zero_lock

    out, sequences, fasta, bed = request.out, request.sequences, request.fasta, request.bed
    check_record_sources(sequences, fasta, bed)
    # a probe's pooling is mean or last, which every output format takes: checked as mean here
    suffix = check_output(out, request.pool or EmbedOptions.pool)  # before any work
    (check_output_dir if suffix == ".zarr" else check_output_file)(out, "--out")
    read = [sequences, fasta, bed, request.checkpoint]
    if suffix == ".zarr":  # a folder, swapped in whole: never one holding more than a store
        claim_output_folder(out, request.force, owns=zarr_entry, what="zarr store", inputs=read)
    else:
        claim_output([out], request.force, inputs=read)
    devices = runtime()
    records = read_records(sequences, fasta, bed)
    loaded = load_checkpoint(request.checkpoint, device="cpu")
    layer, pool = request.layer, request.pool
    head = task_head(loaded.run_config)
    if head is not None:  # the layer and pooling the fine-tuned head reads (ckpt or export)
        layer = head.get("layer") if layer is None else layer
        pool = head.get("pool", EmbedOptions.pool) if pool is None else pool
    pool = EmbedOptions.pool if pool is None else pool
    options = EmbedOptions(layer, pool, request.strands, request.max_length, request.batch_size)  # type: ignore[arg-type]
    options.validate(loaded.model.n_layers)
    length = request.max_length
    length = length if length is not None else default_max_length(dict(loaded.run_config))
    inputs = [sequences] if sequences else [fasta, bed]
    work = embed_work(out, request.checkpoint, inputs, options, length, len(records))
    fabric = devices.fabric()

    def write(vectors: list) -> bool:
        write_embeddings(out, records, vectors, pool, then=work.then)
        return True

    with (
        rank_zero_lock(fabric, out),  # the writing process holds --out for the whole run
        stops_with_resume_hint("embed", work.dir),
    ):
        wrote = embed_resumable(
            loaded.model,
            records,
            options,
            length,
            work,
            write,
            resume=request.resume,
            force=request.force,
            fabric=fabric,
        )
    return None if wrote is None else EmbedResult(len(records), options, length)
