"""What happens at each optimizer-step boundary: log, validate, checkpoint — in that order.

One callback owns the order because it matters for resuming: a checkpoint written at step K
already contains step K's validation and best-checkpoint bookkeeping, so a run killed right after
it and resumed repeats nothing and skips nothing. Lightning's own validation loop and
ModelCheckpoint are not used for that reason.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch

from goatdna.atomic import disk_full_error, is_disk_full
from goatdna.training import preflight
from goatdna.training.callbacks import ThroughputMonitor
from goatdna.training.module import NonFiniteLossError
from goatdna.training.preflight import TrainingInterrupted
from goatdna.training.run import RunDir, atomic_write_text

KILL_AFTER_CHECKPOINT_ENV = "GOATDNA_KILL_AFTER_CHECKPOINT_STEP"
"""Crash drill: SIGKILL this process right after last.ckpt of that step is on disk (tests use it)."""

METRIC_COLUMNS = (
    "step", "train_loss", "val_loss", "lr", "tokens_per_s", "grad_norm", "elapsed_s"
)  # fmt: skip


class MetricsCSV:
    """run_dir/metrics.csv: one row per logged step; empty cells where nothing was measured."""

    def __init__(self, path: Path, columns: tuple[str, ...] = METRIC_COLUMNS) -> None:
        self.path = path
        self.columns = columns  # fine-tuning writes its own metric columns

    def start(self, resume_step: int | None) -> None:
        """Fresh file, or (on resume) keep only rows up to the checkpoint's step."""
        rows: list[dict[str, str]] = []
        if resume_step is not None and self.path.is_file():
            with self.path.open(newline="") as fh:
                rows = [r for r in csv.DictReader(fh) if int(r["step"]) <= resume_step]
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=self.columns, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, "") for k in self.columns})
        atomic_write_text(self.path, buf.getvalue())

    def append(self, row: dict[str, Any]) -> None:
        cells = [_cell(row.get(k)) for k in self.columns]
        line = ",".join(cells) + "\n"
        try:
            with self.path.open("a", newline="") as fh:
                fh.write(line)
                fh.flush()
        except OSError as err:
            if is_disk_full(err):  # a torn last row is dropped by MetricsCSV.start on resume
                raise disk_full_error(self.path, len(line), _RESUME) from None
            raise


_RESUME = "rerun the same command with --resume (it continues from the last checkpoint)"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


class RunLifecycle(pl.Callback):
    """Per optimizer step: metrics row, validation, best.ckpt, last.ckpt (and the crash drill)."""

    def __init__(self, run: RunDir, throughput: ThroughputMonitor) -> None:
        self.run = run
        self.throughput = throughput
        self.metrics = MetricsCSV(run.metrics_csv)
        self.best_val_loss = math.inf
        self.best_step = -1
        self.last_val_loss = math.nan
        self.last_train_loss = math.nan
        self.last_ckpt_step = -1
        self.elapsed_before = 0.0  # wall seconds of earlier sessions of this run
        self.param_fingerprints: list[list[float]] | None = None
        self._session_start = time.perf_counter()
        self._seen_step = 0
        kill = os.environ.get(KILL_AFTER_CHECKPOINT_ENV)
        self._kill_step = int(kill) if kill else None
        self.stop_signal: int | None = None  # set by the first SIGINT/SIGTERM
        self._old_handlers: dict[int, Any] = {}

    # ---------------------------------------------------------------- state in checkpoints
    def state_dict(self) -> dict[str, Any]:
        return {
            "best_val_loss": self.best_val_loss,
            "best_step": self.best_step,
            "last_val_loss": self.last_val_loss,
            "last_train_loss": self.last_train_loss,
            "elapsed_seconds": self.elapsed_seconds,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best_val_loss = float(state["best_val_loss"])
        self.best_step = int(state["best_step"])
        self.last_val_loss = float(state["last_val_loss"])
        self.last_train_loss = float(state["last_train_loss"])
        self.elapsed_before = float(state["elapsed_seconds"])

    @property
    def elapsed_seconds(self) -> float:
        return self.elapsed_before + (time.perf_counter() - self._session_start)

    # ---------------------------------------------------------------- hooks
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._session_start = time.perf_counter()
        self._seen_step = trainer.global_step
        self.last_ckpt_step = trainer.global_step if trainer.global_step > 0 else -1
        if trainer.is_global_zero:
            self.metrics.start(resume_step=trainer.global_step if trainer.global_step else None)
        self._catch_signals()

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        step = trainer.global_step
        if step == self._seen_step:  # still accumulating micro-batches
            return
        self._seen_step = step
        cfg = pl_module.run_config.trainer
        final = step >= trainer.max_steps
        self.throughput.step_done(trainer)
        row: dict[str, Any] = {}

        if step % cfg.log_every == 0 or final:
            loss = trainer.strategy.reduce(pl_module.last_step_loss, reduce_op="mean")
            self.last_train_loss = float(loss)
            rate = self.throughput.take_interval_rate()
            row.update(
                train_loss=self.last_train_loss,
                lr=pl_module.last_lr,
                tokens_per_s=rate,
                grad_norm=self._global_grad_norm(trainer, pl_module),
            )
            pl_module.log("tok/s", rate, prog_bar=True, logger=False, on_step=True)
            pl_module.log("lr", pl_module.last_lr, prog_bar=True, logger=False, on_step=True)

        improved = False
        if step % cfg.eval_every == 0 or final:
            with self.throughput.paused():
                self.last_val_loss = self._validate(trainer, pl_module)
            row["val_loss"] = self.last_val_loss
            pl_module.log("val_loss", self.last_val_loss, prog_bar=True, logger=False)
            if self.last_val_loss < self.best_val_loss:
                self.best_val_loss, self.best_step, improved = self.last_val_loss, step, True

        if row:
            row["step"] = step
            row["elapsed_s"] = round(self.elapsed_seconds, 3)
            if trainer.is_global_zero:
                self.metrics.append(row)
            numbers = {k: float(v) for k, v in row.items() if k != "step" and v is not None}
            for logger in trainer.loggers:
                logger.log_metrics(numbers, step=step)

        with self.throughput.paused():
            if improved:
                self._save(trainer, self.run.best_ckpt)
            if step % cfg.ckpt_every == 0 or final:
                self._save(trainer, self.run.last_ckpt)
                self.last_ckpt_step = step
                if self._kill_step == step:
                    os.kill(os.getpid(), signal.SIGKILL)
            if not final and self._stop_requested(trainer):
                if self.last_ckpt_step != step:
                    self._save(trainer, self.run.last_ckpt)
                    self.last_ckpt_step = step
                raise TrainingInterrupted(step, self.stop_signal or signal.SIGTERM)

    # ---------------------------------------------------------------- Ctrl-C and SIGTERM
    def _catch_signals(self) -> None:
        """First SIGINT/SIGTERM: finish the current optimizer step, write last.ckpt, stop.

        Replaces Lightning's SIGTERM handler for the length of the fit (Lightning would stop
        after any micro-batch, possibly mid-accumulation, without a checkpoint); Lightning puts
        its own handlers back at teardown. A second signal stops at once (KeyboardInterrupt).
        """
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old_handlers[signum] = signal.signal(signum, self._on_signal)
            except ValueError:  # not the main thread: leave signals to the caller
                return

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.stop_signal is not None:
            raise KeyboardInterrupt
        self.stop_signal = preflight.last_signal = signum

    def _restore_signals(self) -> None:
        for signum, handler in self._old_handlers.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signum, handler)
        self._old_handlers.clear()

    def _stop_requested(self, trainer: pl.Trainer) -> bool:
        asked = self.stop_signal is not None
        if trainer.world_size > 1:  # every rank stops at the same step (one rank may see it)
            asked = bool(trainer.strategy.reduce_boolean_decision(asked, all=False))
        return asked

    def on_exception(self, trainer: pl.Trainer, pl_module: Any, exception: BaseException) -> None:
        self._restore_signals()

    def on_train_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self._restore_signals()
        if self.last_ckpt_step != trainer.global_step:
            self._save(trainer, self.run.last_ckpt)
            self.last_ckpt_step = trainer.global_step
        self.param_fingerprints = self._fingerprints(trainer, pl_module)

    # ---------------------------------------------------------------- helpers
    def _validate(self, trainer: pl.Trainer, pl_module: Any) -> float:
        loss_sum, count = pl_module.validation_totals(trainer.datamodule.val_loader())
        return loss_sum / count if count > 0 else math.nan

    def _save(self, trainer: pl.Trainer, path: Path) -> None:
        """Lightning checkpoint through a temporary name, renamed by rank 0 once complete.

        Weights that are not finite are never written: the previous checkpoint stays the last
        good one.
        """
        if not trainer.lightning_module.weights_are_finite():
            raise NonFiniteLossError(
                f"weights became non-finite at step {trainer.global_step}; not checkpointed. "
                "Lower optim.lr or raise optim.warmup_steps, then --resume or start over"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            trainer.save_checkpoint(
                tmp, weights_only=False
            )  # every rank takes part; rank 0 writes; ends in a barrier
            if trainer.is_global_zero:
                os.replace(tmp, path)
        except BaseException as err:  # a full disk, a second Ctrl-C: no partial file stays
            if trainer.is_global_zero:
                tmp.unlink(missing_ok=True)
            if not is_disk_full(err):
                raise
            kept = (
                f"{self.run.last_ckpt} keeps step {self.last_ckpt_step}"
                if self.last_ckpt_step > 0
                else "no checkpoint was written yet"
            )
            raise disk_full_error(path, _checkpoint_bytes(trainer), f"{_RESUME}; {kept}") from None
        trainer.strategy.barrier("goatdna-checkpoint-renamed")

    def _global_grad_norm(self, trainer: pl.Trainer, pl_module: Any) -> float:
        """Pre-clipping gradient norm: replicas (DDP) hold equal grads, FSDP ranks disjoint shards."""
        norm = pl_module.last_grad_norm.double()
        if _is_fsdp(trainer):
            return float(trainer.strategy.reduce(norm * norm, reduce_op="sum").sqrt())
        return float(trainer.strategy.reduce(norm, reduce_op="mean"))

    def _fingerprints(self, trainer: pl.Trainer, pl_module: Any) -> list[list[float]] | None:
        """(sum, sum of squares) of all weights on every rank: replicas must agree exactly."""
        if _is_fsdp(trainer):
            return None  # sharded: each rank holds different slices by design
        params = [p.detach().double() for p in pl_module.model.parameters()]
        local = torch.stack(
            [torch.stack([p.sum() for p in params]).sum(), sum((p * p).sum() for p in params)]
        )  # (2,)
        gathered = pl_module.all_gather(local)
        gathered = gathered.reshape(-1, 2)  # (world, 2)
        return gathered.cpu().tolist()


def _checkpoint_bytes(trainer: pl.Trainer) -> int:
    """About what a checkpoint takes: the weights plus AdamW's two moments per parameter."""
    params = trainer.lightning_module.parameters()
    return 3 * sum(p.numel() * p.element_size() for p in params)


def _is_fsdp(trainer: pl.Trainer) -> bool:
    return "fsdp" in type(trainer.strategy).__name__.lower()
