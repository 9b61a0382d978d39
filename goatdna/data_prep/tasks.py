"""A labelled task from prepared shards, so fine-tuning can be tried with no download.

`make_window_task` tiles every record of each split into non-overlapping windows (default
200 nt; windows never cross a record, hence never a split; windows holding an N are skipped) and
labels each window by

- ``repeat``: 1 when at least half of its bases are soft-masked (lowercase in the source FASTA,
  the repeat annotation), else 0;
- ``gc``: ``low`` / ``mid`` / ``high`` GC content, cut at the tertiles of the train split's
  windows (so the classes are about equally common in train).

Sequences are written in upper case: the soft-mask *is* the repeat label, so keeping the case
would hand it to any model. Each split is subsampled (fixed seed) to at most ``max_rows``, with
the classes as balanced as the windows allow. The output folder holds ``train.csv``,
``val.csv``, ``test.csv`` (columns ``id,sequence,label``; ``id`` is ``record:start-end``,
1-based inclusive source coordinates) and ``task.json`` (what was done, the class counts and the
shards' manifest sha256). A smoke test of the pipeline, not a benchmark of biology.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from goatdna.atomic import atomic_write_text
from goatdna.data_prep.shards import ShardedGenome
from goatdna.data_prep.tokens import REPEAT_FLAG, TOKEN_MASK, UPPER_DECODE, C, G, N
from goatdna.errors import GoatDNAError

TASK_SPLITS = ("train", "val", "test")


@dataclass
class WindowTaskOptions:
    label: Literal["repeat", "gc"] = "repeat"
    window: int = 200
    max_train: int = 2000
    """Rows kept in train.csv (classes balanced as far as the windows allow)."""
    max_eval: int = 500
    """Rows kept in val.csv and in test.csv each."""
    seed: int = 0


def _windows(genome: ShardedGenome, split: str, window: int) -> tuple[np.ndarray, list[str]]:
    """(tokens with flags (n, window) uint8, ids) for every N-free tiled window of a split."""
    tokens = genome.tokens(split)
    rows: list[np.ndarray] = []
    ids: list[str] = []
    for record in genome.records(split):
        count = record.length // window
        if count == 0:
            continue
        block = np.asarray(tokens[record.offset : record.offset + count * window]).reshape(
            count, window
        )
        keep = ~((block & TOKEN_MASK) == N).any(axis=1)
        rows.append(block[keep])
        for k in np.flatnonzero(keep):
            start = record.start + int(k) * window
            ids.append(f"{record.name}:{start + 1}-{start + window}")
    if not rows:
        return np.zeros((0, window), dtype=np.uint8), []
    return np.concatenate(rows), ids


def _balanced_pick(labels: np.ndarray, limit: int, rng: np.random.Generator) -> np.ndarray:
    """Indices (sorted, so files keep genome order) of at most ``limit`` rows, classes balanced."""
    classes = np.unique(labels)
    pools = [rng.permutation(np.flatnonzero(labels == c)) for c in classes]
    quota = limit // max(1, len(classes))
    taken = [pool[:quota] for pool in pools]
    spare = limit - sum(t.size for t in taken)
    rest = rng.permutation(np.concatenate([pool[quota:] for pool in pools]))[: max(0, spare)]
    return np.sort(np.concatenate([*taken, rest]))


def make_window_task(
    data_dir: str | Path, out_dir: str | Path, options: WindowTaskOptions, *, force: bool = False
) -> dict:
    """Write train/val/test CSVs and task.json into ``out_dir``; returns the task.json content."""
    if options.window < 8:
        raise GoatDNAError(f"--window {options.window}: use at least 8 nt")
    if options.max_train < 2 or options.max_eval < 2:
        raise GoatDNAError("--max-train and --max-eval must be at least 2")
    if options.seed < 0:
        raise GoatDNAError(f"--seed must be >= 0, got {options.seed}")
    genome = ShardedGenome(data_dir)
    out = Path(out_dir)
    targets = [out / f"{s}.csv" for s in TASK_SPLITS] + [out / "task.json"]
    if any(p.exists() for p in targets) and not force:
        raise GoatDNAError(f"{out} already holds a task; pass --force to overwrite it")

    windows = {}
    for split in TASK_SPLITS:
        if split not in genome.split_names():
            raise GoatDNAError(
                f"{data_dir}: split {split!r} is empty; prepare the data with val and test "
                "hold-outs (e.g. --val-fraction/--test-fraction)"
            )
        windows[split] = _windows(genome, split, options.window)
        if not windows[split][1]:
            raise GoatDNAError(
                f"{data_dir}: split {split!r} has no N-free window of {options.window} nt"
            )

    thresholds: list[float] = []
    if options.label == "gc":
        train_gc = _gc(windows["train"][0])
        thresholds = [float(q) for q in np.quantile(train_gc, [1 / 3, 2 / 3])]
        names = np.array(["low", "mid", "high"])
    rng = np.random.default_rng(options.seed)
    texts: dict[str, str] = {}
    counts: dict[str, dict[str, int]] = {}
    for split in TASK_SPLITS:
        block, ids = windows[split]
        if options.label == "repeat":
            masked = ((block & REPEAT_FLAG) != 0).mean(axis=1)
            labels = np.where(masked >= 0.5, "1", "0")
        else:
            labels = names[np.searchsorted(thresholds, _gc(block), side="right")]
        limit = options.max_train if split == "train" else options.max_eval
        pick = _balanced_pick(labels, limit, rng)
        values, freq = np.unique(labels[pick], return_counts=True)
        counts[split] = {str(v): int(c) for v, c in zip(values, freq, strict=True)}
        if split == "train" and len(values) < 2:
            raise GoatDNAError(
                f"{data_dir}: every train window has the label {values[0]!r}; try --label gc"
            )
        letters = UPPER_DECODE[block[pick] & TOKEN_MASK]  # (rows, window) ASCII, upper case
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["id", "sequence", "label"])
        for k, row in enumerate(pick):
            writer.writerow([ids[row], letters[k].tobytes().decode("ascii"), labels[row]])
        texts[split] = buf.getvalue()

    info = {
        "task": f"window-{options.label}",
        "options": asdict(options),
        "gc_thresholds": thresholds,
        "counts": counts,
        "data_dir": str(data_dir),
        "data_manifest_sha256": genome.manifest_sha256,
    }
    out.mkdir(parents=True, exist_ok=True)
    for split in TASK_SPLITS:
        atomic_write_text(out / f"{split}.csv", texts[split])
    atomic_write_text(out / "task.json", json.dumps(info, indent=2) + "\n")
    return info


def _gc(block: np.ndarray) -> np.ndarray:
    tokens = block & TOKEN_MASK
    return ((tokens == C) | (tokens == G)).mean(axis=1)
