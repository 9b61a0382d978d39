"""Fine-tuning data: labelled splits, per-step batches that resume exactly, cached embeddings.

The training batches are indexed by optimizer step, like pretraining's (`training.data`):
step ``s`` belongs to epoch ``s // steps_per_epoch``; each epoch is a permutation of the train
rows drawn from ``(seed, epoch)``, and which strand a row shows under ``rc_augment`` is drawn
from ``(seed, epoch)`` too. So the batches are a pure function of the step, a run resumed from
a checkpoint sees exactly the batches of an uninterrupted one, and with several devices each
rank takes its contiguous block (`runtime.rank_block`) of the step's global batch.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from goatdna.adapters import file_sha256
from goatdna.data_prep.tables import check_labels_present, class_names, encode_labels, infer_task
from goatdna.errors import GoatDNAError
from goatdna.io.tables import SequenceTable, encode_sequences, read_table
from goatdna.io.tokens import reverse_complement
from goatdna.model.classifier import pad_sequences
from goatdna.runtime import is_first_process, rank_block
from goatdna.training.finetune_config import TaskConfig

SPLITS = ("train", "val", "test")


@dataclass
class Split:
    """Token arrays (0..4, truncated to max_length) and labels of one split."""

    tokens: list[np.ndarray]
    labels: np.ndarray  # int64 class indices or float64 targets
    truncated: int = 0

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass
class TaskData:
    """The resolved task: splits, task type, classes (classification) or label scaling."""

    task: str
    classes: list[str]
    splits: dict[str, Split]
    label_mean: float = 0.0
    label_std: float = 1.0
    sha256: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    """What is suspect but not wrong (validation rows that are training rows); printed once
    the run is sure to start (`print_warnings`), so a refused command shows only its error."""

    @property
    def n_outputs(self) -> int:
        return len(self.classes) if self.task == "classification" else 1


def truncate(tokens: list[np.ndarray], max_length: int) -> tuple[list[np.ndarray], int]:
    cut = sum(1 for t in tokens if t.size > max_length)
    return [t[:max_length] for t in tokens], cut


def _labels_only(table: SequenceTable, config: TaskConfig) -> list[str]:
    return check_labels_present(table, config.label_column, "--label-column")


def _bed_labels(table: SequenceTable, config: TaskConfig) -> None:
    """BED: copy the configured label column to ``label_column`` (default ``label``)."""
    if table.path.name.lower().removesuffix(".gz").endswith(".bed"):
        names = list(table.columns)
        index = config.bed_label_column - 1
        if index >= len(names) - 1:  # the last entry is the fetched sequence
            raise GoatDNAError(
                f"{table.path}: has {len(names) - 1} columns, --bed-label-column is "
                f"{config.bed_label_column}"
            )
        table.columns[config.label_column] = table.columns[names[index]]


def load_task(config: TaskConfig, seed: int) -> TaskData:
    """Read and check every split; hold out val from train when no val file is given."""
    if not config.train:
        raise GoatDNAError("--train is required (a CSV/TSV/Parquet file with sequence,label)")
    paths = {"train": config.train, "val": config.val, "test": config.test}
    tables: dict[str, SequenceTable] = {}
    for split, path in paths.items():
        if path is not None:
            tables[split] = read_table(path, config.fasta)
            _bed_labels(tables[split], config)
    train_labels = _labels_only(tables["train"], config)
    task: str = config.task
    if task == "auto":
        task = infer_task(train_labels, tables["train"], config.label_column, _hint(config))
    classes: list[str] = []
    if task == "classification":
        classes = class_names(train_labels, tables["train"].path, config.label_column)
    splits: dict[str, Split] = {}
    for split, table in tables.items():
        tokens = encode_sequences(table, config.sequence_column, "--sequence-column")
        labels = encode_labels(table, config.label_column, "--label-column", task, classes)
        tokens, cut = truncate(tokens, config.max_length)
        splits[split] = Split(tokens, labels, cut)
    if "val" not in splits:
        train = splits["train"]
        n_val = max(1, round(config.val_fraction * len(train)))
        if len(train) - n_val < MIN_TRAIN_ROWS:
            raise GoatDNAError(_too_few(config.train, len(train), n_val))
        order = np.random.default_rng([seed, 7]).permutation(len(train))
        val_rows, train_rows = np.sort(order[:n_val]), np.sort(order[n_val:])
        splits["val"] = Split([train.tokens[i] for i in val_rows], train.labels[val_rows])
        splits["train"] = Split([train.tokens[i] for i in train_rows], train.labels[train_rows])
    elif len(splits["train"]) < MIN_TRAIN_ROWS:
        raise GoatDNAError(_too_few(config.train, len(splits["train"]), 0))
    data = TaskData(task, classes, splits)
    if task == "regression":
        data.label_mean, data.label_std = _label_scale(splits["train"].labels, tables["train"])
    data.sha256 = {split: file_sha256(path) for split, path in paths.items() if path is not None}
    data.warnings = _shared_rows(config, data)
    return data


MIN_TRAIN_ROWS = 3
"""Fewer training rows cannot fit even the head's input standardization (and a 2-row table
used to end in non-finite losses blamed on the learning rate)."""


def _too_few(path: str, rows: int, held_out: int) -> str:
    kept = f", {held_out} of them held out for validation" if held_out else ""
    return (
        f"{path}: too few rows to fine-tune on ({rows} row(s){kept}); training needs at least "
        f"{MIN_TRAIN_ROWS} (in practice hundreds)"
    )


def _hint(config: TaskConfig) -> str:
    if Path(config.train).name.lower().removesuffix(".gz").endswith(".bed"):
        return (
            f" (BED column {config.bed_label_column} is usually a region name: point "
            "--bed-label-column at the column holding the label)"
        )
    return ""


def _label_scale(y: np.ndarray, table: SequenceTable) -> tuple[float, float]:
    """Mean and standard deviation of the regression targets the head learns in units of; a
    target so large that they overflow is named (it used to surface as a non-finite loss
    blamed on the learning rate)."""
    with np.errstate(over="ignore", invalid="ignore"):
        mean, std = float(y.mean()), float(y.std())
    if not (np.isfinite(mean) and np.isfinite(std)):
        big = int(np.argmax(np.abs(y)))
        raise GoatDNAError(
            f"{table.path}: regression labels too large to standardise (the largest is "
            f"{y[big]:g}); rescale the targets (e.g. log or divide by a constant)"
        )
    return mean, std or 1.0


def _shared_rows(config: TaskConfig, data: TaskData) -> list[str]:
    """Warnings (not refusals) for validation or test rows that are training rows: their
    scores then measure recall of the training set, not generalisation."""
    messages = []
    if config.val is not None and data.sha256.get("val") == data.sha256.get("train"):
        messages.append("--val is the same data as --train: validation scores measure "
                        "memorisation, not generalisation")  # fmt: skip
    else:
        seen = {t.tobytes() for t in data.splits["train"].tokens}
        for split in ("val", "test"):
            rows = data.splits.get(split)
            if rows is None:
                continue
            shared = sum(t.tobytes() in seen for t in rows.tokens)
            if shared:
                messages.append(f"{shared} of {len(rows)} {split} rows have a sequence that is "
                                "also a training row: their scores overstate generalisation "
                                "(drop the duplicates)")  # fmt: skip
    return messages


def print_warnings(data: TaskData) -> None:
    """The task's warnings on stderr, once (not once per rank)."""
    if is_first_process():
        for message in data.warnings:
            print(f"warning: {message}", file=sys.stderr)


class StepPlan:
    """Which train rows (and strands) optimizer step ``s`` uses: a pure function of the seed."""

    def __init__(self, n_rows: int, batch_size: int, seed: int, rc_augment: bool) -> None:
        self.n_rows = n_rows
        self.batch_size = min(batch_size, n_rows)
        self.seed = seed
        self.rc_augment = rc_augment
        self.steps_per_epoch = n_rows // self.batch_size  # the remainder rotates between epochs

    def rows(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        """(row indices, flip flags) of the global batch of ``step`` (0-based)."""
        epoch, position = divmod(step, self.steps_per_epoch)
        order = np.random.default_rng([self.seed, epoch, 1]).permutation(self.n_rows)
        rows = order[position * self.batch_size : (position + 1) * self.batch_size]
        if self.rc_augment:
            flips = np.random.default_rng([self.seed, epoch, 2]).random(self.n_rows) < 0.5
            return rows, flips[rows]
        return rows, np.zeros(rows.size, dtype=bool)


class StepBatches:
    """``batches[s]``: this rank's share of step ``s``'s batch — tokens or cached features."""

    def __init__(
        self,
        split: Split,
        plan: StepPlan,
        rank: int,
        world_size: int,
        features: tuple[torch.Tensor, torch.Tensor | None] | None = None,
    ) -> None:
        self.split = split
        self.plan = plan
        self.rank = rank
        self.world_size = world_size
        self.features = features

    def __getitem__(self, step: int) -> dict[str, torch.Tensor]:
        rows, flips = self.plan.rows(step)
        mine = rank_block(rows.size, self.rank, self.world_size)
        rows, flips = rows[mine.start : mine.stop], flips[mine.start : mine.stop]
        labels = torch.from_numpy(self.split.labels[rows])
        if self.features is not None:
            forward, rc = self.features
            chosen = forward[rows]
            if flips.any():
                assert rc is not None
                chosen = torch.where(torch.from_numpy(flips)[:, None], rc[rows], chosen)
            return {"features": chosen, "labels": labels}
        seqs = [
            reverse_complement(self.split.tokens[r]) if f else self.split.tokens[r]
            for r, f in zip(rows, flips, strict=True)
        ]
        tokens, lengths = pad_sequences(seqs)
        return {"tokens": tokens, "lengths": lengths, "labels": labels}


def eval_batches(tokens: list[np.ndarray], rows: range, batch_size: int):
    """Padded batches over ``rows`` in order (rows sorted by length inside a batch is not
    needed: causal attention ignores right padding)."""
    for start in range(rows.start, rows.stop, batch_size):
        stop = min(start + batch_size, rows.stop)
        yield pad_sequences(tokens[start:stop])
