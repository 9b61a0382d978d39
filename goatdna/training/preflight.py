"""What `train` checks before it touches the run directory, and how it reports a stop.

Devices and accelerator are checked first, so ``--accelerator gpu`` on a machine without one, or
``--devices abc``, is one line and leaves the run directory as it was (the corrected command then
runs without ``--force``). A Ctrl-C or SIGTERM ends in one line that says which step the last
checkpoint holds and how to continue. This module imports no Lightning.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from goatdna.atomic import check_output_dir, disk_full_error, is_disk_full
from goatdna.errors import GoatDNAError, Interrupted
from goatdna.training.config import RunConfig

if TYPE_CHECKING:
    from goatdna.runtime import Runtime

LARGE_ON_CPU_PARAMS = 100_000_000
"""Above this many parameters a CPU run gets a loud warning (the 125M configs are for GPUs)."""


class TrainingInterrupted(BaseException):
    """Raised at an optimizer-step boundary after SIGINT/SIGTERM, once last.ckpt holds ``step``
    (``step`` None: a second signal stopped the step in progress at once).

    A BaseException, like KeyboardInterrupt, so nothing on the way up mistakes it for an error.
    """

    def __init__(self, step: int | None, signum: int) -> None:
        super().__init__(step, signum)
        self.step = step
        self.signum = signum


def check_before_training(config: RunConfig, run_dir: Path, *, warn: bool = True) -> Runtime:
    """Accelerator, devices and the run directory must be usable here; warn when a >100M model
    would train on a CPU. Returns the run's one `Runtime`: ``trainer.devices`` is parsed here,
    once, and the run reads the parsed value from it (world size, Fabric)."""
    import torch

    from goatdna.runtime import Runtime, resolve_precision, runs_on_cuda

    if warn:  # global rank 0: the one that writes the run directory
        check_output_dir(run_dir, "--out")
    trainer = config.trainer
    precision = resolve_precision(trainer.precision, trainer.accelerator)
    runtime = Runtime.from_options(
        trainer.accelerator, trainer.devices, trainer.num_nodes, precision
    )
    devices = runtime.devices
    on_gpu = runs_on_cuda(trainer.accelerator)
    if on_gpu and isinstance(devices, int) and devices > torch.cuda.device_count():
        raise GoatDNAError(
            f"--devices {devices}: only {torch.cuda.device_count()} GPU(s) are visible here"
        )
    if on_gpu or not warn:
        return runtime
    from goatdna.model import DNADecoder

    with torch.device("meta"):  # shapes only
        params = DNADecoder(config.model).num_params()
    if params > LARGE_ON_CPU_PARAMS:
        print(
            f"warning: training a {params / 1e6:.0f}M-parameter model on the CPU: expect days per "
            "thousand steps; use a GPU, or a small config such as configs/goat-tiny.yaml",
            file=sys.stderr,
        )
    return runtime


def interrupted_message(stop: BaseException, run_dir: Path, resume_command: str) -> Interrupted:
    """One line: what stopped the run, which step last.ckpt holds, the command to continue."""
    from goatdna.training.checkpoints import training_checkpoint_step
    from goatdna.training.run import RunDir

    signum = stop.signum if isinstance(stop, TrainingInterrupted) else signal.SIGINT
    name = signal.Signals(signum).name
    run = RunDir(run_dir)
    step = training_checkpoint_step(run.last_ckpt) if run.last_ckpt.is_file() else None
    if step is None:
        rerun = (
            "rerun the command with --force (the run directory holds this run's config.yaml)"
            if run.config_yaml.is_file()
            else "nothing was written; rerun the command"
        )
        return Interrupted(f"{name} before the first checkpoint: {rerun}", signum)
    how = (
        "stopped after writing it"
        if isinstance(stop, TrainingInterrupted) and stop.step == step
        else "the step in progress was lost"
    )
    return Interrupted(
        f"{name}: {run.last_ckpt} holds step {step} ({how}); continue with: {resume_command}",
        signum,
    )


@contextlib.contextmanager
def reported_stops(run_dir: Path, resume_command: str) -> Iterator[None]:
    """A Ctrl-C/SIGTERM (`Interrupted`, exit 128 + signal) or a full disk met anywhere in the
    block (TensorBoard, metrics) become one line that says how to continue."""
    try:
        yield
    except (TrainingInterrupted, KeyboardInterrupt) as stop:
        raise interrupted_message(stop, run_dir, resume_command) from None
    except OSError as err:
        if not is_disk_full(err):
            raise
        from goatdna.training.run import RESUME_HINT

        raise disk_full_error(err.filename or run_dir, None, RESUME_HINT) from None
