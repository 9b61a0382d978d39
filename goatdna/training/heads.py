"""What a sequence-task head is trained and chosen by, for both of its fitters.

The run (`training.finetune`, through `loop.fit`) and the probe sweep (`training.probe`, one head
per layer and pooling) train heads alike and pick the best one alike: the selection metric of
the task, the metrics and loss of a set of predictions, and AdamW with linear warmup then cosine.
They live here, below both, so that neither imports the other for them (`finetune` uses `probe`;
`probe` used to reach back into `finetune`, a cycle the import contracts in pyproject.toml now
refuse).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch
from torch import nn

from goatdna.training.finetune_config import FinetuneOptimConfig
from goatdna.training.metrics import classification_metrics, regression_metrics
from goatdna.training.module import lr_multiplier, parameter_groups

SELECTION_METRIC = {"classification": "mcc", "regression": "mse"}
"""The validation number that picks best.ckpt and a sweep's pair, by task."""
NON_FINITE_HINT = "Lower --lr/--backbone-lr"
"""What to change when a head's training loss becomes NaN/inf (`loop.LoopSpec`)."""


def _decay_groups(module: nn.Module, lr: float, weight_decay: float) -> list[dict[str, Any]]:
    """Pretraining's weight-decay split (`parameter_groups`) at this learning rate."""
    return [{**group, "lr": lr} for group in parameter_groups(module, weight_decay)]


def head_optimizer(
    head: nn.Module, backbone: nn.Module | None, optim: FinetuneOptimConfig, total_steps: int
) -> tuple[torch.optim.Optimizer, Any]:
    """AdamW over the head (and the backbone, when it trains) at their learning rates; linear
    warmup, then cosine to zero. The run's optimizer and the probe sweep's."""
    groups = [_decay_groups(head, optim.head_lr, optim.weight_decay)]
    if backbone is not None:
        groups.append(_decay_groups(backbone, optim.backbone_lr, optim.weight_decay))
    flat = [g for pair in groups for g in pair if g["params"]]
    optimizer = torch.optim.AdamW(flat, betas=(0.9, 0.98))
    warmup = int(optim.warmup_fraction * total_steps)
    schedule = functools.partial(lr_multiplier, warmup=warmup, total=total_steps, floor=0.0)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)


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
