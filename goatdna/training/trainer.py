"""`train()`: one run from a config and a shard directory to a finished run directory.

The same function trains a tiny model on a laptop CPU and the 125M models on GPUs: devices,
strategy (single device, DDP, FSDP), precision and the number of nodes come from
``config.trainer`` and go straight to Lightning, so ``torchrun`` and SLURM launches work as
Lightning documents them. Every process runs this function and checks the run directory (read
only); global rank 0, as Lightning ranks the processes, writes it.
"""

from __future__ import annotations

import logging
import math
import os
import time
import warnings
from pathlib import Path
from typing import Any

from goatdna import __version__
from goatdna.atomic import is_disk_full
from goatdna.configfile import to_dict
from goatdna.errors import GoatDNAError
from goatdna.locking import folder_lock
from goatdna.runtime import parse_devices
from goatdna.training import preflight
from goatdna.training.config import RunConfig
from goatdna.training.run import RunDir, StartPlan, resolved_config


class _DropAdvertisements(logging.Filter):
    """Lightning logs a product tip on every Trainer; keep the console for the run's own lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Tip:" not in record.getMessage()


def _quiet_lightning_tips() -> None:
    log = logging.getLogger("pytorch_lightning.utilities.rank_zero")
    if not any(isinstance(f, _DropAdvertisements) for f in log.filters):
        log.addFilter(_DropAdvertisements())


def launched_world_size() -> int | None:
    """Processes an external launcher started (torchrun's WORLD_SIZE, srun's SLURM_NTASKS), as
    Lightning detects the launcher; None when Lightning starts the processes itself."""
    from lightning_fabric.plugins.environments import SLURMEnvironment, TorchElasticEnvironment

    if TorchElasticEnvironment.detect():
        return int(os.environ["WORLD_SIZE"])
    if SLURMEnvironment.detect():
        return int(os.environ["SLURM_NTASKS"])
    return None


def _devices_per_node(config: RunConfig) -> int:
    """``trainer.devices`` as a count ("auto"/-1: every visible GPU, or 1 process on CPU)."""
    devices = parse_devices(config.trainer.devices)
    if isinstance(devices, int) and devices > 0:
        return devices
    if isinstance(devices, list):  # "0,1": the listed device ids
        return len(devices)
    import torch

    return max(1, torch.cuda.device_count()) if _on_gpu(config) else 1


def check_world_size(config: RunConfig) -> None:
    """--devices x --num-nodes must equal the processes the launcher started (checked on every
    rank before any rendezvous: a mismatch would otherwise hang or shard the data wrongly)."""
    launched = launched_world_size()
    per_node, nodes = _devices_per_node(config), config.trainer.num_nodes
    if launched is not None and launched != per_node * nodes:
        raise GoatDNAError(
            f"--devices {config.trainer.devices} x --num-nodes {nodes} = {per_node * nodes} "
            f"processes, but the launcher started {launched} (WORLD_SIZE / SLURM_NTASKS); pass "
            "--devices <processes per node> --num-nodes <nodes> matching torchrun's "
            "--nproc-per-node/--nnodes or sbatch's --ntasks-per-node/--nodes"
        )


def _on_gpu(config: RunConfig) -> bool:
    import torch

    return config.trainer.accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available()


def resolve_precision(config: RunConfig) -> str:
    """``auto``: bf16-mixed on a bf16-capable GPU, 16-mixed on older GPUs, 32-true on CPU."""
    import torch

    if config.trainer.precision != "auto":
        return config.trainer.precision
    if _on_gpu(config):
        return "bf16-mixed" if torch.cuda.is_bf16_supported() else "16-mixed"
    return "32-true"


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
        from pytorch_lightning.strategies import FSDPStrategy
        from torch.distributed.fsdp import MixedPrecision

        from goatdna.model.transformer import Block

        # One FSDP unit per decoder block; full state dicts keep the checkpoint contract.
        # Parameters, gradient reductions and buffers stay float32 as under DDP and on one device
        # (Lightning's default for *-mixed casts them to bf16/fp16, which would run GOAT's prior
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
        from pytorch_lightning.strategies import DDPStrategy

        return DDPStrategy(gradient_as_bucket_view=True)
    return name


def _loggers(config: RunConfig, run: RunDir) -> list[Any]:
    if not config.trainer.tensorboard:
        return []
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return []
    from pytorch_lightning.loggers import TensorBoardLogger

    return [TensorBoardLogger(save_dir=str(run.tensorboard), name="", version="", sub_dir=None)]


def _run_dir_writer(run: RunDir, resolved: dict[str, Any], plan: StartPlan) -> Any:
    """A callback that, once the process group is up, takes the run directory's lock and sets
    the directory up on global rank 0 (Lightning's own rank, right for torchrun, SLURM and its
    own launcher alike), then holds every rank at a barrier until it is done. Before that point
    every rank has already run the same read-only `RunDir.check` against the untouched
    directory, so all agree on it. A lock held by another run is broadcast, so every rank stops
    with the same one-line error instead of waiting at the barrier. ``release()`` (called when
    `fit` returns or fails) drops the lock."""
    import contextlib

    import pytorch_lightning as pl

    class _RunDirWriter(pl.Callback):
        def __init__(self) -> None:
            self._lock = contextlib.ExitStack()

        def setup(self, trainer: pl.Trainer, pl_module: Any, stage: str) -> None:
            error = None
            if trainer.is_global_zero:
                try:
                    self._lock.enter_context(folder_lock(run.root, "--run-dir"))
                    run.start(resolved, plan)
                except GoatDNAError as err:
                    error = str(err)
            error = trainer.strategy.broadcast(error, src=0)
            if error:
                raise GoatDNAError(error)
            trainer.strategy.barrier("goatdna-run-dir-ready")

        def release(self) -> None:
            self._lock.close()

    return _RunDirWriter()


def _progress_bar(enabled: bool) -> list[Any]:
    """Rich bar labelled by steps (Lightning's default label counts epochs, of which we run one)."""
    if not enabled:
        return []
    from pytorch_lightning.callbacks import RichProgressBar

    class StepProgressBar(RichProgressBar):
        def _get_train_description(self, current_epoch: int) -> str:
            return "train"

        @property
        def total_train_batches(self) -> int | float:
            # The whole run's micro-batches: the bar counts from the restored position on
            # --resume (Lightning's default, the remaining optimizer steps, shows "20/9").
            return self.trainer.num_training_batches

    return [StepProgressBar(leave=True)]


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
    from pytorch_lightning.utilities import rank_zero_only

    # warnings from one process (Lightning's own reading of the launcher's rank variables)
    preflight.check_before_training(config, Path(run_dir), warn=rank_zero_only.rank == 0)
    try:
        return _train(config, data_dir, run_dir, resume=resume, force=force)
    except (preflight.TrainingInterrupted, KeyboardInterrupt, SystemExit) as stop:
        if isinstance(stop, SystemExit) and preflight.last_signal is None:
            raise
        raise preflight.interrupted_message(stop, Path(data_dir), Path(run_dir)) from None
    except OSError as err:  # a full disk anywhere else (TensorBoard, metrics): one line too
        if not is_disk_full(err):
            raise
        raise preflight.disk_full(err, Path(run_dir)) from None


def _train(
    config: RunConfig,
    data_dir: str | Path,
    run_dir: str | Path,
    *,
    resume: bool | str = False,
    force: bool = False,
) -> dict[str, Any]:
    wall_start = time.perf_counter()
    import pytorch_lightning as pl
    import torch

    from goatdna.data_prep import ShardedGenome
    from goatdna.model import flops_per_token
    from goatdna.training.callbacks import MemoryMonitor, ThroughputMonitor, peak_flops_per_device
    from goatdna.training.data import GenomeDataModule
    from goatdna.training.lifecycle import RunLifecycle
    from goatdna.training.module import GenomeLM, NonFiniteLossError
    from goatdna.training.windows import plan_windows

    # Every check below reads only and runs on every rank before any rendezvous, so a user error
    # stops all ranks alike; rank 0 (as Lightning ranks processes) writes once the group is up.
    check_world_size(config)
    genome = ShardedGenome(data_dir)
    if config.data.verify:
        genome.verify()
    windows = plan_windows(genome, config.data)

    run = RunDir(Path(run_dir))
    resolved = resolved_config(config, genome.manifest_sha256)
    plan = run.check(resolved, resume=resume, force=force)
    ckpt_path = plan.checkpoint

    precision = resolve_precision(config)
    _quiet_lightning_tips()
    if _on_gpu(config):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    pl.seed_everything(config.seed, workers=True, verbose=False)

    module = GenomeLM(
        config=to_dict(config),
        data_manifest_sha256=genome.manifest_sha256,
        goatdna_version=__version__,
    )
    tr = config.trainer
    datamodule = GenomeDataModule(
        windows, config.data, seed=config.seed, accumulate=tr.accumulate, max_steps=tr.max_steps
    )
    throughput = ThroughputMonitor(
        tokens_per_step=0,  # set once the world size is known (below)
        flops_per_token=flops_per_token(config.model, config.data.seq_len),
        warmup_steps=tr.throughput_warmup,
    )
    memory = MemoryMonitor()
    lifecycle = RunLifecycle(run, throughput)
    writer = _run_dir_writer(run, resolved, plan)
    trainer = pl.Trainer(
        accelerator=tr.accelerator,
        devices=parse_devices(tr.devices),
        num_nodes=tr.num_nodes,
        strategy=_strategy(config, precision),
        precision=precision,
        max_steps=tr.max_steps,
        max_epochs=-1,
        accumulate_grad_batches=tr.accumulate,
        # clipping: GenomeLM.configure_gradient_clipping (optim.grad_clip; FSDP-aware)
        limit_val_batches=0,
        num_sanity_val_steps=0,
        logger=_loggers(config, run),
        callbacks=[
            writer,
            throughput,
            memory,
            lifecycle,
            *_progress_bar(tr.progress_bar),
        ],
        enable_checkpointing=False,
        enable_progress_bar=tr.progress_bar,
        enable_model_summary=False,  # `goatdna model-info` has the breakdown; its FLOPs line reads 0
        log_every_n_steps=min(tr.log_every, tr.max_steps * tr.accumulate),
        use_distributed_sampler=False,
        default_root_dir=str(run.root),
    )
    world = trainer.world_size
    throughput.tokens_per_step = config.tokens_per_micro_batch * tr.accumulate * world
    peak, source = peak_flops_per_device(trainer.strategy.root_device, precision, tr.peak_flops)
    throughput.set_peak(peak, world, source)

    try:  # the run directory stays locked until its summary is written
        with warnings.catch_warnings():
            # The data position is restored from global_step (see GenomeDataModule), not from a
            # loader state, so Lightning's "dataloader is not resumable" warning does not apply.
            warnings.filterwarnings("ignore", message=".*dataloader is not resumable.*")
            warnings.filterwarnings("ignore", message=".*does not have many workers.*")
            warnings.filterwarnings("ignore", message=".*isinstance\\(treespec, LeafSpec\\).*")
            try:
                trainer.fit(
                    module,
                    datamodule=datamodule,
                    ckpt_path=str(ckpt_path) if ckpt_path else None,
                    weights_only=True,  # the checkpoint contract: plain types only
                )
            except NonFiniteLossError as err:
                kept = (
                    f"last good checkpoint: {run.last_ckpt}"
                    if run.last_ckpt.is_file()
                    else "no checkpoint had been written yet"
                )
                raise NonFiniteLossError(f"{err} ({kept})") from None

        steps = trainer.global_step
        val_loss = lifecycle.last_val_loss
        summary: dict[str, Any] = {
            "positional": config.model.positional,
            "params": module.model.num_params(),
            "steps": steps,
            "tokens_seen": steps * throughput.tokens_per_step,
            "train_loss": lifecycle.last_train_loss,
            "val_loss": val_loss,
            "val_bits_per_base": val_loss / math.log(2),
            "tokens_per_s": throughput.tokens_per_s,
            "mfu": throughput.mfu,
            "peak_memory_bytes": memory.peak_bytes(),
            "device": _device_name(trainer.strategy.root_device),
            "precision": precision,
            "wall_seconds": lifecycle.elapsed_before + (time.perf_counter() - wall_start),
            # context
            "best_val_loss": lifecycle.best_val_loss,
            "best_step": lifecycle.best_step,
            "world_size": world,
            "global_batch_tokens": throughput.tokens_per_step,
            "flops_per_token": throughput.flops_per_token,
            "peak_flops": throughput.peak_flops_total,
            "peak_flops_source": throughput.peak_source,
            "param_fingerprints": lifecycle.param_fingerprints,
            "data_manifest_sha256": genome.manifest_sha256,
            "goatdna_version": __version__,
        }
        if trainer.is_global_zero:
            bad = [k for k in ("train_loss", "val_loss") if not math.isfinite(summary[k])]
            if bad:
                raise GoatDNAError(
                    f"run finished but {', '.join(bad)} is not finite; see {run.metrics_csv}"
                )
            run.write_summary(summary)
        return summary
    finally:
        writer.release()


def _device_name(device: Any) -> str:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return device.type
