"""What every goatdna training loop does around its optimizer steps, on `lightning_fabric`.

Pretraining (`training.trainer`) and fine-tuning (`training.finetune`) are plain Python loops
over a launched Fabric: Fabric owns devices, precision, the DDP/FSDP wrapping, collectives and
checkpoint I/O; the pieces here own what happens at each optimizer-step boundary, in this order:
the step (micro-batches, backward, the non-finite guard, clipping, AdamW, the LR schedule), a
metrics row, validation, best.ckpt, last.ckpt. A checkpoint written at step K therefore already
holds step K's validation and best-checkpoint bookkeeping, and the data position is a pure
function of the step, so a run killed right after it and resumed repeats nothing and skips
nothing.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from goatdna.atomic import DiskFullError, atomic_path, atomic_write_text, disk_full_error
from goatdna.errors import GoatDNAError
from goatdna.faults import crash_point
from goatdna.locking import folder_lock
from goatdna.runtime import runs_on_cuda
from goatdna.training import preflight
from goatdna.training.run import RESUME_HINT, RunDir, StartPlan

METRIC_COLUMNS = (
    "step", "train_loss", "val_loss", "lr", "tokens_per_s", "grad_norm", "elapsed_s"
)  # fmt: skip


class NonFiniteLossError(GoatDNAError):
    """The training loss (or the weights) became NaN or infinite; the step was not applied."""


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
        atomic_write_text(self.path, buf.getvalue(), then=RESUME_HINT)

    def append(self, row: dict[str, Any]) -> None:
        """One line, flushed (a full disk here is reported by `preflight.reported_stops`; a torn
        last row is dropped by `start` on resume)."""
        with self.path.open("a", newline="") as fh:
            fh.write(",".join(_cell(row.get(k)) for k in self.columns) + "\n")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


# -------------------------------------------------------------------------- the run directory
@contextlib.contextmanager
def claimed_run_dir(
    fabric: Any, run: RunDir, resolved: dict[str, Any], plan: StartPlan
) -> Iterator[None]:
    """Once the process group is up: global rank 0 (Fabric's rank, right for torchrun, SLURM and
    its own launcher alike) takes the run directory's lock and sets it up; every rank waits at a
    barrier until it is done. Every rank has already run the same read-only `RunDir.check`, so
    all agree on the directory. A lock held by another run is broadcast, so every rank stops
    with the same one-line error instead of waiting at the barrier. The lock is held until the
    block ends."""
    with contextlib.ExitStack() as lock:
        error = None
        if fabric.is_global_zero:
            try:
                lock.enter_context(folder_lock(run.root, "--out"))
                run.start(resolved, plan)
            except GoatDNAError as err:
                error = str(err)
        error = fabric.broadcast(error, src=0)
        if error:
            raise GoatDNAError(error)
        fabric.barrier()
        yield


def any_rank(fabric: Any, flag: bool) -> bool:
    """True on every rank when ``flag`` is true on any rank."""
    if fabric.world_size == 1:
        return flag
    total = fabric.all_reduce(torch.tensor(float(flag), device=fabric.device), reduce_op="sum")
    return bool(total > 0)


# -------------------------------------------------------------------------- steps, checkpoints
CHECKPOINT_FORMAT = "goatdna-fabric-1"
"""``format`` of the checkpoints this loop writes (the Lightning loop's had none)."""


class RunState:
    """What a loop carries across steps and sessions: the checkpointed objects (model, optimizer,
    scheduler), its own bookkeeping ``loop`` (best and last values; wall seconds of earlier
    sessions), metrics.csv and the step of the last last.ckpt. Restored from ``checkpoint``;
    ``started``: `time.perf_counter` when this session began."""

    def __init__(
        self,
        fabric: Any,
        run: RunDir,
        objects: dict[str, Any],
        loop: dict[str, Any],
        hyper_parameters: dict[str, Any],
        checkpoint: Path | None,
        hint: str,
        started: float,
        columns: tuple[str, ...] = METRIC_COLUMNS,
    ) -> None:
        self.fabric, self.run, self.hint = fabric, run, hint
        self.hyper_parameters = hyper_parameters
        self.objects = {**objects, "loop": {**loop, "elapsed_seconds": 0.0}}
        self.start = 0
        if checkpoint is not None:
            remainder = fabric.load(checkpoint, self.objects, weights_only=True)
            self.start = int(remainder["global_step"])
        self.loop: dict[str, Any] = self.objects.pop("loop")
        self._earlier, self._since = float(self.loop["elapsed_seconds"]), started
        self.last_saved = self.start or -1
        self.metrics = MetricsCSV(run.metrics_csv, columns)
        if fabric.is_global_zero:
            self.metrics.start(resume_step=self.start or None)

    @property
    def elapsed(self) -> float:
        """Wall seconds of this run over all its sessions."""
        return self._earlier + (time.perf_counter() - self._since)

    def log(self, step: int, row: dict[str, Any]) -> None:
        """A metrics.csv row (rank 0) and the same numbers to Fabric's loggers (TensorBoard)."""
        row.update(step=step, elapsed_s=round(self.elapsed, 3))
        if self.fabric.is_global_zero:
            self.metrics.append(row)
        self.fabric.log_dict({k: float(v) for k, v in row.items() if k != "step"}, step=step)

    def end_step(
        self, step: int, *, improved: bool, checkpoint: bool, final: bool, stop: StopSignals
    ) -> None:
        """best.ckpt when validation improved, last.ckpt when due; after a SIGINT/SIGTERM,
        last.ckpt of this step and `TrainingInterrupted`."""
        if improved:
            self.save(self.run.best_ckpt, step)
        if checkpoint:
            self.save(self.run.last_ckpt, step)
        if not final and stop.requested(self.fabric):
            if self.last_saved != step:
                self.save(self.run.last_ckpt, step)
            raise preflight.TrainingInterrupted(step, stop.signum or signal.SIGTERM)

    def optimizer_step(
        self,
        model: Any,
        optimizer: Any,
        scheduler: Any,
        micro_batches: Iterable[Any],
        loss_of: Callable[[Any], Tensor],
        accumulate: int,
        grad_clip: float,
        step: int,
        check_grads: bool = True,
    ) -> tuple[Tensor, Tensor, list[float]]:
        """Update ``step`` (1-based): backward over the ``accumulate`` micro-batches, then one
        AdamW update and one LR-schedule step; returns the step's mean loss, its pre-clipping
        global gradient norm (FSDP-aware: Fabric clips through the root module) and the learning
        rates the update used.

        Gradients are synchronised only on the last micro-batch (`no_backward_sync`). A step
        whose loss or gradients are not finite on any rank is refused before it touches the
        weights. ``check_grads=False`` under fp16 (``16-mixed``): an overflowing gradient is the
        loss scaler's business there (it skips that step and lowers the scale).
        """
        fabric = self.fabric
        loss_sum: Tensor | None = None
        for i, batch in enumerate(micro_batches):
            with fabric.no_backward_sync(model, enabled=i < accumulate - 1):
                loss = loss_of(batch)
                fabric.backward(loss / accumulate)
            loss_sum = loss.detach() if loss_sum is None else loss_sum + loss.detach()
        assert loss_sum is not None
        step_loss = loss_sum / accumulate
        # max_norm=inf measures without clipping (the scale factor is then exactly 1)
        norm = fabric.clip_gradients(
            model, optimizer, max_norm=grad_clip or math.inf, error_if_nonfinite=False
        )
        finite = bool(torch.isfinite(step_loss)) and (not check_grads or bool(norm.isfinite()))
        if any_rank(fabric, not finite):
            what = (
                f"training loss became {float(step_loss)}"
                if not torch.isfinite(step_loss)
                else "gradients became non-finite"
            )
            kept = (f"last good checkpoint: {self.run.last_ckpt}" if self.last_saved > 0
                    else "no checkpoint had been written yet")  # fmt: skip
            raise NonFiniteLossError(
                f"{what} at step {step}; stopped before applying it. {self.hint}, then --resume "
                f"or start over ({kept})"
            )
        lrs = [float(group["lr"]) for group in optimizer.param_groups]
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        return step_loss, norm.detach(), lrs

    def save(self, path: Path, step: int) -> None:
        """`fabric.save` (every rank takes part; rank 0 writes a full state dict) through a
        temporary name renamed once complete (`atomic_path`). Non-finite weights are never
        written: the previous checkpoint stays the last good one."""
        fabric = self.fabric
        params = list(self.objects["state_dict"].parameters())
        if any_rank(fabric, not all(bool(torch.isfinite(p).all()) for p in params)):
            raise NonFiniteLossError(
                f"weights became non-finite at step {step}; not checkpointed. {self.hint}, then "
                "--resume or start over"
            )
        self.loop["elapsed_seconds"] = self.elapsed
        full = {**self.objects, "loop": dict(self.loop), "format": CHECKPOINT_FORMAT,
                "hyper_parameters": self.hyper_parameters, "global_step": step}  # fmt: skip
        try:
            with (
                atomic_path(path) if fabric.is_global_zero else contextlib.nullcontext(path) as tmp
            ):
                fabric.save(tmp, full)
        except DiskFullError:
            kept = (f"{self.run.last_ckpt} keeps step {self.last_saved}" if self.last_saved > 0
                    else "no checkpoint was written yet")  # fmt: skip
            needed = 3 * sum(p.numel() * p.element_size() for p in params)  # + AdamW's moments
            raise disk_full_error(path, needed, f"{RESUME_HINT}; {kept}") from None
        fabric.barrier()
        if path == self.run.last_ckpt:
            self.last_saved = step
            crash_point("train.checkpoint_saved", step)


def resolve_precision(precision: str, accelerator: str) -> str:
    """``auto``: bf16-mixed on a bf16-capable GPU, 16-mixed on older GPUs, 32-true on CPU."""
    if precision != "auto":
        return precision
    if runs_on_cuda(accelerator):
        return "bf16-mixed" if torch.cuda.is_bf16_supported() else "16-mixed"
    return "32-true"


class StopSignals:
    """First SIGINT/SIGTERM: finish the current optimizer step, write last.ckpt, stop (the loop
    asks `requested` at each step boundary). A second signal stops at once (KeyboardInterrupt).
    The previous handlers come back when the block ends."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[signum] = signal.signal(signum, self._on_signal)
            except ValueError:  # not the main thread: leave signals to the caller
                break
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._old.items():
            signal.signal(signum, handler)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt
        self.signum = preflight.last_signal = signum

    def requested(self, fabric: Any) -> bool:
        """Every rank stops at the same step (one rank may have seen the signal)."""
        return any_rank(fabric, self.signum is not None)


# -------------------------------------------------------------------------- progress
class StepProgress:
    """A rich progress bar over optimizer steps on global rank 0 (counted from the resumed step,
    so a resumed run shows the whole run's steps), with the latest numbers next to it."""

    def __init__(self, enabled: bool, total: int, start: int, label: str = "train") -> None:
        self._progress = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.table import Column

        def whole() -> Column:  # kept whole on a narrow console (the numbers give way first)
            return Column(no_wrap=True)

        self._progress = Progress(
            TextColumn("[progress.description]{task.description}", table_column=whole()),
            BarColumn(bar_width=20),
            MofNCompleteColumn(table_column=whole()),
            TimeElapsedColumn(table_column=whole()),
            TimeRemainingColumn(table_column=whole()),
            TextColumn(
                "{task.fields[info]}",
                table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis"),
            ),  # fmt: skip
            console=Console(stderr=True),
        )
        self._task = self._progress.add_task(label, total=total, completed=start, info="")
        self._progress.start()
        self._info: dict[str, str] = {}

    def update(self, step: int, **numbers: float) -> None:
        if self._progress is None:
            return
        short = {"train_loss": "loss", "val_loss": "val", "tokens_per_s": "tok/s"}
        self._info.update(
            {k: f"{short.get(k, k)} {v:,.0f}" if k == "tokens_per_s" else f"{short.get(k, k)} {v:.4g}"
             for k, v in numbers.items()}
        )  # fmt: skip
        self._progress.update(self._task, completed=step, info="  ".join(self._info.values()))

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
