"""`train()`: one run from a config and a shard directory to a finished run directory.

The same function trains a tiny model on a laptop CPU and the 125M models on GPUs: devices,
strategy (single device, DDP, FSDP), precision and the number of nodes come from
``config.trainer`` and go to `lightning_fabric.Fabric` (through `goatdna.runtime.Runtime`), so
``torchrun`` and SLURM launches work as Lightning documents them. The loop itself is plain
Python (see `training.lifecycle` for the order of things at each step boundary). Every process
runs this function and checks the run directory (read only); global rank 0 writes it.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from pathlib import Path
from typing import Any

from goatdna import __version__
from goatdna.configfile import to_dict
from goatdna.errors import GoatDNAError
from goatdna.runtime import Runtime, parse_devices, runs_on_cuda
from goatdna.training import preflight
from goatdna.training.config import RunConfig
from goatdna.training.run import RunDir, resolved_config

NON_FINITE_HINT = "Lower optim.lr, raise optim.warmup_steps or check the data"


def _devices_per_node(config: RunConfig) -> int:
    """``trainer.devices`` as a count ("auto"/-1: every visible GPU, or 1 process on CPU)."""
    devices = parse_devices(config.trainer.devices)
    if isinstance(devices, int) and devices > 0:
        return devices
    if isinstance(devices, list):  # "0,1": the listed device ids
        return len(devices)
    import torch

    return max(1, torch.cuda.device_count()) if runs_on_cuda(config.trainer.accelerator) else 1


def check_world_size(config: RunConfig) -> None:
    """--devices x --num-nodes must equal the processes the launcher started (checked on every
    rank before any rendezvous: a mismatch would otherwise hang or shard the data wrongly)."""
    from lightning_fabric.plugins.environments import SLURMEnvironment, TorchElasticEnvironment

    launched = None  # processes an external launcher started (as Lightning detects it)
    if TorchElasticEnvironment.detect():
        launched = int(os.environ["WORLD_SIZE"])
    elif SLURMEnvironment.detect():
        launched = int(os.environ["SLURM_NTASKS"])
    per_node, nodes = _devices_per_node(config), config.trainer.num_nodes
    if launched is not None and launched != per_node * nodes:
        raise GoatDNAError(
            f"--devices {config.trainer.devices} x --num-nodes {nodes} = {per_node * nodes} "
            f"processes, but the launcher started {launched} (WORLD_SIZE / SLURM_NTASKS); pass "
            "--devices <processes per node> --num-nodes <nodes> matching torchrun's "
            "--nproc-per-node/--nnodes or sbatch's --ntasks-per-node/--nodes"
        )


def _strategy(config: RunConfig, precision: str = "32-true") -> Any:
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


def _loggers(config: RunConfig, run: RunDir) -> list[Any]:
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
    preflight.check_before_training(config, Path(run_dir), warn=rank == 0)
    command = f"goatdna train --out {run_dir} --data {data_dir} --resume"
    with preflight.reported_stops(Path(run_dir), command):
        return _train(config, Path(data_dir), Path(run_dir), resume=resume, force=force)


def _train(
    config: RunConfig, data_dir: Path, run_dir: Path, *, resume: bool | str, force: bool
) -> dict[str, Any]:
    import torch

    from goatdna.data_prep import ShardedGenome
    from goatdna.training.lifecycle import claimed_run_dir, resolve_precision
    from goatdna.training.windows import plan_windows

    wall_start = time.perf_counter()
    # Every check below reads only and runs on every rank before any rendezvous, so a user error
    # stops all ranks alike; rank 0 (as Fabric ranks processes) writes once the group is up.
    check_world_size(config)
    genome = ShardedGenome(data_dir)
    if config.data.verify:
        genome.verify()
    windows = plan_windows(genome, config.data)
    run = RunDir(run_dir)
    resolved = resolved_config(config, genome.manifest_sha256)
    plan = run.check(resolved, resume=resume, force=force)

    precision = resolve_precision(config.trainer.precision, config.trainer.accelerator)
    if runs_on_cuda(config.trainer.accelerator):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    tr = config.trainer
    runtime = Runtime.from_options(tr.accelerator, tr.devices, tr.num_nodes, precision)
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
        return summary


def _fit(
    fabric: Any,
    config: RunConfig,
    windows: Any,
    run: RunDir,
    checkpoint: Path | None,
    precision: str,
    started: float,
) -> dict[str, Any]:
    """The loop: optimizer steps from the checkpoint's step (or 0) to ``trainer.max_steps``."""
    from lightning_fabric.utilities.seed import seed_everything

    from goatdna.model import flops_per_token
    from goatdna.training.data import train_loader, val_loader
    from goatdna.training.lifecycle import RunState, StepProgress, StopSignals
    from goatdna.training.module import GenomeLM, build_optimizer
    from goatdna.training.throughput import (
        ThroughputMonitor,
        peak_flops_per_device,
    )

    tr, device, world = config.trainer, fabric.device, fabric.world_size
    seed_everything(config.seed, workers=True, verbose=False)
    lm = GenomeLM(to_dict(config))
    if tr.compile:
        lm.model.compile()  # in place: state_dict keys stay "model.<key>"
    model = fabric.setup_module(lm)
    optimizer, scheduler = build_optimizer(
        lm.model, config.optim, tr.max_steps, device.type == "cuda", lm.param_ndims
    )
    optimizer = fabric.setup_optimizers(optimizer)
    loop = {"best_val_loss": math.inf, "best_step": -1, "last_val_loss": math.nan,
            "last_train_loss": math.nan}  # fmt: skip
    hparams = {"config": to_dict(config), "data_manifest_sha256": windows.manifest_sha256,
               "goatdna_version": __version__}  # fmt: skip
    objects = {"state_dict": model, "optimizer": optimizer, "scheduler": scheduler}
    run_state = RunState(fabric, run, objects, loop, hparams, checkpoint, NON_FINITE_HINT, started)
    start, loop = run_state.start, run_state.loop
    throughput = ThroughputMonitor(
        tokens_per_step=config.tokens_per_micro_batch * tr.accumulate * world,
        flops_per_token=flops_per_token(config.model, config.data.seq_len),
        warmup_steps=tr.throughput_warmup,
    )
    peak, source = peak_flops_per_device(device, precision, tr.peak_flops)
    throughput.set_peak(peak, world, source)
    pin = device.type == "cuda"
    micro_steps = range(start * tr.accumulate, tr.max_steps * tr.accumulate)
    batches = iter(train_loader(windows, config.data, config.seed, micro_steps,
                                fabric.global_rank, world, pin))  # fmt: skip
    val = val_loader(windows, config.data, fabric.global_rank, world, pin)
    check_grads = not precision.startswith("16")
    progress = StepProgress(tr.progress_bar and fabric.is_global_zero, tr.max_steps, start)

    throughput.start(start)
    with StopSignals() as stop:
        try:
            for step in range(start + 1, tr.max_steps + 1):
                loss, norm, lrs = run_state.optimizer_step(
                    model, optimizer, scheduler, itertools.islice(batches, tr.accumulate),
                    lambda tokens: model(tokens.to(device, non_blocking=True)),
                    tr.accumulate, config.optim.grad_clip, step, check_grads,
                )  # fmt: skip
                throughput.step_done(step, device)
                final = step == tr.max_steps
                row: dict[str, Any] = {}
                if step % tr.log_every == 0 or final:
                    loop["last_train_loss"] = float(fabric.all_reduce(loss, reduce_op="mean"))
                    row.update(train_loss=loop["last_train_loss"], lr=lrs[0],
                               tokens_per_s=throughput.take_interval_rate(),
                               grad_norm=float(norm))  # fmt: skip
                improved = False
                if step % tr.eval_every == 0 or final:
                    with throughput.paused():
                        loop["last_val_loss"] = row["val_loss"] = validation_loss(
                            fabric, model, val
                        )
                    if loop["last_val_loss"] < loop["best_val_loss"]:
                        loop["best_val_loss"], loop["best_step"] = loop["last_val_loss"], step
                        improved = True
                if row:
                    run_state.log(step, row)
                shown = ("train_loss", "val_loss", "tokens_per_s", "lr")
                progress.update(step, **{k: v for k, v in row.items() if k in shown})
                with throughput.paused():
                    run_state.end_step(step, improved=improved, final=final, stop=stop,
                                       checkpoint=step % tr.ckpt_every == 0 or final)  # fmt: skip
        finally:
            progress.close()

    return _summary(fabric, config, lm, loop, throughput, precision, run_state.elapsed, windows)


def validation_loss(fabric: Any, model: Any, val: Any) -> float:
    """Mean next-base cross-entropy over the validation tiling, summed over ranks in float64
    (padding rows weigh 0, N targets are not counted)."""
    import torch

    from goatdna.model import IGNORE_TARGET

    device = fabric.device
    model.eval()
    totals = torch.zeros(2, dtype=torch.float64, device=device)  # (loss sum, targets)
    with torch.no_grad():
        for batch in val:
            tokens = batch["tokens"].to(device, non_blocking=True).long()  # (B, W)
            weight = batch["weight"].to(device).double()[:, None]  # (B, 1) 0 for padding rows
            losses = model(tokens, reduction="none").double()  # (B, L)
            counted = (tokens[:, 1:] != IGNORE_TARGET).double()
            totals += torch.stack([(losses * weight).sum(), (counted * weight).sum()])
    model.train()
    totals = fabric.all_reduce(totals, reduce_op="sum")
    return float(totals[0] / totals[1]) if totals[1] > 0 else math.nan


def _summary(
    fabric: Any,
    config: RunConfig,
    lm: Any,
    loop: dict[str, Any],
    throughput: Any,
    precision: str,
    elapsed: float,
    windows: Any,
) -> dict[str, Any]:
    """summary.json: the run's numbers and the context to read them in."""
    import torch

    from goatdna.training.throughput import peak_memory_bytes

    steps = config.trainer.max_steps
    device, world = fabric.device, fabric.world_size
    val_loss = float(loop["last_val_loss"])
    return {
        "positional": config.model.positional,
        "params": lm.model.num_params(),
        "steps": steps,
        "tokens_seen": steps * throughput.tokens_per_step,
        "train_loss": float(loop["last_train_loss"]),
        "val_loss": val_loss,
        "val_bits_per_base": val_loss / math.log(2),
        "tokens_per_s": throughput.tokens_per_s,
        "mfu": throughput.mfu,
        "peak_memory_bytes": peak_memory_bytes(device),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else device.type,
        "precision": precision,
        "wall_seconds": elapsed,
        # context
        "best_val_loss": float(loop["best_val_loss"]),
        "best_step": int(loop["best_step"]),
        "world_size": world,
        "global_batch_tokens": throughput.tokens_per_step,
        "flops_per_token": throughput.flops_per_token,
        "peak_flops": throughput.peak_flops_total,
        "peak_flops_source": throughput.peak_source,
        "param_fingerprints": _fingerprints(fabric, lm, config),
        "data_manifest_sha256": windows.manifest_sha256,
        "goatdna_version": __version__,
    }


def _fingerprints(fabric: Any, lm: Any, config: RunConfig) -> list[list[float]] | None:
    """(sum, sum of squares) of all weights on every rank: replicas must agree exactly."""
    import torch

    if config.trainer.strategy == "fsdp":
        return None  # sharded: each rank holds different slices by design
    params = [p.detach().double() for p in lm.model.parameters()]
    local = torch.stack(
        [torch.stack([p.sum() for p in params]).sum(), sum((p * p).sum() for p in params)]
    )  # (2,)
    return fabric.all_gather(local).reshape(-1, 2).cpu().tolist()  # (world, 2)
