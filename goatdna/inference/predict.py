"""`predict`: a fine-tuned classifier/regressor applied to a table of sequences.

The output holds every input column, unchanged and in input order, then ``prob_<class>`` per
class and ``pred`` (the most probable class) for classification, or ``pred`` alone for
regression. Inputs are checked completely before anything is computed, and the output is written
to a temporary name and renamed, so a failed run leaves nothing behind. On several devices (a
launched `lightning_fabric.Fabric`) each rank predicts its contiguous block of rows
(`runtime.rank_block`) in a plain loop and the blocks are gathered back in input order
(`runtime.gather_blocks`); global rank 0 writes the output.
"""

from __future__ import annotations

import csv
import gzip
import io
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from goatdna.atomic import atomic_path, atomic_write_bytes
from goatdna.errors import GoatDNAError
from goatdna.formats import TABLE_SUFFIXES, OutputFormat, output_format
from goatdna.inference.embed_run import UNIT_GROUPS
from goatdna.inference.loop import (
    Arrays,
    FinishedUnits,
    model_on_device,
    rank_zero_lock,
    rank_zero_progress,
    run_units,
)
from goatdna.io.tables import SequenceTable, encode_sequences, read_table, typed_cells
from goatdna.runtime import (
    gather_blocks,
    is_first_process,
    rank_block,
    single_process_fabric,
)
from goatdna.workdir import (
    JSONValue,
    WorkDir,
    claim_output,
    input_stamp,
    work_dir_for,
)

if TYPE_CHECKING:  # torch is imported where the model runs, not when this module loads
    from lightning_fabric import Fabric

    from goatdna.checkpoint import LoadedTaskModel


def predict_tokens(
    loaded: LoadedTaskModel,
    tokens: list[np.ndarray],
    *,
    rc_average: bool | None = None,
    batch_size: int = 64,
    fabric: Fabric | None = None,
    progress: bool = False,
) -> np.ndarray:
    """(N, K) class probabilities, or (N, 1) values in label units, for token arrays in order.

    ``rc_average`` None: as the model was trained. ``fabric``: a launched Fabric
    (`goatdna.runtime.Runtime.fabric`); None runs one CPU process. Every rank gets every row back.
    """
    import torch

    from goatdna.model.classifier import pad_sequences

    fabric = fabric or single_process_fabric()
    task_config = loaded.classifier.task_config
    tokens = [t[: task_config.max_length] for t in tokens]
    classifier = model_on_device(fabric, loaded.classifier)
    block = rank_block(len(tokens), fabric.global_rank, fabric.world_size)
    rows: list[torch.Tensor] = []
    with (
        rank_zero_progress(fabric, len(block), "predict", "rows", progress) as advance,
        torch.inference_mode(),
        fabric.autocast(),
    ):
        for start in range(block.start, block.stop, batch_size):
            stop = min(start + batch_size, block.stop)
            ids, lengths = fabric.to_device(pad_sequences(tokens[start:stop]))
            rows.append(classifier.predict(ids, lengths, rc_average))
            advance(stop - start)
    local = torch.cat(rows) if rows else torch.zeros(0, task_config.n_outputs, device=fabric.device)
    return loaded.classifier.label_units(gather_blocks(fabric, local, len(tokens))).numpy()


def output_columns(loaded: LoadedTaskModel) -> list[str]:
    if loaded.task == "classification":
        return [f"prob_{name}" for name in loaded.classes] + ["pred"]
    return ["pred"]


def predict_file(
    checkpoint: str | Path,
    sequences: str | Path,
    out: str | Path,
    *,
    sequence_column: str = "sequence",
    fasta: str | Path | None = None,
    rc_average: bool | None = None,
    batch_size: int = 64,
    fabric: Fabric | None = None,
    progress: bool = False,
    resume: bool = False,
    force: bool = False,
) -> int:
    """Predict every row of ``sequences`` into ``out``; returns rows. The suffix of ``out``
    picks the format (`goatdna.formats.TABLE_SUFFIXES`: .tsv, .csv, .parquet, .tsv.gz, .csv.gz),
    checked before anything else.

    Global rank 0 writes ``out``; ``fabric`` as in `predict_tokens`. Rows are predicted in
    units of ``UNIT_GROUPS`` groups of ``batch_size`` rows, each saved when finished in a work
    folder beside ``out`` (`goatdna.workdir.WorkDir`, as `goatdna embed` does), so ``resume``
    continues an interrupted run with the same inputs, and ``force`` starts its work over.
    Every group is predicted exactly as an uninterrupted run predicts it: the same bytes.
    """
    from goatdna.checkpoint import load_task_model

    out = Path(out)
    fmt = output_format(out, TABLE_SUFFIXES)
    loaded = load_task_model(checkpoint)
    table = read_table(sequences, fasta)
    tokens = encode_sequences(table, sequence_column, "--sequence-column")
    _warn_long(tokens, loaded.classifier.task_config.max_length, sequences)
    added = output_columns(loaded)
    clash = [c for c in added if c in table.columns]
    if clash:
        raise GoatDNAError(
            f"{sequences}: already has a column {clash[0]!r}, which the predictions would "
            "overwrite; rename it"
        )
    if not out.parent.is_dir():
        raise GoatDNAError(f"{out}: its folder {out.parent} does not exist")
    claim_output([out], force, inputs=[sequences, fasta, checkpoint])
    fabric = fabric or single_process_fabric()
    stamps = [input_stamp(p).as_json() for p in (sequences, fasta) if p is not None]
    state: dict[str, JSONValue] = {
        "checkpoint": input_stamp(checkpoint).as_json(),
        "inputs": list(stamps),
        "options": {"sequence_column": sequence_column, "rc_average": rc_average,
                    "batch_size": batch_size},
        "rows": len(tokens),
        "unit_groups": UNIT_GROUPS,
    }  # fmt: skip
    work = WorkDir(work_dir_for(out), "predict", state, lambda i: f"unit-{i:06d}.npz")
    size = batch_size * UNIT_GROUPS
    n_units = -(-len(tokens) // size)

    def compute(units: list[int], _advance: Callable[[int], None]) -> Iterator[tuple[int, Arrays]]:
        for unit in units:  # every rank takes part in each unit (predict_tokens shards its rows)
            part = tokens[unit * size : (unit + 1) * size]
            got = predict_tokens(
                loaded, part, rc_average=rc_average, batch_size=batch_size, fabric=fabric,
                progress=progress,
            )  # fmt: skip
            yield unit, [got]

    def write(done: FinishedUnits) -> None:
        preds = np.concatenate(
            [done.load(u)[0] for u in range(n_units)]
            or [np.zeros((0, loaded.classifier.task_config.n_outputs), np.float32)]
        )
        _write_predictions(out, fmt, table, added, loaded, preds)

    with rank_zero_lock(fabric, out):  # the writing process holds --out for the whole run
        run_units(
            fabric, work, n_units, compute, write, resume=resume, force=force,
            message=print if progress else _quiet, split=False, crash="predict.unit_saved",
        )  # fmt: skip
    return len(tokens)


def _quiet(_text: str) -> None:
    return None


def _warn_long(tokens: list[np.ndarray], max_length: int, sequences: str | Path) -> None:
    """Say how many rows are longer than the model's length cap: each is predicted from its
    first ``max_length`` bases, as fine-tuning trained on them (not chunked: a model trained
    on prefixes scores prefixes), so a user learns the tail was not seen."""
    cut = sum(1 for t in tokens if t.size > max_length)
    if cut and is_first_process():
        print(
            f"warning: {cut} of {len(tokens)} sequences in {sequences} are longer than the "
            f"model's max_length ({max_length:,} bases, as fine-tuned); each is predicted from "
            f"its first {max_length:,} bases",
            file=sys.stderr,
        )


def _write_predictions(
    out: Path,
    fmt: OutputFormat,
    table: SequenceTable,
    added: list[str],
    loaded: LoadedTaskModel,
    preds: np.ndarray,
) -> None:
    """``out`` in the format its suffix names: CSV/TSV text (gzipped for .gz; the carried cells
    as the input wrote them, numbers as %.8g) or Parquet (typed: the input's column types, see
    `SequenceTable.typed_frame`, float64 probabilities and ``pred`` typed like the labels)."""
    if fmt.kind == "parquet":
        frame = table.typed_frame()
        for k, name in enumerate(added):
            frame[name] = _prediction_column(loaded, preds, k)
        with atomic_path(out) as tmp:
            frame.to_parquet(tmp, index=False)
        return
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter="\t" if fmt.kind == "tsv" else ",", lineterminator="\n")
    names = list(table.columns)
    writer.writerow(names + added)
    carried = [table.columns[name] for name in names]
    for i in range(len(preds)):
        cells = [col[i] for col in carried]
        if loaded.task == "classification":
            cells += [f"{p:.8g}" for p in preds[i]] + [loaded.classes[int(preds[i].argmax())]]
        else:
            cells.append(f"{preds[i, 0]:.8g}")
        writer.writerow(cells)
    data = buf.getvalue().encode("utf-8")
    if fmt.compression == "gzip":  # mtime 0 and no name: the same rows give the same bytes
        data = gzip.compress(data, mtime=0)
    atomic_write_bytes(out, data)


def _prediction_column(loaded: LoadedTaskModel, preds: np.ndarray, k: int) -> np.ndarray:
    """Column ``k`` of `output_columns` for Parquet: a probability or value (float64), or the
    predicted class (``pred``), an integer when every class name is one (labels 0/1)."""
    if loaded.task == "regression" or k < len(loaded.classes):
        return preds[:, k].astype(np.float64)
    names = [loaded.classes[int(i)] for i in preds.argmax(axis=1)]
    if typed_cells(loaded.classes).dtype == np.int64:
        return np.array([int(name) for name in names], dtype=np.int64)
    return np.array(names, dtype=object)
