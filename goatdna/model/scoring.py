"""The one scoring primitive: per-position log-probabilities of token sequences under a model.

Validation loss, `evaluate`, variant scores and likelihood tracks are all built on
`target_log_probs`, so one number never has two definitions: the log-softmax over the model's
whole vocabulary (A C G T N, as in the training loss) evaluated at the next base, float32, with
N targets (``IGNORE_TARGET``) masked out.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .vocab import N

IGNORE_TARGET = N
"""Target id that is never scored: the N token (unknown base)."""


def target_log_probs(logits: Tensor, targets: Tensor) -> Tensor:
    """``log p(targets | logits)`` per position: logits (B, L, V), targets (B, L) -> (B, L) float32.

    Positions whose target is N hold 0.0 (they are not scored); use ``targets != IGNORE_TARGET``
    as the mask when averaging.
    """
    logp = F.log_softmax(logits.float(), dim=-1)  # (B, L, V)
    counted = targets != IGNORE_TARGET
    safe = torch.where(counted, targets, torch.zeros_like(targets))
    picked = logp.gather(-1, safe.unsqueeze(-1)).squeeze(-1)  # (B, L)
    return torch.where(counted, picked, torch.zeros_like(picked))


@torch.no_grad()
def sequence_log_probs(model: nn.Module, tokens: Tensor, start_pos: int = 0) -> Tensor:
    """Score whole sequences: tokens (B, L) at positions start_pos.. -> (B, L - 1) float32.

    Entry ``t - 1`` is ``log p(tokens[:, t] | tokens[:, :t])`` for t = 1..L-1 (position 0 has no
    prediction); N targets hold 0.0. The sum over a row is the sequence's log-likelihood LL(s).
    """
    if tokens.dim() != 2 or tokens.shape[1] < 2:
        raise ValueError(f"tokens must be (B, L) with L >= 2, got shape {tuple(tokens.shape)}")
    logits = model(tokens[:, :-1], start_pos)  # (B, L - 1, V)
    return target_log_probs(logits, tokens[:, 1:])


def next_token_loss(logits: Tensor, targets: Tensor, reduction: str = "mean") -> Tensor:
    """Cross-entropy of logits (B, L, V) against targets (B, L), ignoring N (``IGNORE_TARGET``).

    The negative of `target_log_probs`. ``mean`` averages over the counted targets (0 when there
    are none), ``sum`` adds them, ``none`` returns (B, L) with zeros at ignored targets.
    """
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    losses = -target_log_probs(logits, targets)  # (B, L)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    count = (targets != IGNORE_TARGET).sum().clamp(min=1)
    return losses.sum() / count
