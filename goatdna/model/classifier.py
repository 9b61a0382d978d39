"""A sequence-level head on a DNADecoder backbone: pooled hidden states -> classes or a value.

The backbone is a causal decoder, so right-padding never changes the hidden state of a real
position: sequences of different lengths are padded on the right and the padding is masked out
of the pooling. ``pool='mean'`` averages the final (normed) hidden states of the real positions;
``pool='last'`` takes the last real position, which has attended to the whole sequence.
Reverse-complement averaging (``rc_average``) runs both strands and averages the outputs
(probabilities for classification, values for regression), so a sequence and its reverse
complement get the same prediction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch
from torch import Tensor, nn

from .transformer import DNADecoder
from .vocab import COMPLEMENT, N

PAD_TOKEN = N
"""Padding is N (a token the backbone knows); causal attention keeps it out of real positions."""

COMPLEMENT_TOKENS = COMPLEMENT


def pad_sequences(sequences: Sequence[Any]) -> tuple[Tensor, Tensor]:
    """Right-pad token sequences (arrays or tensors of ids 0..4) with N: (B, L_max) int64 ids
    and (B,) lengths."""
    rows = [torch.as_tensor(s).long() for s in sequences]
    lengths = torch.tensor([r.numel() for r in rows], dtype=torch.long)
    out = torch.full((len(rows), int(lengths.max())), PAD_TOKEN, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : row.numel()] = row
    return out, lengths


def hidden_states(backbone: DNADecoder, tokens: Tensor) -> Tensor:
    """tokens (B, L) -> final normed hidden states (B, L, d_model): the input to the LM head."""
    return backbone.hidden(tokens)


def pool_hidden(hidden: Tensor, lengths: Tensor, pool: str) -> Tensor:
    """hidden (B, L, D), lengths (B,) -> (B, D) over the first ``lengths[b]`` positions."""
    if pool == "last":
        index = (lengths - 1).clamp(min=0).view(-1, 1, 1).expand(-1, 1, hidden.shape[-1])
        return hidden.gather(1, index).squeeze(1)
    positions = torch.arange(hidden.shape[1], device=hidden.device)
    mask = (positions[None, :] < lengths[:, None]).to(hidden.dtype)  # (B, L)
    summed = (hidden * mask[..., None]).sum(dim=1)
    return summed / lengths.clamp(min=1).to(hidden.dtype)[:, None]


def reverse_complement_padded(tokens: Tensor, lengths: Tensor) -> Tensor:
    """Reverse complement of each row's first ``lengths[b]`` tokens, still right-padded."""
    B, L = tokens.shape
    positions = torch.arange(L, device=tokens.device).expand(B, L)
    source = (lengths[:, None] - 1 - positions).clamp(min=0)  # (B, L)
    flipped = tokens.gather(1, source)
    table = torch.tensor(COMPLEMENT_TOKENS, device=tokens.device, dtype=tokens.dtype)
    out = table[flipped.long()].to(tokens.dtype)
    return torch.where(positions < lengths[:, None], out, torch.full_like(out, PAD_TOKEN))


class SequenceHead(nn.Module):
    """Standardise, dropout, one linear layer: pooled features -> ``n_outputs`` (logits or a value).

    Pooled hidden states of different sequences differ by little next to their common mean, so
    the features are centred and scaled with statistics of the training set (``center``,
    ``scale``: buffers, saved with the head) before the linear layer; without that a linear
    probe barely moves at ordinary learning rates.
    """

    center: Tensor  # buffers, declared for the type checker
    scale: Tensor

    def __init__(self, d_model: int, n_outputs: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.register_buffer("center", torch.zeros(d_model))
        self.register_buffer("scale", torch.ones(d_model))
        self.dropout = nn.Dropout(dropout)
        self.linear = nn.Linear(d_model, n_outputs)
        nn.init.normal_(self.linear.weight, std=0.02)
        nn.init.zeros_(self.linear.bias)

    @torch.no_grad()
    def set_standardization(self, features: Tensor) -> None:
        """Centre and scale from training features (N, d_model)."""
        features = features.double()
        self.center.copy_(features.mean(0).to(self.center.dtype))
        self.scale.copy_(features.std(0).clamp(min=1e-6).to(self.scale.dtype))

    def forward(self, features: Tensor) -> Tensor:
        x = (features - self.center) / self.scale
        return self.linear(self.dropout(x))  # (B, n_outputs)


class SequenceClassifier(nn.Module):
    """Backbone + pooling + head. ``model`` and ``head`` are the state-dict prefixes, so the
    backbone of a fine-tuned checkpoint still loads as a plain language model."""

    def __init__(
        self,
        backbone: DNADecoder,
        n_outputs: int,
        pool: Literal["mean", "last"] = "mean",
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        self.model = backbone
        self.head = SequenceHead(backbone.config.d_model, n_outputs, dropout)
        self.pool = pool

    def features(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """tokens (B, L) right-padded, lengths (B,) -> pooled features (B, d_model)."""
        return pool_hidden(hidden_states(self.model, tokens), lengths, self.pool)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        return self.head(self.features(tokens, lengths))  # (B, n_outputs)


def is_classifier_config(config: dict) -> bool:
    """Whether a checkpoint's run config is a fine-tuned classifier's (it has a ``head`` section)."""
    return isinstance(config.get("head"), dict) and "task" in config["head"]


def strand_average(outputs: Tensor, outputs_rc: Tensor, classification: bool) -> Tensor:
    """Average of the two strands' outputs: probabilities (classification) or values."""
    if classification:
        return 0.5 * (outputs.softmax(-1) + outputs_rc.softmax(-1))
    return 0.5 * (outputs + outputs_rc)
