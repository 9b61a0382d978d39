"""The training loop of `goatdna train`, `goatdna finetune` and its probe sweep, on Fabric.

Read `fit` from top to bottom: it is the whole loop, in the style of nanoGPT's ``train.py``.
Fabric owns devices, precision, the DDP/FSDP wrapping, collectives and checkpoint I/O
(`goatdna.checkpoint` owns the checkpoint's layout); a `Task` (pretraining in
`training.trainer`, fine-tuning in `training.finetune`, a probe sweep's head in
`training.probe`) says what one step trains on, how it is validated and when. Each optimizer step does, in this order: the micro-batches (backward, the
non-finite guard, clipping, AdamW, the LR schedule), a metrics row, validation, best.ckpt,
last.ckpt, and the stop after a SIGINT/SIGTERM. A checkpoint written at step K therefore already
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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import torch
from torch import Tensor, nn

from goatdna.atomic import DiskFullError, atomic_write_text, disk_full_error, is_disk_full
from goatdna.errors import GoatDNAError
from goatdna.faults import crash_point
from goatdna.locking import folder_lock
from goatdna.runtime import on_rank_zero
from goatdna.training.checkpoints import (
    TrainState,
    load_training_checkpoint,
    save_training_checkpoint,
    training_checkpoint_bytes,
)
from goatdna.training.preflight import TrainingInterrupted
from goatdna.training.run import RESUME_HINT, RunDir, StartPlan

if TYPE_CHECKING:
    from lightning_fabric import Fabric
    from lightning_fabric.wrappers import _FabricModule, _FabricOptimizer

    from goatdna.training.throughput import ThroughputMonitor

BatchT = TypeVar("BatchT")
Row = dict[str, float]
"""A metrics.csv row's numbers by column."""


class NonFiniteLossError(GoatDNAError):
    """The training loss (or the weights) became NaN or infinite; the step was not applied."""


@dataclass(frozen=True)
class Due:
    """What an optimizer step ends with besides the update (a `Task`'s schedule)."""

    log: bool
    validate: bool
    checkpoint: bool


@dataclass(frozen=True)
class LoopSpec:
    """The loop's settings that differ between pretraining and fine-tuning."""

    total_steps: int
    columns: tuple[str, ...]  # metrics.csv's columns
    selection: str  # the validation number that picks best.ckpt ("loss" for pretraining)
    higher_is_better: bool
    grad_clip: float  # 0: measure the norm, never clip
    non_finite_hint: str  # what to change when the loss becomes NaN/inf
    hyper_parameters: dict[str, object]  # what load_checkpoint reads (the resolved config)
    progress_label: str
    progress_bar: bool
    shown: tuple[str, ...]  # row numbers shown next to the progress bar
    check_grads: bool = True  # False under fp16: the loss scaler handles overflowing gradients
    mean_train_loss: bool = False  # log the mean loss since the last row (else the row's step)
    patience: int | None = None  # stop after this many validations without a new best


class Task(Protocol, Generic[BatchT]):
    """What the loop trains: its batches, loss, validation and schedule."""

    spec: LoopSpec

    def steps(self, start: int) -> Iterator[Sequence[BatchT]]:
        """The micro-batches of every optimizer step after ``start``, step by step."""
        ...

    def loss(self, batch: BatchT) -> Tensor:
        """The mean loss of one micro-batch (through the Fabric-wrapped module)."""
        ...

    def due(self, step: int) -> Due: ...

    def validate(self) -> Row:
        """Validation numbers on every rank alike: ``"loss"`` plus the task's metrics."""
        ...

    def row(self, step: int, lrs: list[float], grad_norm: Tensor) -> Row:
        """A logged step's own numbers (learning rates, gradient norm, epoch)."""
        ...


@dataclass
class Trainable:
    """What a loop updates and checkpoints: the Fabric-wrapped module (its forward is the task's
    loss or head), the AdamW optimizer and its LR schedule."""

    module: _FabricModule
    optimizer: _FabricOptimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler

    @classmethod
    def setup(
        cls,
        fabric: Fabric,
        module: nn.Module,
        optimizer_of: Callable[
            [], tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]
        ],
    ) -> Trainable:
        """Wrap ``module`` for Fabric's devices, precision and strategy, then build its optimizer
        and schedule (``optimizer_of``: after the wrapping, as FSDP needs) and wrap that."""
        wrapped_module = fabric.setup_module(module)
        optimizer, scheduler = optimizer_of()
        wrapped = fabric.setup_optimizers(optimizer)
        assert not isinstance(wrapped, tuple)
        return cls(wrapped_module, wrapped, scheduler)


@dataclass(frozen=True)
class Finished:
    """What `fit` hands back: the final bookkeeping and the run's wall seconds (all sessions)."""

    state: TrainState
    elapsed: float


def fit(  # noqa: C901, PLR0915 (the training loop read top to bottom, as nanoGPT's train.py)
    fabric: Fabric,
    task: Task[BatchT],
    run: RunDir | None,
    trainable: Trainable,
    checkpoint: Path | None,
    started: float,
    throughput: ThroughputMonitor | None = None,
) -> Finished:
    """Optimizer steps from ``checkpoint``'s step (or 0) to ``task.spec.total_steps``.

    ``started``: `time.perf_counter` when this session began. ``throughput`` (pretraining)
    times the steps, leaving validation and checkpoint writes out. ``run`` None: a fit that
    keeps nothing on disk (the probe sweep's heads, `probe.fit_head`): no metrics.csv, no
    checkpoints, and no stop after the step on a Ctrl-C (it interrupts at once, as any work
    outside a run's steps does); the steps, validation and the best step are the same.
    """
    spec = task.spec
    state = TrainState()
    saved = {"state_dict": trainable.module, "optimizer": trainable.optimizer,
             "scheduler": trainable.scheduler, "loop": state}  # fmt: skip
    start = load_training_checkpoint(fabric, checkpoint, saved) if checkpoint else 0
    clock = Clock(state.elapsed_seconds, started)
    metrics = MetricsCSV(run.metrics_csv, spec.columns) if run is not None else None
    if fabric.is_global_zero and metrics is not None:
        metrics.start(resume_step=start or None)
    checkpoints = (Checkpoints(fabric, run, saved, spec, clock, last_saved=start or -1)
                   if run is not None else None)  # fmt: skip
    progress = StepProgress(spec.progress_bar and fabric.is_global_zero, spec.total_steps, start,
                            spec.progress_label)  # fmt: skip
    paused = throughput.paused if throughput is not None else contextlib.nullcontext
    loss_sum, loss_count = 0.0, 0  # since the last row (spec.mean_train_loss)
    if throughput is not None:
        throughput.start(start)

    signals = SignalCatcher() if run is not None else None
    with signals or contextlib.nullcontext(), contextlib.closing(progress):
        batches = task.steps(start)  # endless: the range below ends the run
        for step in range(start + 1, spec.total_steps + 1):
            micro_batches = next(batches)
            # the update: forward/backward, non-finite guard, clipping, AdamW, LR schedule
            loss, grad_norm, lrs = optimizer_step(fabric, trainable, task, micro_batches, step,
                                                  checkpoints)  # fmt: skip
            if throughput is not None:
                throughput.step_done(step, fabric.device)
            if spec.mean_train_loss:
                loss_sum, loss_count = loss_sum + float(loss), loss_count + 1
            due, final = task.due(step), step == spec.total_steps
            row: Row = {}

            # the metrics row: numbers reduced over ranks (one sync per logged step)
            if due.log:
                logged = torch.tensor(loss_sum / loss_count, device=fabric.device) \
                    if spec.mean_train_loss else loss  # fmt: skip
                state.last_train_loss = float(all_reduce(fabric, logged, "mean"))
                loss_sum, loss_count = 0.0, 0
                row.update(train_loss=state.last_train_loss, **task.row(step, lrs, grad_norm))
                if throughput is not None:
                    row["tokens_per_s"] = throughput.take_interval_rate()

            # validation and the best value so far
            improved = False
            if due.validate:
                with paused():
                    state.last_val = task.validate()
                row["val_loss"] = state.last_val["loss"]
                row.update({f"val_{k}": v for k, v in state.last_val.items() if k != "loss"})
                value = state.last_val[spec.selection]
                if better(value, state.best_value, spec.higher_is_better):
                    state.best_value, state.best_step, improved = value, step, True
                state.evals_since_best = 0 if improved else state.evals_since_best + 1
            if row:
                row["elapsed_s"] = round(clock.elapsed, 3)
                if fabric.is_global_zero and metrics is not None:
                    metrics.append(step, row)
                fabric.log_dict(row, step=step)
            progress.update(step, **{k: row[k] for k in spec.shown if k in row})

            # checkpoints, then the stop a SIGINT/SIGTERM asked for (every rank at this step)
            if run is None or checkpoints is None or signals is None:  # a fit that keeps nothing
                continue
            with paused():
                if improved:
                    checkpoints.save(run.best_ckpt, step)
                if due.checkpoint:
                    checkpoints.save(run.last_ckpt, step)
                if not final and any_rank(fabric, signals.signum is not None):
                    if checkpoints.last_saved != step:
                        checkpoints.save(run.last_ckpt, step)
                    raise TrainingInterrupted(step, signals.signum or signal.SIGTERM)
                # early stopping: validation numbers are reduced over ranks, so all stop alike
                if not final and spec.patience and state.evals_since_best >= spec.patience:
                    state.stopped_step = step
                    checkpoints.save(run.last_ckpt, step)
                    break
    return Finished(state, clock.elapsed)


def better(value: float, best: float, higher_is_better: bool) -> bool:
    """The selection rule of best.ckpt and of the probe sweep's pair: a NaN never wins, and
    anything beats NaN (no value yet); a tie keeps the earlier."""
    if math.isnan(value):
        return False
    if math.isnan(best):
        return True
    return value > best if higher_is_better else value < best


# -------------------------------------------------------------------------- one optimizer step
def optimizer_step(
    fabric: Fabric,
    trainable: Trainable,
    task: Task[BatchT],
    micro_batches: Iterable[BatchT],
    step: int,
    checkpoints: Checkpoints | None,
) -> tuple[Tensor, Tensor, list[float]]:
    """Update ``step`` (1-based): backward over the micro-batches, then one AdamW update and one
    LR-schedule step; returns the step's mean loss, its pre-clipping global gradient norm
    (FSDP-aware: Fabric clips through the root module) and the learning rates the update used.

    Gradients are synchronised only on the last micro-batch (`no_backward_sync`). A step
    whose loss or gradients are not finite on any rank is refused before it touches the
    weights (``spec.check_grads=False`` under fp16: an overflowing gradient is the loss
    scaler's business there; it skips that step and lowers the scale).
    """
    spec, module, optimizer = task.spec, trainable.module, trainable.optimizer
    batches = list(micro_batches)
    loss_sum: Tensor | None = None
    for i, batch in enumerate(batches):
        with fabric.no_backward_sync(module, enabled=i < len(batches) - 1):
            loss = task.loss(batch)
            fabric.backward(loss / len(batches))
        loss_sum = loss.detach() if loss_sum is None else loss_sum + loss.detach()
    assert loss_sum is not None, "an optimizer step without micro-batches"
    step_loss = loss_sum / len(batches)
    # max_norm=inf measures without clipping (the scale factor is then exactly 1)
    norm = fabric.clip_gradients(
        module, optimizer, max_norm=spec.grad_clip or math.inf, error_if_nonfinite=False
    )
    assert isinstance(norm, Tensor)
    finite = bool(torch.isfinite(step_loss)) and (not spec.check_grads or bool(norm.isfinite()))
    if any_rank(fabric, not finite):
        what = (
            f"training loss became {float(step_loss)}"
            if not torch.isfinite(step_loss)
            else "gradients became non-finite"
        )
        kept = (f"last good checkpoint: {checkpoints.run.last_ckpt}"
                if checkpoints is not None and checkpoints.last_saved > 0
                else "no checkpoint had been written yet")  # fmt: skip
        raise NonFiniteLossError(
            f"{what} at step {step}; stopped before applying it. {spec.non_finite_hint}, then "
            f"--resume or start over ({kept})"
        )
    lrs = [float(group["lr"]) for group in optimizer.param_groups]
    optimizer.step()
    trainable.scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return step_loss, norm.detach(), lrs


def any_rank(fabric: Fabric, flag: bool) -> bool:
    """True on every rank when ``flag`` is true on any rank."""
    if fabric.world_size == 1:
        return flag
    return bool(all_reduce(fabric, torch.tensor(float(flag), device=fabric.device), "sum") > 0)


def all_reduce(fabric: Fabric, tensor: Tensor, op: str) -> Tensor:
    """``fabric.all_reduce`` of one tensor (``op``: ``"sum"`` or ``"mean"``), typed as one."""
    out = fabric.all_reduce(tensor, reduce_op=op)
    assert isinstance(out, Tensor)
    return out


# -------------------------------------------------------------------------- checkpoints
class Clock:
    """Wall seconds of this run over all its sessions (``earlier``: the checkpoint's)."""

    def __init__(self, earlier: float, since: float) -> None:
        self._earlier, self._since = earlier, since

    @property
    def elapsed(self) -> float:
        return self._earlier + (time.perf_counter() - self._since)


class Checkpoints:
    """best.ckpt / last.ckpt of one run (`goatdna.training.checkpoints.save_training_checkpoint`), and
    the step last.ckpt holds (``last_saved``; -1: none written by this run yet)."""

    def __init__(
        self,
        fabric: Fabric,
        run: RunDir,
        saved: dict[str, object],
        spec: LoopSpec,
        clock: Clock,
        last_saved: int,
    ) -> None:
        self.fabric, self.run, self.saved, self.spec, self.clock = fabric, run, saved, spec, clock
        self.last_saved = last_saved

    def save(self, path: Path, step: int) -> None:
        """Every rank takes part; non-finite weights are never written (the previous checkpoint
        stays the last good one); a full disk is one line that says what was kept."""
        module, state = self.saved["state_dict"], self.saved["loop"]
        assert isinstance(module, nn.Module) and isinstance(state, TrainState)
        params = list(module.parameters())
        if any_rank(self.fabric, not all(bool(torch.isfinite(p).all()) for p in params)):
            raise NonFiniteLossError(
                f"weights became non-finite at step {step}; not checkpointed. "
                f"{self.spec.non_finite_hint}, then --resume or start over"
            )
        state.elapsed_seconds = self.clock.elapsed
        try:
            save_training_checkpoint(self.fabric, path, step, self.saved,
                                     self.spec.hyper_parameters)  # fmt: skip
        except DiskFullError:
            kept = (f"{self.run.last_ckpt} keeps step {self.last_saved}" if self.last_saved > 0
                    else "no checkpoint was written yet")  # fmt: skip
            needed = training_checkpoint_bytes(params)
            raise disk_full_error(path, needed, f"{RESUME_HINT}; {kept}") from None
        self.fabric.barrier()
        if path == self.run.last_ckpt:
            self.last_saved = step
            crash_point("train.checkpoint_saved", step)


# -------------------------------------------------------------------------- the run directory
@contextlib.contextmanager
def claimed_run_dir(
    fabric: Fabric,
    run: RunDir,
    resolved: dict[str, object],
    plan: StartPlan,
    locked: bool = False,
) -> Iterator[None]:
    """Once the process group is up: global rank 0 (Fabric's rank, right for torchrun, SLURM and
    its own launcher alike) takes the run directory's lock and sets it up; every rank waits at a
    barrier until it is done. Every rank has already run the same read-only `RunDir.check`, so
    all agree on the directory. A lock held by another run is broadcast, so every rank stops
    with the same one-line error instead of waiting at the barrier. The lock is held until the
    block ends. ``locked``: the caller took it already (`run_dir_lock`, before work that comes
    ahead of the set-up, such as finetune's probe sweep)."""
    created = not run.root.exists()
    with contextlib.ExitStack() as lock:
        error = None
        if fabric.is_global_zero:
            try:
                if not locked:
                    lock.enter_context(folder_lock(run.root, "--out"))
                run.start(resolved, plan)
            except GoatDNAError as err:
                if isinstance(err, DiskFullError):
                    err = _undone_fresh_start(run, plan, created, err)
                error = str(err)
        error = fabric.broadcast(error, src=0)
        if error:
            raise GoatDNAError(error)
        fabric.barrier()
        try:
            yield
        except (DiskFullError, OSError) as err:
            if isinstance(err, DiskFullError):
                full = err
            elif is_disk_full(err):  # met outside goatdna's writers (TensorBoard, metrics)
                full = disk_full_error(err.filename or run.root, None, RESUME_HINT)
            else:
                raise
            if fabric.is_global_zero:
                raise _undone_fresh_start(run, plan, created, full) from None
            raise (full if _keeps_work(run, plan) else full.then(NOTHING_KEPT)) from None


NOTHING_KEPT = "rerun the command (no checkpoint had been written, so nothing of this run was kept)"


def _keeps_work(run: RunDir, plan: StartPlan) -> bool:
    return plan.checkpoint is not None or run.last_ckpt.exists()


def _undone_fresh_start(
    run: RunDir, plan: StartPlan, created: bool, full: DiskFullError
) -> DiskFullError:
    """A fresh run the disk stopped before its first checkpoint has nothing to resume: remove
    what it wrote (`RunDir.undo_start`), so the same command runs again once space is freed,
    and say so. A resumed run, or one with a checkpoint, keeps everything (`--resume`)."""
    if _keeps_work(run, plan):
        return full
    run.undo_start(remove_root=created)
    return full.then(NOTHING_KEPT)


@contextlib.contextmanager
def run_dir_lock(fabric: Fabric, run: RunDir) -> Iterator[None]:
    """The run directory's lock on global rank 0 from now on (every rank raises the refusal
    at once), for a run with work before `claimed_run_dir` (then passed ``locked=True``)."""
    with contextlib.ExitStack() as held:

        def take() -> None:
            held.enter_context(folder_lock(run.root, "--out"))

        on_rank_zero(fabric, take)
        yield


class MetricsCSV:
    """run_dir/metrics.csv: one row per logged step; empty cells where nothing was measured."""

    def __init__(self, path: Path, columns: tuple[str, ...]) -> None:
        self.path, self.columns = path, columns

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

    def append(self, step: int, row: Row) -> None:
        """One line, flushed (a full disk here is reported by `preflight.reported_stops`; a torn
        last row is dropped by `start` on resume)."""
        cells = {**{k: repr(v) for k, v in row.items()}, "step": str(step)}
        with self.path.open("a", newline="") as fh:
            fh.write(",".join(cells.get(k, "") for k in self.columns) + "\n")


# -------------------------------------------------------------------------- signals, progress
class SignalCatcher:
    """First SIGINT/SIGTERM: remembered in ``signum``; the loop finishes the current optimizer
    step, writes last.ckpt and stops. A second one stops at once (`TrainingInterrupted` with no
    step). The previous handlers come back when the block ends."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old: dict[int, signal.Handlers | int | None | object] = {}

    def __enter__(self) -> SignalCatcher:
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[signum] = signal.signal(signum, self._on_signal)
            except ValueError:  # not the main thread: leave signals to the caller
                break
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._old.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            raise TrainingInterrupted(None, self.signum)
        self.signum = signum


class StepProgress:
    """Progress over optimizer steps on global rank 0 (counted from the resumed step, so a
    resumed run shows the whole run's steps), with the latest numbers next to it: a rich bar on
    a terminal, timed lines with the rate and time left in a log (`goatdna.progress`)."""

    def __init__(self, enabled: bool, total: int, start: int, label: str = "train") -> None:
        from goatdna.progress import ProgressLines, stderr_console

        self._progress = None
        self._lines: ProgressLines | None = None
        self._info: dict[str, str] = {}
        if not enabled:
            return
        console = stderr_console()
        if not console.is_terminal:
            self._lines = ProgressLines(label, total, "steps", console, start=start)
            return
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
            console=console,
        )
        self._task = self._progress.add_task(label, total=total, completed=start, info="")
        self._progress.start()

    def update(self, step: int, **numbers: float) -> None:
        if self._progress is None and self._lines is None:
            return
        short = {"train_loss": "loss", "val_loss": "val", "tokens_per_s": "tok/s"}
        self._info.update(
            {k: f"{short.get(k, k)} {v:,.0f}" if k == "tokens_per_s" else f"{short.get(k, k)} {v:.4g}"
             for k, v in numbers.items()}
        )  # fmt: skip
        info = "  ".join(self._info.values())
        if self._lines is not None:
            self._lines.update(step, info)
        elif self._progress is not None:
            self._progress.update(self._task, completed=step, info=info)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
        if self._lines is not None:
            self._lines.close()
