"""Train-then-score, the step several benchmarks share: one tiny run trained with `train` for its
configured steps, then scored on the test split of the same shards at multiples of its training
length (`goatdna.analysis.evaluate.evaluate_model`).

Imported by ``gap_sweep.py`` and ``ablation_study.py`` (run as ``python benchmarks/NAME.py``, so
this folder is on ``sys.path``); each keeps its own results JSON and builds it from `TrainedRun`
(`TrainedRun.timings` is the part both layouts hold, in the same place).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from goatdna.analysis.evaluate import ContextResult, evaluate_model
from goatdna.checkpoint import load_checkpoint
from goatdna.data_prep import ShardedGenome
from goatdna.model import DNADecoder
from goatdna.training.config import RunConfig
from goatdna.training.trainer import train


@dataclass(frozen=True)
class TrainedRun:
    """A trained run's last checkpoint as a model, its summary, and its test scores."""

    model: DNADecoder
    summary: dict[str, Any]
    train_seconds: float
    eval_seconds: float
    scores: list[ContextResult]

    def timings(self) -> dict[str, Any]:
        """The results JSON's ``parameters``, ``train_seconds``, ``eval_seconds``,
        ``train_loss`` and ``val_loss``, in that order."""
        return {
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "train_seconds": round(self.train_seconds, 1),
            "eval_seconds": round(self.eval_seconds, 1),
            "train_loss": self.summary.get("train_loss"),
            "val_loss": self.summary.get("val_loss"),
        }


def train_and_score(
    config: RunConfig,
    shards: Path,
    run_dir: Path,
    key: str,
    train_length: int,
    multiples: Sequence[int],
    eval_tokens: int | None,
) -> TrainedRun:
    """Train ``config`` on ``shards`` into ``run_dir`` (from scratch: ``force``), load its last
    checkpoint and score the test split at ``train_length`` x each of ``multiples`` (at most
    ``eval_tokens`` bases each; None: all)."""
    print(f"[{time.strftime('%H:%M:%S')}] training {key} ...", flush=True)
    start = time.perf_counter()
    summary = train(config, shards, run_dir, force=True)
    train_seconds = time.perf_counter() - start
    model = load_checkpoint(run_dir / "checkpoints" / "last.ckpt", "cpu").model
    start = time.perf_counter()
    scores = evaluate_model(
        model,
        ShardedGenome(shards),
        "test",
        [train_length * m for m in multiples],
        train_length,
        max_tokens=eval_tokens,
    )
    return TrainedRun(model, summary, train_seconds, time.perf_counter() - start, scores)
