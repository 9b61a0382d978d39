"""What pretraining optimises: next-base cross-entropy, AdamW, warmup + cosine.

Checkpoint contract (the analysis code reads checkpoints without importing this package):
``state_dict`` keys are ``"model." + <DNADecoder key>`` (the keys of `GenomeLM`) and
``hyper_parameters["config"]`` is the resolved `RunConfig` as a plain dict, so
``torch.load(..., weights_only=True)`` works.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch
from torch import Tensor, nn

from goatdna.model import DNADecoder, ModelConfig, next_token_loss
from goatdna.training.config import OptimConfig


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
    """A parameter's name as in the unwrapped model (``blocks.0.attn.q_proj.weight``)."""
    for prefix in WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    return name


def parameter_groups(
    model: nn.Module,
    weight_decay: float,
    ndims: dict[str, int] | None = None,
    *,
    decay_all: bool = False,
) -> list[dict[str, Any]]:
    """Two AdamW groups: weight matrices decay; norms, embeddings and GOAT priors do not.

    Decaying the embedding would shrink rare-token rows toward zero, and the prior's spectral
    weights, slopes and sinks are a handful of scalars per head that define positions: pulling
    them to zero would pull GOAT back to position-free attention. ``ndims`` (clean name ->
    dimensions, taken before wrapping) decides what a matrix is: FSDP's ``use_orig_params``
    turns every parameter into a flat 1-D shard, so its own ``ndim`` no longer tells.
    ``decay_all`` puts every parameter in the decaying group (the second stays, empty, so the
    optimizer's state has the same two groups either way).
    """
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        name = clean_param_name(name)
        is_matrix = (ndims[name] if ndims is not None else param.ndim) >= 2
        is_embedding = name.startswith("embed.")
        is_prior = ".prior." in name
        decays = decay_all or (is_matrix and not is_embedding and not is_prior)
        (decay if decays else no_decay).append(param)
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
    groups = parameter_groups(model, optim.weight_decay, ndims, decay_all=optim.decay_all)
    prior = {id(p) for name, p in model.named_parameters() if ".prior." in clean_param_name(name)}
    if optim.prior_lr_scale != 1.0 and prior:
        home = groups[0] if optim.decay_all else groups[1]  # where the prior's parameters are
        params = home["params"]
        home["params"] = [p for p in params if id(p) not in prior]
        groups.append(
            {
                "params": [p for p in params if id(p) in prior],
                "weight_decay": home["weight_decay"],
                "lr": optim.lr * optim.prior_lr_scale,
            }
        )
    optimizer = torch.optim.AdamW(
        groups,
        lr=optim.lr,
        betas=(optim.betas[0], optim.betas[1]),
        eps=optim.eps,
        fused=on_cuda,
    )
    schedule = functools.partial(
        lr_multiplier, warmup=optim.warmup_steps, total=total_steps, floor=optim.min_lr_ratio
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    return optimizer, scheduler


class GenomeLM(nn.Module):
    """DNADecoder trained on next-base prediction (N targets ignored by `next_token_loss`).

    ``forward`` returns the loss, so the module Fabric wraps (DDP, FSDP, autocast) computes it:
    under FSDP the forward must go through the root module.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.model = DNADecoder(config)  # the decoder; its loss is this module's forward
        # parameter shapes before any wrapping (FSDP flattens them): what weight decay reads
        self.param_ndims = {n: p.ndim for n, p in self.model.named_parameters()}

    def forward(self, tokens: Tensor, reduction: str = "mean") -> Tensor:
        """tokens (B, L + 1) -> next-base cross-entropy of inputs[:, :-1] against [:, 1:]."""
        tokens = tokens.long()
        logits = self.model(tokens[:, :-1])  # (B, L, V)
        return next_token_loss(logits, tokens[:, 1:], reduction=reduction)
