"""The LightningModule: next-base cross-entropy, AdamW, warmup + cosine, a NaN guard.

Checkpoint contract (the analysis code reads checkpoints without importing this package):
``state_dict`` keys are ``"model." + <DNADecoder key>`` and ``hyper_parameters["config"]`` is the
resolved `RunConfig` as a plain dict, so ``torch.load(..., weights_only=True)`` works.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import pytorch_lightning as pl
import torch
from torch import Tensor, nn

from goatdna.errors import GoatDNAError
from goatdna.model import IGNORE_TARGET, DNADecoder, next_token_loss
from goatdna.training.config import OptimConfig, run_config_from_dict


class NonFiniteLossError(GoatDNAError):
    """The training loss became NaN or infinite; the step was not applied."""


def lr_multiplier(step: int, *, warmup: int, total: int, floor: float) -> float:
    """LR factor for optimizer update ``step`` (0-based): linear warmup, then cosine to ``floor``.

    Update 0 already uses ``1/warmup`` of the peak (a zero first step would waste a batch).
    """
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


WRAPPER_PREFIXES = ("_fsdp_wrapped_module.", "_orig_mod.", "_checkpoint_wrapped_module.")
"""Name parts that FSDP, torch.compile and activation checkpointing insert into parameter names."""


def clean_param_name(name: str) -> str:
    """A parameter's name as in the unwrapped model (``blocks.0.attn.qkv.weight``)."""
    for prefix in WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    return name


def parameter_groups(
    model: nn.Module, weight_decay: float, ndims: dict[str, int] | None = None
) -> list[dict[str, Any]]:
    """Two AdamW groups: weight matrices decay; norms, embeddings and GOAT priors do not.

    Decaying the embedding would shrink rare-token rows toward zero, and the prior's spectral
    weights, slopes and sinks are a handful of scalars per head that define positions: pulling
    them to zero would pull GOAT back to position-free attention. ``ndims`` (clean name ->
    dimensions, taken before wrapping) decides what a matrix is: FSDP's ``use_orig_params``
    turns every parameter into a flat 1-D shard, so its own ``ndim`` no longer tells.
    """
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        name = clean_param_name(name)
        is_matrix = (ndims[name] if ndims is not None else param.ndim) >= 2
        is_embedding = name.startswith("embed.")
        is_prior = ".prior." in name
        (decay if is_matrix and not is_embedding and not is_prior else no_decay).append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def build_optimizer(
    model: nn.Module,
    optim: OptimConfig,
    total_steps: int,
    on_cuda: bool,
    ndims: dict[str, int] | None = None,
):
    """AdamW (fused kernels on CUDA) and its per-step LambdaLR schedule.

    ``optim.prior_lr_scale != 1`` moves the GOAT prior's parameters into a third group whose LR
    is scaled (the schedule multiplies each group's own LR); at 1 the groups stay as they were,
    so existing checkpoints' optimizer states still load.
    """
    groups = parameter_groups(model, optim.weight_decay, ndims)
    prior = {id(p) for name, p in model.named_parameters() if ".prior." in clean_param_name(name)}
    if optim.prior_lr_scale != 1.0 and prior:
        no_decay = groups[1]["params"]
        groups[1]["params"] = [p for p in no_decay if id(p) not in prior]
        groups.append(
            {
                "params": [p for p in no_decay if id(p) in prior],
                "weight_decay": 0.0,
                "lr": optim.lr * optim.prior_lr_scale,
            }
        )
    optimizer = torch.optim.AdamW(
        groups,
        lr=optim.lr,
        betas=tuple(optim.betas),
        eps=optim.eps,
        fused=on_cuda,
    )
    schedule = functools.partial(
        lr_multiplier, warmup=optim.warmup_steps, total=total_steps, floor=optim.min_lr_ratio
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    return optimizer, scheduler


class GenomeLM(pl.LightningModule):
    """DNADecoder trained on next-base prediction (N targets ignored by `next_token_loss`)."""

    def __init__(
        self, config: dict[str, Any], data_manifest_sha256: str = "", goatdna_version: str = ""
    ) -> None:
        super().__init__()
        self.save_hyperparameters()  # plain dict + strings: checkpoints load with weights_only
        self.run_config = run_config_from_dict(config)
        self.model = DNADecoder(self.run_config.model)
        # parameter shapes before any wrapping (FSDP flattens them): what weight decay reads
        self._param_ndims = {n: p.ndim for n, p in self.model.named_parameters()}
        self._compiled: Any = None
        self._loss_sum: Tensor | None = None  # sum of micro-batch losses of the current step
        self._loss_terms = 0
        self.last_step_loss: Tensor | None = None  # mean loss of the last optimizer step
        self.last_grad_norm: Tensor | None = None  # its gradient norm before clipping
        self._grad_norm: Tensor | None = None
        self.last_lr = 0.0

    # ----------------------------------------------------------------- forward
    def configure_model(self) -> None:
        if self.run_config.trainer.compile and self._compiled is None:
            # Kept out of the module registry so state_dict keys stay "model.<key>".
            self.__dict__["_compiled"] = torch.compile(self.model)

    def forward(self, idx: Tensor) -> Tensor:
        fn = self._compiled if self._compiled is not None else self.model
        return fn(idx)  # (B, L, V)

    def batch_loss(self, tokens: Tensor, reduction: str = "mean") -> Tensor:
        """tokens (B, L + 1) -> next-base cross-entropy of inputs[:, :-1] against [:, 1:]."""
        tokens = tokens.long()
        logits = self(tokens[:, :-1])  # (B, L, V)
        return next_token_loss(logits, tokens[:, 1:], reduction=reduction)

    # ----------------------------------------------------------------- training
    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        loss = self.batch_loss(batch["tokens"])
        detached = loss.detach()
        self._loss_sum = detached if self._loss_sum is None else self._loss_sum + detached
        self._loss_terms += 1
        # nothing is logged here: a tensor logged per micro-batch costs a host-device sync each
        # time the progress bar reads it; the step's mean loss is logged once per optimizer step
        return loss

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        """Refuse a step whose loss or gradients are not finite on any rank (weights stay good).

        Under fp16 (``16-mixed``) an overflowing gradient is the loss scaler's business: it
        skips that step and lowers the scale, so only the loss is checked there.
        """
        assert self._loss_sum is not None
        step_loss = self._loss_sum / self._loss_terms
        self._loss_sum, self._loss_terms = None, 0
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        grad_norm = torch.nn.utils.get_total_norm(grads) if grads else step_loss.new_zeros(())
        self._grad_norm = grad_norm  # reused by the clipping below (one pass over the grads)
        finite = torch.isfinite(step_loss)
        if not str(self.trainer.precision).startswith("16"):
            finite = finite & torch.isfinite(grad_norm)
        if self.trainer.strategy.reduce_boolean_decision(not bool(finite), all=False):
            what = (
                f"training loss became {float(step_loss)}"
                if not torch.isfinite(step_loss)
                else "gradients became non-finite"
            )
            raise NonFiniteLossError(
                f"{what} at step {self.trainer.global_step + 1}; stopped before applying it. "
                "Lower optim.lr, raise optim.warmup_steps or check the data, then --resume "
                "or start over"
            )
        self.last_step_loss = step_loss
        self.last_grad_norm = grad_norm
        if self.trainer.progress_bar_callback is not None:
            # a Python float, once per optimizer step (the finiteness check above already synced)
            self.log("loss", float(step_loss), prog_bar=True, logger=False, on_step=True)
        self.last_lr = float(optimizer.param_groups[0]["lr"])

    def configure_gradient_clipping(
        self, optimizer: torch.optim.Optimizer, gradient_clip_val=None, gradient_clip_algorithm=None
    ) -> None:
        """Global-norm clipping at optim.grad_clip; FSDP clips through its root module.

        (Lightning's own norm clipping refuses FSDP: plain ``clip_grad_norm_`` would see only
        this rank's shards.)
        """
        max_norm = self.run_config.optim.grad_clip
        if not max_norm:
            return
        root = self.trainer.strategy.model
        if hasattr(root, "clip_grad_norm_") and "FullyShardedDataParallel" in type(root).__name__:
            root.clip_grad_norm_(max_norm)
            return
        params = [p for p in self.parameters() if p.grad is not None]
        torch.nn.utils.clip_grads_with_norm_(params, max_norm, self._grad_norm)

    def weights_are_finite(self) -> bool:
        """True when every weight is finite on every rank (checked before each checkpoint)."""
        local = all(bool(torch.isfinite(p).all()) for p in self.parameters())
        return not self.trainer.strategy.reduce_boolean_decision(not local, all=False)

    def configure_optimizers(self) -> dict[str, Any]:
        on_cuda = self.device.type == "cuda"
        optimizer, scheduler = build_optimizer(
            self.model,
            self.run_config.optim,
            self.run_config.trainer.max_steps,
            on_cuda,
            self._param_ndims,
        )
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step", "frequency": 1},
        }

    # ----------------------------------------------------------------- validation
    @torch.no_grad()
    def validation_totals(self, loader: Any) -> tuple[float, float]:
        """(summed CE over counted targets, number of counted targets), summed over all ranks."""
        was_training = self.training
        self.eval()
        device = self.device
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        count = torch.zeros((), dtype=torch.float64, device=device)
        context = self.trainer.precision_plugin.forward_context()
        with context:
            for batch in loader:
                tokens = batch["tokens"].to(device, non_blocking=True).long()  # (B, W)
                weight = batch["weight"].to(device)  # (B,) 0 for padding rows
                losses = next_token_loss(self(tokens[:, :-1]), tokens[:, 1:], reduction="none")
                counted = (tokens[:, 1:] != IGNORE_TARGET).to(torch.float64)  # (B, L)
                loss_sum += (losses.double() * weight[:, None]).sum()
                count += (counted * weight[:, None]).sum()
        totals = torch.stack([loss_sum, count])
        totals = self.trainer.strategy.reduce(totals, reduce_op="sum")
        if was_training:
            self.train()
        return float(totals[0]), float(totals[1])
