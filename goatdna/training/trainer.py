"""`train()`: one run from a config and a shard directory to a finished run directory.

The same function trains a tiny model on a laptop CPU and the 125M models on GPUs: devices,
strategy (single device, DDP, FSDP), precision and the number of nodes come from
``config.trainer`` and go straight to Lightning, so ``torchrun`` and SLURM launches work as
Lightning documents them. Every process runs this function; only global rank 0 checks and writes
the run directory.
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
from goatdna.training import preflight
from goatdna.training.config import RunConfig
from goatdna.training.run import RunDir, resolved_config


class _DropAdvertisements(logging.Filter):
    """Lightning logs a product tip on every Trainer; keep the console for the run's own lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Tip:" not in record.getMessage()


def _quiet_lightning_tips() -> None:
    log = logging.getLogger("pytorch_lightning.utilities.rank_zero")
    if not any(isinstance(f, _DropAdvertisements) for f in log.filters):
        log.addFilter(_DropAdvertisements())


def _is_global_zero() -> bool:
    """Whether this process will be global rank 0, decided before Lightning starts.

    torchrun sets RANK, SLURM sets SLURM_PROCID, and Lightning's own launcher (also one process
    per node started by hand with NODE_RANK) sets LOCAL_RANK in the processes it spawns.
    """
    env = os.environ
    if "RANK" in env:
        return int(env["RANK"]) == 0
    if "SLURM_PROCID" in env and int(env.get("SLURM_NTASKS", "1")) > 1:
        return int(env["SLURM_PROCID"]) == 0
    return int(env.get("NODE_RANK", "0")) == 0 and int(env.get("LOCAL_RANK", "0")) == 0


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


def _strategy(config: RunConfig) -> Any:
    name = config.trainer.strategy
    if name == "fsdp":
        from pytorch_lightning.strategies import FSDPStrategy

        from goatdna.model.transformer import Block

        # One FSDP unit per decoder block; full state dicts keep the checkpoint contract.
        return FSDPStrategy(auto_wrap_policy={Block}, state_dict_type="full", use_orig_params=True)
    if name == "ddp":
        from pytorch_lightning.strategies import DDPStrategy

        return DDPStrategy(gradient_as_bucket_view=True)
    return name


def _devices(value: int | str) -> int | str:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def _loggers(config: RunConfig, run: RunDir) -> list[Any]:
    if not config.trainer.tensorboard:
        return []
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return []
    from pytorch_lightning.loggers import TensorBoardLogger

    return [TensorBoardLogger(save_dir=str(run.tensorboard), name="", version="", sub_dir=None)]


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
    resume: bool = False,
    force: bool = False,
) -> dict[str, Any]:
    """Train ``config`` on the shards in ``data_dir`` into ``run_dir``; returns the summary.

    Raises GoatDNAError for anything the user can fix (bad data directory, occupied run
    directory, missing checkpoint for --resume, a loss that became NaN/inf), and `Interrupted`
    after Ctrl-C/SIGTERM (last.ckpt then holds the step it stopped at). Devices are checked
    before the run directory is touched, and global rank 0 holds the run directory's lock.
    """
    is_zero = _is_global_zero()
    preflight.check_before_training(config, Path(run_dir), warn=is_zero)
    try:
        if not is_zero:
            return _train(config, data_dir, run_dir, resume=resume, force=force)
        with folder_lock(Path(run_dir), "--run-dir"):
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
    resume: bool = False,
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

    is_zero = _is_global_zero()
    genome = ShardedGenome(data_dir)
    if config.data.verify and is_zero:
        genome.verify()
    windows = plan_windows(genome, config.data)

    run = RunDir(Path(run_dir))
    resolved = resolved_config(config, genome.manifest_sha256)
    if is_zero:
        ckpt_path = run.prepare(resolved, resume=resume, force=force)
    else:
        ckpt_path = run.last_ckpt if resume else None

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
    trainer = pl.Trainer(
        accelerator=tr.accelerator,
        devices=_devices(tr.devices),
        num_nodes=tr.num_nodes,
        strategy=_strategy(config),
        precision=precision,
        max_steps=tr.max_steps,
        max_epochs=-1,
        accumulate_grad_batches=tr.accumulate,
        # clipping: GenomeLM.configure_gradient_clipping (optim.grad_clip; FSDP-aware)
        limit_val_batches=0,
        num_sanity_val_steps=0,
        logger=_loggers(config, run),
        callbacks=[throughput, memory, lifecycle, *_progress_bar(tr.progress_bar)],
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


def _device_name(device: Any) -> str:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return device.type
