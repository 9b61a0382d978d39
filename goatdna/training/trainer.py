"""`train()`: one run from a config and a shard directory to a finished run directory.

The same function trains a tiny model on a laptop CPU and the 125M models on GPUs: devices,
strategy (single device, DDP, FSDP), precision and the number of nodes come from
``config.trainer`` and go to `lightning_fabric.Fabric` (through `goatdna.runtime.Runtime`), so
``torchrun`` and SLURM launches work as Lightning documents them. The loop itself is plain
Python (`training.loop`, which `Pretraining` below feeds). Every process
runs this function and checks the run directory (read only); global rank 0 writes it.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goatdna import __version__
from goatdna.configfile import to_dict
from goatdna.errors import GoatDNAError
from goatdna.runtime import Runtime, runs_on_cuda
from goatdna.training import preflight
from goatdna.training.config import RunConfig
from goatdna.training.run import RunDir, resolved_config

if TYPE_CHECKING:
    from lightning_fabric import Fabric
    from lightning_fabric.loggers import Logger
    from lightning_fabric.strategies import Strategy
    from torch import Tensor, nn

    from goatdna.training.checkpoints import TrainState
    from goatdna.training.loop import Due
    from goatdna.training.module import GenomeLM
    from goatdna.training.throughput import ThroughputMonitor
    from goatdna.training.windows import SplitWindows

    ValBatch = dict[str, Tensor]

NON_FINITE_HINT = "Lower optim.lr, raise optim.warmup_steps or check the data"

METRIC_COLUMNS = (
    "step", "train_loss", "val_loss", "lr", "tokens_per_s", "grad_norm", "elapsed_s"
)  # fmt: skip
"""metrics.csv's columns in pretraining."""


def _devices_per_node(runtime: Runtime) -> int:
    """The run's devices as a count ("auto"/-1: every visible GPU, or 1 process on CPU)."""
    devices = runtime.devices
    if isinstance(devices, int) and devices > 0:
        return devices
    if isinstance(devices, list):  # "0,1": the listed device ids
        return len(devices)
    import torch

    return max(1, torch.cuda.device_count()) if runs_on_cuda(runtime.accelerator) else 1


def check_world_size(config: RunConfig, runtime: Runtime) -> None:
    """--devices x --num-nodes must equal the processes the launcher started (checked on every
    rank before any rendezvous: a mismatch would otherwise hang or shard the data wrongly)."""
    from lightning_fabric.plugins.environments import SLURMEnvironment, TorchElasticEnvironment

    launched = None  # processes an external launcher started (as Lightning detects it)
    if TorchElasticEnvironment.detect():
        launched = int(os.environ["WORLD_SIZE"])
    elif SLURMEnvironment.detect():
        launched = int(os.environ["SLURM_NTASKS"])
    per_node, nodes = _devices_per_node(runtime), runtime.num_nodes
    if launched is not None and launched != per_node * nodes:
        raise GoatDNAError(
            f"--devices {config.trainer.devices} x --num-nodes {nodes} = {per_node * nodes} "
            f"processes, but the launcher started {launched} (WORLD_SIZE / SLURM_NTASKS); pass "
            "--devices <processes per node> --num-nodes <nodes> matching torchrun's "
            "--nproc-per-node/--nnodes or sbatch's --ntasks-per-node/--nodes"
        )


def _strategy(config: RunConfig, precision: str = "32-true") -> Strategy | str:
    name = config.trainer.strategy
    if name == "fsdp":
        if config.trainer.compile:
            raise GoatDNAError(
                "trainer.compile=true with --strategy fsdp: the model would be compiled before "
                "FSDP wraps its blocks; use --strategy ddp (or one device) to compile, or "
                "--set trainer.compile=false with fsdp"
            )
        import torch
        from lightning_fabric.strategies import FSDPStrategy
        from torch.distributed.fsdp import MixedPrecision

        from goatdna.model.transformer import Block

        # One FSDP unit per decoder block; full state dicts keep the checkpoint contract.
        # Parameters, gradient reductions and buffers stay float32 as under DDP and on one device
        # (Fabric's default for *-mixed casts them to bf16/fp16, which would run GOAT's prior
        # in bf16 and reduce gradients in bf16); the precision plugin's autocast does the rest.
        fp32 = None
        if not precision.endswith("-true") or precision == "32-true":
            fp32 = MixedPrecision(
                param_dtype=torch.float32, reduce_dtype=torch.float32, buffer_dtype=torch.float32
            )
        return FSDPStrategy(
            auto_wrap_policy={Block},
            state_dict_type="full",
            use_orig_params=True,
            mixed_precision=fp32,
        )
    if name == "ddp":
        from lightning_fabric.strategies import DDPStrategy

        return DDPStrategy(gradient_as_bucket_view=True)
    return name


def _loggers(config: RunConfig, run: RunDir) -> list[Logger]:
    import importlib.util

    if not config.trainer.tensorboard or importlib.util.find_spec("tensorboard") is None:
        return []
    from lightning_fabric.loggers import TensorBoardLogger

    return [TensorBoardLogger(root_dir=str(run.tensorboard), name="", version="")]


def train(
    config: RunConfig,
    data_dir: str | Path,
    run_dir: str | Path,
    *,
    resume: bool | str = False,
    force: bool = False,
) -> dict[str, Any]:
    """Train ``config`` on the shards in ``data_dir`` into ``run_dir``; returns the summary.

    Raises GoatDNAError for anything the user can fix (bad data directory, occupied run
    directory, missing checkpoint for --resume, a loss that became NaN/inf), and `Interrupted`
    after Ctrl-C/SIGTERM (last.ckpt then holds the step it stopped at). ``resume="auto"``
    resumes when the run directory has a checkpoint and starts fresh otherwise. Devices are
    checked before the run directory is touched; global rank 0 holds the run directory's lock.
    """
    from lightning_fabric.utilities import rank_zero_only

    # warnings from one process (Lightning's own reading of the launcher's rank variables)
    rank = getattr(rank_zero_only, "rank", 0)
    runtime = preflight.check_before_training(config, Path(run_dir), warn=rank == 0)
    command = f"goatdna train --out {run_dir} --data {data_dir} --resume"
    with preflight.reported_stops(Path(run_dir), command):
        return _train(config, runtime, Path(data_dir), Path(run_dir), resume=resume, force=force)


def _train(
    config: RunConfig,
    runtime: Runtime,
    data_dir: Path,
    run_dir: Path,
    *,
    resume: bool | str,
    force: bool,
) -> dict[str, Any]:
    import torch

    from goatdna.data_prep import ShardedGenome
    from goatdna.model import DNADecoder
    from goatdna.training.checkpoints import training_checkpoint_bytes
    from goatdna.training.loop import claimed_run_dir
    from goatdna.training.windows import plan_windows

    wall_start = time.perf_counter()
    # Every check below reads only and runs on every rank before any rendezvous, so a user error
    # stops all ranks alike; rank 0 (as Fabric ranks processes) writes once the group is up.
    check_world_size(config, runtime)
    genome = ShardedGenome(data_dir)
    if config.data.verify:
        genome.verify()
    windows = plan_windows(genome, config.data)
    run = RunDir(run_dir)
    resolved = resolved_config(config, genome.manifest_sha256)
    plan = run.check(resolved, resume=resume, force=force)
    with torch.device("meta"):  # shapes only
        n_params = DNADecoder(config.model).num_params()
    run.check_room(training_checkpoint_bytes(n_params), fresh=plan.checkpoint is None)
    if plan.checkpoint is not None:
        run.resume_cpu_threads()

    precision = runtime.precision
    if runs_on_cuda(runtime.accelerator):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    fabric = runtime.fabric(_strategy(config, precision), _loggers(config, run))
    with claimed_run_dir(fabric, run, resolved, plan):
        summary = _fit(fabric, config, windows, run, plan.checkpoint, precision, wall_start)
        if fabric.is_global_zero:
            bad = [k for k in ("train_loss", "val_loss") if not math.isfinite(summary[k])]
            if bad:
                raise GoatDNAError(
                    f"run finished but {', '.join(bad)} is not finite; see {run.metrics_csv}"
                )
            run.write_summary(summary)
            if summary["mfu_note"] is not None:
                print(f"warning: {summary['mfu_note']}", file=sys.stderr)
        return summary


class Pretraining:
    """Next-base prediction as a `loop.Task`: ``accumulate`` micro-batches of windows per step,
    the validation loss over the fixed tiling, rows/validation/last.ckpt every ``log_every``/
    ``eval_every``/``ckpt_every`` steps and at the end."""

    def __init__(
        self,
        fabric: Fabric,
        config: RunConfig,
        windows: SplitWindows,
        loss_module: nn.Module,
        precision: str,
    ) -> None:
        from goatdna.training.data import val_loader
        from goatdna.training.loop import LoopSpec

        tr, pin = config.trainer, fabric.device.type == "cuda"
        self.fabric, self.config, self.windows, self.pin = fabric, config, windows, pin
        self.loss_module = loss_module  # the wrapped GenomeLM: tokens in, next-base loss out
        self.val = val_loader(windows, config.data, fabric.global_rank, fabric.world_size, pin)
        self.spec = LoopSpec(
            total_steps=tr.max_steps,
            columns=METRIC_COLUMNS,
            selection="loss",
            higher_is_better=False,
            grad_clip=config.optim.grad_clip,
            non_finite_hint=NON_FINITE_HINT,
            hyper_parameters={
                "config": to_dict(config),
                "data_manifest_sha256": windows.manifest_sha256,
                "goatdna_version": __version__,
            },
            progress_label="train",
            progress_bar=tr.progress_bar,
            shown=("train_loss", "val_loss", "tokens_per_s", "lr"),
            check_grads=not precision.startswith("16"),
            patience=tr.early_stop_evals,
        )

    def steps(self, start: int) -> Iterator[list[Tensor]]:
        from goatdna.training.data import train_loader

        tr, fabric = self.config.trainer, self.fabric
        micro_steps = range(start * tr.accumulate, tr.max_steps * tr.accumulate)
        batches = iter(train_loader(self.windows, self.config.data, self.config.seed, micro_steps,
                                    fabric.global_rank, fabric.world_size, self.pin))  # fmt: skip
        while True:
            yield list(itertools.islice(batches, tr.accumulate))

    def loss(self, batch: Tensor) -> Tensor:
        return self.loss_module(batch.to(self.fabric.device, non_blocking=True))

    def due(self, step: int) -> Due:
        from goatdna.training.loop import Due

        tr, final = self.config.trainer, step == self.config.trainer.max_steps
        return Due(log=step % tr.log_every == 0 or final,
                   validate=step % tr.eval_every == 0 or final,
                   checkpoint=step % tr.ckpt_every == 0 or final)  # fmt: skip

    def validate(self) -> dict[str, float]:
        return {"loss": validation_loss(self.fabric, self.loss_module, self.val)}

    def row(self, step: int, lrs: list[float], grad_norm: Tensor) -> dict[str, float]:
        return {"lr": lrs[0], "grad_norm": float(grad_norm)}


def _fit(
    fabric: Fabric,
    config: RunConfig,
    windows: SplitWindows,
    run: RunDir,
    checkpoint: Path | None,
    precision: str,
    started: float,
) -> dict[str, Any]:
    """Build the model, its loss and optimizer, run `loop.fit`, return the summary."""
    from lightning_fabric.utilities.seed import seed_everything

    from goatdna.model import flops_per_token
    from goatdna.training.loop import Trainable, fit
    from goatdna.training.module import GenomeLM, build_optimizer
    from goatdna.training.throughput import ThroughputMonitor, peak_flops_per_device

    tr, device, world = config.trainer, fabric.device, fabric.world_size
    seed_everything(config.seed, workers=True, verbose=False)
    lm = GenomeLM(config.model)  # the decoder (lm.model) and its next-base loss
    if tr.compile:
        lm.model.compile()  # in place: state_dict keys stay "model.<key>"
    trainable = Trainable.setup(fabric, lm, lambda: build_optimizer(
        lm.model, config.optim, tr.max_steps, device.type == "cuda", lm.param_ndims
    ))  # fmt: skip
    throughput = ThroughputMonitor(
        tokens_per_step=config.tokens_per_micro_batch * tr.accumulate * world,
        flops_per_token=flops_per_token(config.model, config.data.seq_len),
        warmup_steps=tr.throughput_warmup,
    )
    peak, source, measure = peak_flops_per_device(device, precision, tr.peak_flops)
    throughput.set_peak(peak, world, source, measure)
    task = Pretraining(fabric, config, windows, trainable.module, precision)
    finished = fit(fabric, task, run, trainable, checkpoint, started, throughput)
    throughput.remeasure_peak()  # a measured (CPU) peak: keep the best of start and end
    return _summary(fabric, config, lm, finished.state, throughput, precision, finished.elapsed,
                    windows)  # fmt: skip


def validation_loss(fabric: Fabric, loss_module: nn.Module, val: Iterable[ValBatch]) -> float:
    """Mean next-base cross-entropy over the validation tiling, summed over ranks in float64
    (padding rows weigh 0, N targets are not counted)."""
    import torch

    from goatdna.model import IGNORE_TARGET
    from goatdna.training.loop import all_reduce

    device = fabric.device
    loss_module.eval()
    totals = torch.zeros(2, dtype=torch.float64, device=device)  # (loss sum, targets)
    with torch.no_grad():
        for batch in val:
            tokens = batch["tokens"].to(device, non_blocking=True).long()  # (B, W)
            weight = batch["weight"].to(device).double()[:, None]  # (B, 1) 0 for padding rows
            losses = loss_module(tokens, reduction="none").double()  # (B, L)
            counted = (tokens[:, 1:] != IGNORE_TARGET).double()
            totals += torch.stack([(losses * weight).sum(), (counted * weight).sum()])
    loss_module.train()
    totals = all_reduce(fabric, totals, "sum")
    return float(totals[0] / totals[1]) if totals[1] > 0 else math.nan


def _summary(
    fabric: Fabric,
    config: RunConfig,
    lm: GenomeLM,
    state: TrainState,
    throughput: ThroughputMonitor,
    precision: str,
    elapsed: float,
    windows: SplitWindows,
) -> dict[str, Any]:
    """summary.json: the run's numbers and the context to read them in."""
    import torch

    from goatdna.training.throughput import peak_memory_bytes

    stopped = state.stopped_step >= 0  # early stopping ended the run before max_steps
    steps = state.stopped_step if stopped else config.trainer.max_steps
    device, world = fabric.device, fabric.world_size
    val_loss = state.last_val["loss"]
    return {
        "positional": config.model.positional,
        "params": lm.model.num_params(),
        "steps": steps,
        "tokens_seen": steps * throughput.tokens_per_step,
        "train_loss": state.last_train_loss,
        "val_loss": val_loss,
        "val_bits_per_base": val_loss / math.log(2),
        "tokens_per_s": throughput.tokens_per_s,
        "mfu": throughput.mfu,
        "mfu_note": throughput.mfu_note,  # why mfu is null (null when it is a number)
        "peak_memory_bytes": peak_memory_bytes(device),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else device.type,
        "precision": precision,
        "wall_seconds": elapsed,
        # context
        "best_val_loss": state.best_value,
        "best_step": state.best_step,
        "early_stopped": stopped,
        "world_size": world,
        "global_batch_tokens": throughput.tokens_per_step,
        "flops_per_token": throughput.flops_per_token,
        "peak_flops": throughput.peak_flops_total,
        "peak_flops_source": throughput.peak_source,
        "param_fingerprints": _fingerprints(fabric, lm, config),
        "data_manifest_sha256": windows.manifest_sha256,
        "goatdna_version": __version__,
    }


def _fingerprints(fabric: Fabric, lm: GenomeLM, config: RunConfig) -> list[list[float]] | None:
    """(sum, sum of squares) of all weights on every rank: replicas must agree exactly."""
    import torch

    if config.trainer.strategy == "fsdp":
        return None  # sharded: each rank holds different slices by design
    params = [p.detach().double() for p in lm.model.parameters()]
    squares = sum(((p * p).sum() for p in params), torch.zeros((), dtype=torch.float64))
    local = torch.stack([torch.stack([p.sum() for p in params]).sum(), squares])  # (2,)
    gathered = fabric.all_gather(local)
    assert isinstance(gathered, torch.Tensor)
    return gathered.reshape(-1, 2).cpu().tolist()  # (world, 2)
