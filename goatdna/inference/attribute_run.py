"""Running `goatdna attribute`: inputs as `embed` reads them, resumable units, .npz and bigWig.

Records come from `embed_io`'s readers (a FASTA or a table with a ``sequence`` column, or BED
regions of a FASTA), the model from `goatdna.checkpoint`: a fine-tuned model only through
`load_task_model`, a language model through `load_checkpoint`. Records are explained in units
of `UNIT_SEQUENCES`, each saved when finished in a work folder beside the first ``--out``
(`goatdna.workdir.WorkDir`, as `embed` and `predict` do), so ``--resume`` continues a killed run
and writes the bytes of an uninterrupted one; with several devices each rank explains its block
of the unfinished units (`goatdna.runtime.rank_block`) and global rank 0 writes.

Outputs, by suffix (`goatdna.formats.output_format`, repeatable ``--out``):

* ``.npz``: ``attributions`` and ``hypothetical`` (N, L, 4) float32 (L the longest record;
  shorter ones zero-padded, ``lengths`` says how long each is), ``sequences`` and ``names``
  (N,), ``method``, ``target``, ``strands``, and for BED input ``chrom``/``start``/``end``/
  ``strand``. Integrated gradients add ``baseline`` (its name), ``tolerance``, and per sequence
  ``steps`` (the steps it took), ``delta`` (``f(x) - f(baseline)``) and ``completeness_gap``
  (``|sum(attributions) - delta| / |delta|``). It is written one unit at a time into the zip archive, so peak memory does not
  grow with the number of records (benchmarks/attribute_bench.py).
* ``.bw``/``.bigWig``/``.bedGraph`` (BED input only): one value per base of every region, the
  contribution of the base that is there (`observed_contribution`), in genome orientation, by
  the bigWig writer of `goatdna.io.bigwig`. A region longer than a fine-tuned
  model's ``max_length`` has values on the bases the model read only: the first ``max_length``
  of a '+' region, the *last* ``max_length`` (in genome order) of a '-' region, whose reverse
  complement is read from its 5' end.
"""

from __future__ import annotations

import io
import sys
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from goatdna.atomic import atomic_path
from goatdna.errors import GoatDNAError
from goatdna.faults import crash_point
from goatdna.formats import output_format
from goatdna.inference.attribute import (
    AttributeOptions,
    Explained,
    Target,
    attribute_tokens,
    check_lengths,
    is_complete,
    one_hot,
    work_positions,
)
from goatdna.inference.loop import (
    Arrays,
    FinishedUnits,
    load_arrays,
    model_on_device,
    rank_zero_lock,
    rank_zero_progress,
    run_units,
)
from goatdna.io.records import SequenceRecord
from goatdna.io.tokens import NUM_BASES, decode
from goatdna.runtime import is_first_process, single_process_fabric
from goatdna.workdir import JSONValue, WorkDir, claim_output, input_stamp, work_dir_for

if TYPE_CHECKING:
    from lightning_fabric import Fabric
    from torch import nn

OUTPUT_SUFFIXES = (".npz", ".bw", ".bigwig", ".bedgraph", ".bg")
UNIT_SEQUENCES = 64
"""Records per resumable unit (the work a kill can lose at most)."""


@dataclass(frozen=True)
class AttributeRequest:
    """Everything one `attribute` run needs (the CLI's options)."""

    checkpoint: Path
    outs: tuple[Path, ...]
    options: AttributeOptions
    sequences: Path | None = None
    fasta: Path | None = None
    bed: Path | None = None
    resume: bool = False
    force: bool = False
    cache_dir: Path | None = None


@dataclass
class AttributeResult:
    """What was explained and written (global rank 0)."""

    records: int
    target: str
    written: list[Path]
    resumed_units: int = 0

    def summary(self, options: AttributeOptions) -> str:
        """One line: how many sequences were explained, how, and the files written."""
        return (
            f"{self.records} sequence(s) explained ({options.method}, target {self.target}, "
            f"strands {options.strands}) -> {', '.join(map(str, self.written))}"
        )


def check_outputs(outs: Sequence[Path], bed_input: bool) -> list[str]:
    """Each ``--out``'s kind (``npz`` or a track), checked before any work: formats we write,
    then files we can write."""
    from goatdna.atomic import check_output_file

    if not outs:
        raise GoatDNAError("--out: give at least one output (.npz, or .bw/.bedGraph for --bed)")
    kinds = [output_format(out, OUTPUT_SUFFIXES).kind for out in outs]
    if "npz" not in kinds:
        raise GoatDNAError(
            "--out: name one .npz (the attributions `goatdna motifs` reads); tracks come beside it"
        )
    for out, kind in zip(outs, kinds, strict=True):
        if kind != "npz" and not bed_input:
            raise GoatDNAError(
                f"--out {out}: a track places values on the genome, which needs --fasta with "
                "--bed regions; sequences from --sequences have no coordinates"
            )
    if len({Path(p).resolve() for p in outs}) != len(outs):
        raise GoatDNAError(f"--out: the same file is named twice ({', '.join(map(str, outs))})")
    for out in outs:
        check_output_file(out, "--out")
    return kinds


def read_records(request: AttributeRequest) -> list[SequenceRecord]:
    """The records `embed` would read from the same options (`goatdna.io.records`)."""
    from goatdna.io.records import read_records as read_inputs

    return read_inputs(request.sequences, request.fasta, request.bed)


def load_target(checkpoint: Path, target: str | None) -> tuple[Target, nn.Module, int | None]:
    """The target function, the module to put on the device, and a fine-tuned length cap."""
    from goatdna.checkpoint import load_checkpoint, load_task_model, read_checkpoint
    from goatdna.inference.attribute import language_model_target, task_model_target

    file = read_checkpoint(checkpoint)  # read once: it says which model it holds
    if file.head is None:
        loaded = load_checkpoint(file, device="cpu")
        return language_model_target(loaded.model, target), loaded.model, None
    task = load_task_model(file)  # the one loader of fine-tuned models
    return (
        task_model_target(task, target),
        task.classifier,
        task.classifier.task_config.max_length,
    )


def attribute(request: AttributeRequest, fabric: Fabric | None = None, progress: bool = True
              ) -> AttributeResult | None:  # fmt: skip
    """Explain every record of the request; the result on global rank 0, else None."""
    bed_input = request.bed is not None
    kinds = check_outputs(request.outs, bed_input)
    if request.options.method != "ism":
        need_library("captum", f"--method {request.options.method}")
    records = read_records(request)
    for out in request.outs:
        if not out.parent.is_dir():
            raise GoatDNAError(f"--out {out}: folder {out.parent} does not exist")
    tracks = [out for out, kind in zip(request.outs, kinds, strict=True) if kind != "npz"]
    order = _track_order(records, request) if tracks else []
    inputs = [request.sequences, request.fasta, request.bed, request.checkpoint]
    claim_output(list(request.outs), request.force, inputs=inputs)
    target, module, max_length = load_target(request.checkpoint, request.options.target)
    tokens = _model_tokens(records, max_length, target, request)
    fabric = fabric or single_process_fabric()
    stamps = [input_stamp(p).as_json() for p in inputs[:3] if p is not None]
    state: dict[str, JSONValue] = {
        "checkpoint": input_stamp(request.checkpoint).as_json(),
        "inputs": list(stamps),
        "options": dict(asdict(request.options)),
        "records": len(records),
        "unit_sequences": UNIT_SEQUENCES,
        "unit_arrays": len(UNIT_ARRAYS),
    }
    work = WorkDir(work_dir_for(request.outs[0]), "attribute", state, lambda i: f"unit-{i:06d}.npz")
    n_units = -(-len(tokens) // UNIT_SEQUENCES)
    module = model_on_device(fabric, module)

    def compute(units: list[int], _advance: Callable[[int], None]) -> Iterator[tuple[int, Arrays]]:
        """Explain this rank's ``units``; progress counts bases, advanced after every pass (so a
        SIGTERM, raised between passes, stops the run within one pass)."""
        if progress and fabric.global_rank == 0:
            print(_estimate(tokens, request.options), file=sys.stderr)
        total = sum(tokens[i].size for u in units for i in _unit_rows(u, len(tokens)))
        with rank_zero_progress(fabric, total, "attribute", "bases", progress) as advance:
            for unit in units:
                rows = _unit_rows(unit, len(tokens))
                got = attribute_tokens(target, [tokens[i] for i in rows], request.options,
                                       fabric.device, advance)  # fmt: skip
                yield unit, _pack(got)

    def write(done: FinishedUnits) -> AttributeResult:
        written: list[Path] = []
        for out, kind in zip(request.outs, kinds, strict=True):
            if kind == "npz":
                write_npz(out, done.work, n_units, records, tokens, request, target.name)
            else:
                _write_track(out, done.work, n_units, records, tokens, order, request)
            written.append(out)
        _warn_incomplete(done.work, n_units, request.options)
        return AttributeResult(len(records), target.name, written, done.resumed)

    with rank_zero_lock(fabric, list(request.outs)):
        return run_units(
            fabric, work, n_units, compute, write, resume=request.resume, force=request.force,
            message=print if progress else _quiet, crash="attribute.unit_saved",
            crash_at=lambda *at: crash_point(*at),  # looked up per call: a test wraps it
            drop_unsaved=True,  # nothing to resume: the next run must not be told to --resume
        )  # fmt: skip


def _estimate(tokens: Sequence[np.ndarray], options: AttributeOptions) -> str:
    """The work a run is about to do, in one line (printed before it starts)."""
    lengths = [t.size for t in tokens]
    steps = ""
    if options.method == "integrated-gradients":
        steps = f", {options.steps} steps" + (
            " (from 64, doubling)" if options.steps == "auto" else ""
        )
    return (
        f"attribute: {len(lengths):,} sequence(s), {sum(lengths):,} bases, {options.method}"
        f"{steps}: about {work_positions(lengths, options):,} model positions"
    )


def _warn_incomplete(work: WorkDir, n_units: int, options: AttributeOptions) -> None:
    """One ``warning:`` line when integrated gradients left sequences short of completeness."""
    if options.method != "integrated-gradients":
        return
    steps, gaps, deltas = _completeness(work, n_units)
    missed = [i for i in range(gaps.size)
              if not is_complete(gaps[i], deltas[i], options.tolerance)]  # fmt: skip
    if missed:
        worst = max(missed, key=lambda i: gaps[i])
        hint = ("raise --tolerance" if options.steps == "auto"
                else "use --steps auto, or more --steps")  # fmt: skip
        print(
            f"warning: integrated gradients: {len(missed)} of {gaps.size} sequences miss "
            f"completeness by more than --tolerance {options.tolerance:g} (worst "
            f"{gaps[worst]:.1%} of f(x) - f(baseline) at {steps[worst]} steps; the .npz records "
            f"each one's completeness_gap); {hint}",
            file=sys.stderr,
        )


def _completeness(work: WorkDir, n_units: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per record, in order: steps, completeness gap and ``f(x) - f(baseline)``, read unit by
    unit (the attributions of one unit at a time in memory)."""
    parts = [load_arrays(work, unit)[3:] for unit in range(n_units)]
    steps, gaps, deltas = (np.concatenate([p[k] for p in parts] or [np.zeros(0)]) for k in range(3))
    return steps.astype(np.int64), gaps.astype(np.float64), deltas.astype(np.float64)


def _model_tokens(records: Sequence[SequenceRecord], max_length: int | None, target: Target,
                  request: AttributeRequest) -> list[np.ndarray]:  # fmt: skip
    """The tokens the model reads (a fine-tuned model's first ``max_length``), each checked to
    fit one pass before any work (`check_lengths`)."""
    tokens = [r.tokens if max_length is None else r.tokens[:max_length] for r in records]
    what = "--sequences" if request.sequences is not None else "--bed"
    check_lengths(target, [t.size for t in tokens], [r.name for r in records], request.options,
                  what)  # fmt: skip
    if max_length is not None:
        _warn_long([r.tokens for r in records], max_length)
    return tokens


def need_library(module: str, what: str) -> None:
    """One error line, before any work, when an optional library of the ``interpret`` extra
    is missing."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise GoatDNAError(
            f"{what} needs {module}, which is not installed: pip install 'goatdna[interpret]'"
        )


def _quiet(_text: str) -> None:
    return None


def _warn_long(tokens: list[np.ndarray], max_length: int) -> None:
    """As `predict`: a fine-tuned model reads the first ``max_length`` bases, so the tail of a
    longer record gets no attribution (its rows stay 0)."""
    cut = sum(1 for t in tokens if t.size > max_length)
    if cut and is_first_process():
        print(
            f"warning: {cut} of {len(tokens)} sequences are longer than the model's max_length "
            f"({max_length:,} bases, as fine-tuned); each is explained over its first "
            f"{max_length:,} bases",
            file=sys.stderr,
        )


def _unit_rows(unit: int, n: int) -> range:
    return range(unit * UNIT_SEQUENCES, min((unit + 1) * UNIT_SEQUENCES, n))


UNIT_ARRAYS = ("attributions", "hypothetical", "lengths", "steps", "gap", "delta")
"""What a saved unit holds (its records concatenated), in this order."""


def _pack(got: list[Explained]) -> list[np.ndarray]:
    """One unit's records as `UNIT_ARRAYS`: concatenated attributions and hypothetical, and per
    record its length, steps, completeness gap and ``f(x) - f(baseline)``."""
    empty = np.zeros((0, NUM_BASES), np.float32)
    return [
        np.concatenate([r.attributions for r in got] or [empty]),
        np.concatenate([r.hypothetical for r in got] or [empty]),
        np.array([r.attributions.shape[0] for r in got], dtype=np.int64),
        np.array([r.steps for r in got], dtype=np.int64),
        np.array([r.gap for r in got], dtype=np.float64),
        np.array([r.delta for r in got], dtype=np.float64),
    ]


def _unit_records(work: WorkDir, unit: int) -> list[Explained]:
    attributions, hypothetical, lengths, steps, gaps, deltas = load_arrays(work, unit)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    return [
        Explained(attributions[a:b], hypothetical[a:b], int(n), float(gap), float(delta))
        for a, b, n, gap, delta in zip(bounds[:-1], bounds[1:], steps, gaps, deltas, strict=True)
    ]


# ---------------------------------------------------------------------------------------------
# outputs


def write_npz(out: Path, work: WorkDir, n_units: int, records: Sequence[SequenceRecord],
              tokens: Sequence[np.ndarray], request: AttributeRequest, target: str) -> None:  # fmt: skip
    """The .npz (see the module docstring), streamed unit by unit into the archive."""
    lengths = np.array([t.size for t in tokens], dtype=np.int64)
    width = int(lengths.max()) if lengths.size else 0
    small: dict[str, np.ndarray] = {
        "sequences": np.array([decode(t).upper() for t in tokens], dtype=str),
        "names": np.array([r.name for r in records], dtype=str),
        "lengths": lengths,
        "method": np.array(request.options.method),
        "target": np.array(target),
        "strands": np.array(request.options.strands),
        "bases": np.array("ACGT"),
    }
    if request.options.method == "integrated-gradients":
        steps, gaps, deltas = _completeness(work, n_units)
        small["baseline"] = np.array(request.options.baseline)
        small["tolerance"] = np.array(request.options.tolerance)
        small["steps"], small["delta"], small["completeness_gap"] = steps, deltas, gaps
    if request.bed is not None:
        for key in ("chrom", "start", "end"):
            small[key] = np.array([r.columns[key] for r in records])
        small["strand"] = np.array([r.columns.get("strand", "+") for r in records], dtype=str)
    with atomic_path(out, then=work.then) as tmp, zipfile.ZipFile(tmp, "w", allowZip64=True) as zf:
        for index, key in enumerate(("attributions", "hypothetical")):
            with zf.open(_npz_entry(f"{key}.npy"), "w", force_zip64=True) as handle:
                header = {"descr": "<f4", "fortran_order": False,
                          "shape": (len(tokens), width, NUM_BASES)}  # fmt: skip
                np.lib.format.write_array_header_1_0(handle, header)
                for unit in range(n_units):
                    for pair in _unit_records(work, unit):
                        block = np.zeros((width, NUM_BASES), dtype="<f4")  # (L, 4), zero-padded
                        values = pair.hypothetical if index else pair.attributions
                        block[: values.shape[0]] = values
                        handle.write(block.tobytes())
        for key, values in small.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, values, allow_pickle=False)
            zf.writestr(_npz_entry(f"{key}.npy"), buffer.getvalue())


def _npz_entry(name: str) -> zipfile.ZipInfo:
    """A member of the .npz with numpy's own fixed time stamp (1980-01-01), not the clock's:
    the same attributions give the same bytes whenever they are written (a resumed run's
    file equals an uninterrupted one's, as `np.savez`'s would)."""
    return zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))


def observed_contribution(method: str, attributions: np.ndarray, hypothetical: np.ndarray,
                          tokens: np.ndarray) -> np.ndarray:  # fmt: skip
    """(L,) the contribution of the base that is there: for saliency and integrated gradients
    the sum over the 4 columns of ``attributions``; for ISM the centred effect of the reference
    base (minus the mean effect of changing it), NaN at N."""
    if method != "ism":
        return attributions.sum(axis=1).astype(np.float64)
    values = (hypothetical * one_hot(tokens)).sum(axis=1).astype(np.float64)
    values[tokens >= NUM_BASES] = np.nan
    return values


def _track_order(records: Sequence[SequenceRecord], request: AttributeRequest) -> list[int]:
    """Records in genome order for a track; overlapping regions (one value per base) refused."""
    sizes = _chrom_sizes(request)
    rank = {name: i for i, (name, _) in enumerate(sizes)}
    order = sorted(range(len(records)),
                   key=lambda i: (rank.get(records[i].columns["chrom"], -1), records[i].columns["start"]))  # fmt: skip
    for a, b in zip(order, order[1:], strict=False):
        ra, rb = records[a].columns, records[b].columns
        if ra["chrom"] == rb["chrom"] and rb["start"] < ra["end"]:
            raise GoatDNAError(
                f"--bed {request.bed}: regions {records[a].name} and {records[b].name} overlap; a "
                "track holds one value per base: merge them, or write the .npz alone"
            )
    return order


def _chrom_sizes(request: AttributeRequest) -> list[tuple[str, int]]:
    from goatdna.inference.reference import Reference

    assert request.fasta is not None
    cache = request.cache_dir or request.outs[0].parent / ".goatdna-cache"
    return Reference(request.fasta, cache).chrom_sizes()


def _write_track(out: Path, work: WorkDir, n_units: int, records: Sequence[SequenceRecord],
                 tokens: Sequence[np.ndarray], order: list[int], request: AttributeRequest) -> None:  # fmt: skip
    from goatdna.io.bigwig import open_track

    values: list[np.ndarray] = []
    for unit in range(n_units):
        for attributions, hypothetical, *_ in _unit_records(work, unit):
            i = len(values)
            track = observed_contribution(request.options.method, attributions, hypothetical,
                                          tokens[i])  # fmt: skip
            values.append(track[::-1] if records[i].columns.get("strand") == "-" else track)
    name = f"attribute {request.options.method} {request.options.target or ''}".strip()
    with open_track(out, _chrom_sizes(request), name) as writer:
        for i in order:
            columns = records[i].columns
            writer.add(str(columns["chrom"]), _track_start(columns, values[i].size), values[i])


def _track_start(columns: dict[str, Any], explained: int) -> int:
    """Where a region's ``explained`` values begin on the genome. A fine-tuned model reads the
    first ``max_length`` bases of the record: for a '+' region its first bases, for a '-' region
    (the reverse complement) its *last* ones in genome order, ``[end - explained, end)``."""
    start, end = int(columns["start"]), int(columns["end"])
    return end - explained if columns.get("strand") == "-" else start
