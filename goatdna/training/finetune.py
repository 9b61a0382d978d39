"""`finetune()`: a pretrained GOAT/RoPE backbone + a sequence head, trained on a labelled task.

Same run-directory contract as `goatdna train` (`training.run.RunDir`): ``config.yaml``,
``metrics.csv``, ``checkpoints/{last,best}.ckpt`` (best by the validation metric: MCC for
classification, MSE for regression), ``summary.json``; ``--resume`` continues from last.ckpt
with the same batches (see `finetune_data`), ``--force`` starts over. Validation runs at the end
of every epoch, inside a callback at the optimizer-step boundary (as in `training.lifecycle`),
so a checkpoint already holds its epoch's validation and best-checkpoint bookkeeping.

Checkpoints keep the training contract: ``state_dict`` holds ``"model." + <DNADecoder key>`` (the
backbone, so `load_checkpoint` still reads it as a language model) and ``"head." + <head key>``;
``hyper_parameters["config"]`` is the resolved fine-tuning config with its ``model`` and ``head``
sections. ``mode: probe`` freezes the backbone and trains the head on embeddings computed once
and cached in ``RUN_DIR/cache/`` (keyed by backbone, inputs, pooling and length cap).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import signal
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from goatdna import __version__
from goatdna.checkpoint import load_checkpoint
from goatdna.configfile import from_dict, to_dict
from goatdna.errors import GoatDNAError
from goatdna.model import DNADecoder, ModelConfig
from goatdna.model.classifier import (
    SequenceHead,
    hidden_states,
    is_classifier_config,
    pool_hidden,
    reverse_complement_padded,
    strand_average,
)
from goatdna.runtime import gather_blocks, parse_devices, rank_block
from goatdna.training.finetune_config import FinetuneConfig
from goatdna.training.finetune_data import (
    Split,
    StepBatches,
    StepPlan,
    TaskData,
    eval_batches,
    file_sha256,
    load_task,
)
from goatdna.training.lifecycle import KILL_AFTER_CHECKPOINT_ENV, MetricsCSV
from goatdna.training.metrics import (
    CLASSIFICATION_METRICS,
    HIGHER_IS_BETTER,
    REGRESSION_METRICS,
    class_balance,
    classification_metrics,
    regression_metrics,
)
from goatdna.training.module import lr_multiplier
from goatdna.training.run import RunDir

SELECTION_METRIC = {"classification": "mcc", "regression": "mse"}
CACHE_DIR = "cache"


def metric_columns(task: str) -> tuple[str, ...]:
    names = CLASSIFICATION_METRICS if task == "classification" else REGRESSION_METRICS
    return ("step", "epoch", "train_loss", "val_loss", *(f"val_{m}" for m in names),
            "lr_head", "lr_backbone", "elapsed_s")  # fmt: skip


# ------------------------------------------------------------------------------ module
class SequenceTaskModule(pl.LightningModule):
    """Backbone (``model``) + head (``head``); trains on tokens (full) or cached features (probe)."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        self.save_hyperparameters()  # plain dict: checkpoints load with weights_only=True
        self.ft = from_dict(FinetuneConfig, {k: config[k] for k in FINETUNE_SECTIONS}, "")
        head = config["head"]
        self.task: str = head["task"]
        self.label_mean = float(head["label_mean"])
        self.label_std = float(head["label_std"])
        self.model = DNADecoder(from_dict(ModelConfig, dict(config["model"]), "model"))
        self.head = SequenceHead(self.model.config.d_model, int(head["n_outputs"]),
                                 self.ft.backbone.dropout)  # fmt: skip
        self.probe = self.ft.backbone.mode == "probe"
        if self.probe:
            self.model.requires_grad_(False)
        elif self.model.head is not None:
            # the next-base head plays no part in the task (and DDP rejects unused parameters)
            self.model.head.requires_grad_(False)
        self.total_steps = int(head["total_steps"])
        self._loss_sum = 0.0
        self._loss_count = 0

    # ---------------------------------------------------------------- forward pieces
    def features(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        return pool_hidden(hidden_states(self.model, tokens), lengths, self.ft.backbone.pool)

    def loss(self, outputs: Tensor, labels: Tensor) -> Tensor:
        if self.task == "classification":
            return F.cross_entropy(outputs.float(), labels.long())
        target = (labels.to(outputs.dtype) - self.label_mean) / self.label_std
        return F.mse_loss(outputs.float().squeeze(-1), target.float())

    def to_predictions(self, outputs: Tensor, outputs_rc: Tensor | None) -> Tensor:
        """Head outputs -> probabilities (N, K) or values in label units (N, 1)."""
        classification = self.task == "classification"
        if outputs_rc is not None:
            merged = strand_average(outputs.float(), outputs_rc.float(), classification)
        else:
            merged = outputs.float().softmax(-1) if classification else outputs.float()
        if not classification:
            merged = merged * self.label_std + self.label_mean
        return merged

    # ---------------------------------------------------------------- training
    def on_train_start(self) -> None:
        if self.probe:
            self.model.eval()

    def on_train_epoch_start(self) -> None:
        if self.probe:
            self.model.eval()

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        # Dropout masks are a function of (seed, step, rank): a resumed run draws the same ones.
        torch.manual_seed(
            (self.ft.seed * 1_000_003 + self.global_step * 131 + self.global_rank) % 2**63
        )
        if self.probe:
            features = batch["features"]
        else:
            features = self.features(batch["tokens"], batch["lengths"])
        loss = self.loss(self.head(features), batch["labels"])
        self._loss_sum += float(loss.detach())
        self._loss_count += 1
        self.log("loss", loss.detach(), prog_bar=True, logger=False, on_step=True)
        return loss

    def take_train_loss(self) -> float:
        mean = self._loss_sum / self._loss_count if self._loss_count else math.nan
        self._loss_sum, self._loss_count = 0.0, 0
        return mean

    def configure_optimizers(self) -> dict[str, Any]:
        optim = self.ft.optim
        groups = [_decay_groups(self.head, optim.head_lr, optim.weight_decay)]
        if not self.probe:
            groups.append(_decay_groups(self.model, optim.backbone_lr, optim.weight_decay))
        flat = [g for pair in groups for g in pair if g["params"]]
        optimizer = torch.optim.AdamW(flat, betas=(0.9, 0.98))
        warmup = int(optim.warmup_fraction * self.total_steps)
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer,
            lambda step: lr_multiplier(step, warmup=warmup, total=self.total_steps, floor=0.0),
        )
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step", "frequency": 1},
        }

    # ---------------------------------------------------------------- evaluation
    @torch.no_grad()
    def predict_rows(
        self,
        split: Split,
        features: tuple[Tensor, Tensor | None] | None,
        batch_size: int,
        rc_average: bool,
    ) -> np.ndarray:
        """Predictions for every row of ``split`` in order (each rank computes its block)."""
        was_training = self.training
        self.eval()
        rank, world = self.global_rank, self.trainer.world_size if self._trainer else 1
        block = rank_block(len(split), rank, world)
        outs: list[Tensor] = []
        if features is not None:
            forward, rc = features
            for start in range(block.start, block.stop, batch_size):
                stop = min(start + batch_size, block.stop)
                out = self.head(forward[start:stop].to(self.device))
                out_rc = self.head(rc[start:stop].to(self.device)) if rc_average else None
                outs.append(self.to_predictions(out, out_rc))
        else:
            for tokens, lengths in eval_batches(split.tokens, block, batch_size):
                tokens, lengths = tokens.to(self.device), lengths.to(self.device)
                out = self.head(self.features(tokens, lengths))
                out_rc = None
                if rc_average:
                    rc_tokens = reverse_complement_padded(tokens, lengths)
                    out_rc = self.head(self.features(rc_tokens, lengths))
                outs.append(self.to_predictions(out, out_rc))
        width = len(self.hparams["config"]["head"]["classes"]) or 1
        local = torch.cat(outs) if outs else torch.zeros(0, width, device=self.device)
        if was_training:
            self.train()
            if self.probe:
                self.model.eval()
        local = local.float()
        if world > 1:  # the strategy has Fabric's world_size and all_gather
            local = gather_blocks(self.trainer.strategy, local, len(split))
        return local.cpu().double().numpy()


def _decay_groups(module: nn.Module, lr: float, weight_decay: float) -> list[dict[str, Any]]:
    """Weight matrices decay; biases, norms, embeddings and GOAT priors do not."""
    decay, no_decay = [], []
    for name, param in module.named_parameters():
        if not param.requires_grad:
            continue
        matrix = param.ndim >= 2 and not name.startswith("embed.") and ".prior." not in name
        (decay if matrix else no_decay).append(param)
    return [
        {"params": decay, "lr": lr, "weight_decay": weight_decay},
        {"params": no_decay, "lr": lr, "weight_decay": 0.0},
    ]


def evaluate_predictions(task: str, labels: np.ndarray, preds: np.ndarray) -> dict[str, float]:
    """Metrics plus the loss the head optimises (CE in nats; MSE in label units)."""
    if task == "classification":
        metrics = classification_metrics(labels, preds)
        picked = np.clip(preds[np.arange(labels.size), labels], 1e-12, 1.0)
        metrics["loss"] = float(-np.log(picked).mean())
    else:
        metrics = regression_metrics(labels, preds[:, 0])
        metrics["loss"] = metrics["mse"]
    return metrics


class StepDataModule(pl.LightningDataModule):
    """Per-step training batches; the loader is built once ranks are known (inside ``fit``)."""

    def __init__(
        self,
        split: Split,
        plan: StepPlan,
        total_steps: int,
        features: tuple[Tensor, Tensor | None] | None,
    ) -> None:
        super().__init__()
        self.split, self.plan, self.total_steps, self.features = split, plan, total_steps, features

    def train_dataloader(self) -> torch.utils.data.DataLoader:
        from goatdna.training.data import ResumingSampler

        trainer = self.trainer
        assert trainer is not None
        dataset = StepBatches(self.split, self.plan, self.total_steps, trainer.global_rank,
                              trainer.world_size, self.features)  # fmt: skip
        # starts at the restored global step, so a resumed run continues with the next batch
        sampler = ResumingSampler(self.total_steps, lambda: trainer.global_step)
        return torch.utils.data.DataLoader(dataset, batch_size=None, sampler=sampler)


# ------------------------------------------------------------------------------ lifecycle
class FinetuneLifecycle(pl.Callback):
    """Per optimizer step: metrics row; per epoch end: validation, best.ckpt, last.ckpt."""

    def __init__(
        self,
        run: RunDir,
        task: TaskData,
        steps_per_epoch: int,
        features: dict[str, tuple[Tensor, Tensor | None]] | None,
    ) -> None:
        self.run = run
        self.data = task
        self.steps_per_epoch = steps_per_epoch
        self.features = features
        self.metrics = MetricsCSV(run.metrics_csv, metric_columns(task.task))
        self.selection = SELECTION_METRIC[task.task]
        self.best_value = math.nan
        self.best_step = -1
        self.last_val: dict[str, float] = {}
        self.last_train_loss = math.nan
        self.elapsed_before = 0.0
        self._session_start = time.perf_counter()
        self._seen_step = 0
        self._last_saved = -1
        kill = os.environ.get(KILL_AFTER_CHECKPOINT_ENV)
        self._kill_step = int(kill) if kill else None

    def state_dict(self) -> dict[str, Any]:
        return {
            "best_value": self.best_value,
            "best_step": self.best_step,
            "last_val": dict(self.last_val),
            "last_train_loss": self.last_train_loss,
            "elapsed_seconds": self.elapsed_seconds,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best_value = float(state["best_value"])
        self.best_step = int(state["best_step"])
        self.last_val = {k: float(v) for k, v in state["last_val"].items()}
        self.last_train_loss = float(state["last_train_loss"])
        self.elapsed_before = float(state["elapsed_seconds"])

    @property
    def elapsed_seconds(self) -> float:
        return self.elapsed_before + (time.perf_counter() - self._session_start)

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self._session_start = time.perf_counter()
        self._seen_step = trainer.global_step
        self._last_saved = trainer.global_step if trainer.global_step else -1
        if trainer.is_global_zero:
            self.metrics.start(resume_step=trainer.global_step or None)

    def _better(self, value: float) -> bool:
        if math.isnan(value):
            return False
        if math.isnan(self.best_value):
            return True
        if HIGHER_IS_BETTER[self.selection]:
            return value > self.best_value
        return value < self.best_value

    def validate(self, pl_module: SequenceTaskModule, split: str) -> dict[str, float]:
        features = self.features.get(split) if self.features else None
        preds = pl_module.predict_rows(
            self.data.splits[split], features, pl_module.ft.trainer.eval_batch_size,
            pl_module.ft.backbone.rc_average,
        )  # fmt: skip
        return evaluate_predictions(self.data.task, self.data.splits[split].labels, preds)

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        step = trainer.global_step
        if step == self._seen_step:
            return
        self._seen_step = step
        cfg = pl_module.ft.trainer
        final = step >= trainer.max_steps
        epoch_end = step % self.steps_per_epoch == 0 or final
        row: dict[str, Any] = {}
        if step % cfg.log_every == 0 or epoch_end:
            loss = trainer.strategy.reduce(
                torch.tensor(pl_module.take_train_loss(), device=pl_module.device), reduce_op="mean"
            )
            self.last_train_loss = float(loss)
            lrs = trainer.optimizers[0].param_groups
            row.update(
                train_loss=self.last_train_loss,
                lr_head=float(lrs[0]["lr"]),
                lr_backbone=float(lrs[-1]["lr"]) if not pl_module.probe else 0.0,
            )
        improved = False
        if epoch_end:
            self.last_val = self.validate(pl_module, "val")
            row["val_loss"] = self.last_val["loss"]
            for name, value in self.last_val.items():
                if name != "loss":
                    row[f"val_{name}"] = value
            pl_module.log(f"val_{self.selection}", self.last_val[self.selection], prog_bar=True,
                          logger=False)  # fmt: skip
            if self._better(self.last_val[self.selection]):
                self.best_value, self.best_step, improved = (
                    self.last_val[self.selection],
                    step,
                    True,
                )
        if row:
            row["step"] = step
            row["epoch"] = round(step / self.steps_per_epoch, 4)
            row["elapsed_s"] = round(self.elapsed_seconds, 3)
            if trainer.is_global_zero:
                self.metrics.append(row)
        if improved:
            self._save(trainer, self.run.best_ckpt)
        if epoch_end:
            self._save(trainer, self.run.last_ckpt)
            self._last_saved = step
            if self._kill_step == step:
                os.kill(os.getpid(), signal.SIGKILL)

    def on_train_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if self._last_saved != trainer.global_step:
            self._save(trainer, self.run.last_ckpt)
            self._last_saved = trainer.global_step

    def _save(self, trainer: pl.Trainer, path: Path) -> None:
        """Through a temporary name, renamed by rank 0 once complete (as `RunLifecycle` does)."""
        module = trainer.lightning_module
        if not all(bool(torch.isfinite(p).all()) for p in module.parameters()):
            raise GoatDNAError(
                f"weights became non-finite at step {trainer.global_step}; not checkpointed. "
                "Lower --lr/--backbone-lr, then start over"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        trainer.save_checkpoint(tmp, weights_only=False)
        if trainer.is_global_zero:
            os.replace(tmp, path)
        trainer.strategy.barrier("goatdna-finetune-checkpoint")


# ------------------------------------------------------------------------------ probe cache
@torch.no_grad()
def embed_split(
    backbone: DNADecoder, pool: str, split: Split, batch_size: int, both_strands: bool, device: Any
) -> tuple[Tensor, Tensor | None]:
    """Pooled features of every row (and of its reverse complement), float32 on the CPU."""
    forward: list[Tensor] = []
    reverse: list[Tensor] = []
    for tokens, lengths in eval_batches(split.tokens, range(len(split)), batch_size):
        tokens, lengths = tokens.to(device), lengths.to(device)
        forward.append(pool_hidden(hidden_states(backbone, tokens), lengths, pool).float().cpu())
        if both_strands:
            rc = reverse_complement_padded(tokens, lengths)
            reverse.append(pool_hidden(hidden_states(backbone, rc), lengths, pool).float().cpu())
    return torch.cat(forward), (torch.cat(reverse) if both_strands else None)


def probe_features(
    run: RunDir,
    resolved: dict[str, Any],
    backbone: DNADecoder,
    task: TaskData,
    config: FinetuneConfig,
    device: Any,
    write: bool,
) -> dict[str, tuple[Tensor, Tensor | None]]:
    """Embeddings of every split, from RUN_DIR/cache when the key matches, else computed now."""
    key_source = json.dumps(
        {"inputs": resolved["inputs"], "pool": config.backbone.pool,
         "max_length": config.task.max_length, "rc": _needs_rc(config), "seed": config.seed,
         "val_fraction": config.task.val_fraction},
        sort_keys=True,
    )  # fmt: skip
    key = hashlib.sha256(key_source.encode()).hexdigest()
    path = run.root / CACHE_DIR / "probe_features.pt"
    if path.is_file():
        try:
            cached = torch.load(path, map_location="cpu", weights_only=True)
            if cached.get("key") == key:
                return {s: (v["forward"], v.get("reverse")) for s, v in cached["splits"].items()}
        except Exception:  # a damaged cache is recomputed
            pass
    backbone = backbone.to(device).eval()
    features = {
        name: embed_split(backbone, config.backbone.pool, split,
                          config.trainer.eval_batch_size, _needs_rc(config), device)
        for name, split in task.splits.items()
    }  # fmt: skip
    backbone.cpu()
    if write:
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "key": key,
            "splits": {
                s: {"forward": f, **({"reverse": r} if r is not None else {})}
                for s, (f, r) in features.items()
            },
        }
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        torch.save(payload, tmp)
        os.replace(tmp, path)
    return features


def _needs_rc(config: FinetuneConfig) -> bool:
    return config.backbone.rc_augment or config.backbone.rc_average


# ------------------------------------------------------------------------------ the loop
FINETUNE_SECTIONS = ("task", "backbone", "optim", "trainer", "seed")


def _is_global_zero() -> bool:
    env = os.environ
    if "RANK" in env:
        return int(env["RANK"]) == 0
    return int(env.get("NODE_RANK", "0")) == 0 and int(env.get("LOCAL_RANK", "0")) == 0


class _DropTips(logging.Filter):
    """Lightning logs a product tip on every Trainer; keep the console for the run's own lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Tip:" not in record.getMessage()


def _quiet_lightning_tips() -> None:
    log = logging.getLogger("pytorch_lightning.utilities.rank_zero")
    if not any(isinstance(f, _DropTips) for f in log.filters):
        log.addFilter(_DropTips())


def _precision(config: FinetuneConfig) -> str:
    if config.trainer.precision != "auto":
        return config.trainer.precision
    gpu = config.trainer.accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available()
    if gpu:
        return "bf16-mixed" if torch.cuda.is_bf16_supported() else "16-mixed"
    return "32-true"


def load_backbone(path: str) -> tuple[DNADecoder, dict[str, Any]]:
    """The pretrained backbone; a fine-tuned classifier is refused (its head would be dropped)."""
    model, config = load_checkpoint(path, "cpu")
    if is_classifier_config(config):
        raise GoatDNAError(
            f"{path}: is a fine-tuned classifier (task {config['head']['task']}, classes "
            f"{config['head'].get('classes')}); finetune starts from a pretrained backbone: pass "
            "the pretraining run's checkpoint (e.g. runs/goat/checkpoints/best.ckpt)"
        )
    return model, config


def resolve(config: FinetuneConfig, task: TaskData, model_config: dict[str, Any],
            backbone_sha: str, total_steps: int, steps_per_epoch: int) -> dict[str, Any]:  # fmt: skip
    """config.yaml: the sections, the backbone's model config, the resolved head, input hashes."""
    out = to_dict(config)
    out["model"] = dict(model_config)
    out["head"] = {
        "task": task.task,
        "classes": list(task.classes),
        "n_outputs": task.n_outputs,
        "label_mean": task.label_mean,
        "label_std": task.label_std,
        "steps_per_epoch": steps_per_epoch,
        "total_steps": total_steps,
    }
    out["inputs"] = {"backbone_sha256": backbone_sha, **{f"{k}_sha256": v for k, v in
                                                          task.sha256.items()}}  # fmt: skip
    out["goatdna_version"] = __version__
    return out


def finetune(
    config: FinetuneConfig, run_dir: str | Path, *, resume: bool = False, force: bool = False
) -> dict[str, Any]:
    """Fine-tune ``config.backbone.checkpoint`` on ``config.task`` into ``run_dir``; returns
    the summary (also written to summary.json). Raises GoatDNAError for user errors."""
    wall_start = time.perf_counter()
    if not config.backbone.checkpoint:
        raise GoatDNAError("--checkpoint is required (a pretrained .ckpt)")
    backbone, backbone_config = load_backbone(config.backbone.checkpoint)
    task = load_task(config.task, config.seed)
    plan = StepPlan(len(task.splits["train"]), config.trainer.batch_size, config.seed,
                    config.backbone.rc_augment)  # fmt: skip
    total_steps = plan.steps_per_epoch * config.trainer.epochs
    ckpt = Path(config.backbone.checkpoint)
    backbone_sha = file_sha256(ckpt) if ckpt.is_file() else str(ckpt)
    resolved = resolve(config, task, backbone_config["model"], backbone_sha, total_steps,
                       plan.steps_per_epoch)  # fmt: skip

    run = RunDir(Path(run_dir))
    is_zero = _is_global_zero()
    if is_zero:
        ckpt_path = run.prepare(resolved, resume=resume, force=force)
    else:
        ckpt_path = run.last_ckpt if resume else None

    _quiet_lightning_tips()
    pl.seed_everything(config.seed, workers=True, verbose=False)
    module = SequenceTaskModule(resolved)
    module.model.load_state_dict(backbone.state_dict())
    accelerator_gpu = config.trainer.accelerator in ("auto", "gpu", "cuda")
    device = torch.device("cuda" if accelerator_gpu and torch.cuda.is_available() else "cpu")
    features = None
    if config.backbone.mode == "probe":
        features = probe_features(run, resolved, module.model, task, config, device, is_zero)
        module.head.set_standardization(features["train"][0])
    else:  # the pretrained backbone's features of (up to) the first 512 train rows
        sample = Split(task.splits["train"].tokens[:512], task.splits["train"].labels[:512])
        first, _ = embed_split(module.model, config.backbone.pool, sample,
                               config.trainer.eval_batch_size, False, device)  # fmt: skip
        module.model.cpu()
        module.head.set_standardization(first)

    lifecycle = FinetuneLifecycle(run, task, plan.steps_per_epoch, features)
    callbacks: list[Any] = [lifecycle]
    if config.trainer.progress_bar:
        from pytorch_lightning.callbacks import RichProgressBar

        callbacks.append(RichProgressBar(leave=True))
    trainer = pl.Trainer(
        accelerator=config.trainer.accelerator,
        devices=parse_devices(config.trainer.devices),
        num_nodes=config.trainer.num_nodes,
        strategy=config.trainer.strategy,
        precision=_precision(config),  # type: ignore[arg-type]
        max_steps=total_steps,
        max_epochs=-1,
        gradient_clip_val=config.optim.grad_clip or None,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        logger=False,
        callbacks=callbacks,
        enable_checkpointing=False,
        enable_progress_bar=config.trainer.progress_bar,
        enable_model_summary=False,
        use_distributed_sampler=False,
        default_root_dir=str(run.root),
    )
    datamodule = StepDataModule(task.splits["train"], plan, total_steps,
                                features.get("train") if features else None)  # fmt: skip
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*dataloader is not resumable.*")
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=".*isinstance\\(treespec, LeafSpec\\).*")
        warnings.filterwarnings("ignore", message=".*module\\(s\\) in eval mode.*")  # probe
        trainer.fit(
            module,
            datamodule=datamodule,
            ckpt_path=str(ckpt_path) if ckpt_path else None,
            weights_only=True,
        )

    # the best checkpoint's weights, evaluated on val and test
    best = run.best_ckpt if run.best_ckpt.is_file() else run.last_ckpt
    trainer.strategy.barrier("goatdna-finetune-best")
    state = torch.load(best, map_location="cpu", weights_only=True)["state_dict"]
    module.load_state_dict(state)
    results = {
        split: lifecycle.validate(module, split) for split in task.splits if split != "train"
    }
    summary: dict[str, Any] = {
        "task": task.task,
        "classes": task.classes,
        "mode": config.backbone.mode,
        "positional": backbone.config.positional,
        "params": sum(p.numel() for p in module.parameters()),
        "trainable_params": sum(p.numel() for p in module.parameters() if p.requires_grad),
        "steps": trainer.global_step,
        "epochs": config.trainer.epochs,
        "best_step": lifecycle.best_step,
        "selection_metric": lifecycle.selection,
        "train_loss": lifecycle.last_train_loss,
        "val": results["val"],
        "test": results.get("test"),
        "rows": {s: len(v) for s, v in task.splits.items()},
        "truncated_rows": {s: v.truncated for s, v in task.splits.items()},
        "device": str(trainer.strategy.root_device.type),
        "precision": _precision(config),
        "world_size": trainer.world_size,
        "wall_seconds": lifecycle.elapsed_before + (time.perf_counter() - wall_start),
        "goatdna_version": __version__,
    }
    if task.task == "classification":
        summary["class_balance"] = {
            s: class_balance(v.labels, task.classes) for s, v in task.splits.items()
        }
    if trainer.is_global_zero:
        run.write_summary(summary)
    return summary
