"""The sequence-task model: a DNADecoder backbone, pooling and a head -> classes or a value.

One class (`SequenceTaskModel`) holds everything a fine-tuned model computes beyond its backbone:
pooling, the head, reverse-complement strand averaging, the softmax and the label scaling of a
regression target. `goatdna finetune` trains it (its training module subclasses it) and
`goatdna predict` runs it, both built from the same typed `SequenceTaskConfig` (a checkpoint's
``head`` section, read strictly).

The backbone is a causal decoder, so right-padding never changes the hidden state of a real
position: sequences of different lengths are padded on the right and the padding is masked out
of the pooling. ``pool='mean'`` averages the hidden states of the real positions (the final
norm's output, or block ``layer``'s); ``pool='last'`` takes the last real position, which has
attended to the whole sequence.
Reverse-complement averaging (``rc_average``) runs both strands and averages the outputs
(probabilities for classification, values for regression), so a sequence and its reverse
complement get the same prediction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
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


@dataclass(frozen=True)
class SequenceTaskConfig:
    """What a fine-tuned model computes beyond its backbone (a checkpoint's ``head`` section).

    Fine-tuning resolves it from the task data and its options and writes it whole, so
    prediction rebuilds the trained model from it alone: no setting is re-read with a default.
    """

    task: Literal["classification", "regression"]
    classes: tuple[str, ...] = ()
    """Class names in output order (classification); empty for regression."""
    label_mean: float = 0.0
    label_std: float = 1.0
    """Regression targets are trained standardised: (label - mean) / std."""
    pool: Literal["mean", "last"] = "mean"
    layer: int | None = None
    """Which hidden states are pooled: block ``layer``'s output (1-based, not normed; what
    ``goatdna embed --layer`` reads) or, None, the final norm's (the LM head's input)."""
    dropout: float = 0.1
    rc_average: bool = False
    """Predict with the mean of both strands' outputs (probabilities, or values)."""
    max_length: int = 1024
    """Longer sequences keep their first ``max_length`` bases, as in training."""

    def __post_init__(self) -> None:
        if self.task == "classification" and len(self.classes) < 2:
            raise ValueError(f"classification needs >= 2 classes, got {list(self.classes)}")
        if self.task == "regression" and self.classes:
            raise ValueError("regression has no classes")
        if not self.label_std > 0:
            raise ValueError(f"label_std must be > 0, got {self.label_std}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.max_length < 1:
            raise ValueError(f"max_length must be >= 1, got {self.max_length}")
        if self.layer is not None and self.layer < 1:
            raise ValueError(f"layer must be >= 1 (or None: the final norm), got {self.layer}")

    @property
    def classification(self) -> bool:
        return self.task == "classification"

    @property
    def n_outputs(self) -> int:
        return len(self.classes) if self.classification else 1


class SequenceTaskModel(nn.Module):
    """Backbone + pooling + head, and the map from head outputs to predictions.

    ``model`` and ``head`` are the state-dict prefixes, so the backbone of a fine-tuned
    checkpoint still loads as a plain language model. ``forward`` gives head outputs (logits, or
    a standardised value); `predict` gives what a user reads (probabilities, or label units).
    """

    def __init__(self, backbone: DNADecoder, config: SequenceTaskConfig) -> None:
        super().__init__()
        if config.layer is not None and config.layer > backbone.n_layers:
            raise ValueError(f"layer {config.layer}: the backbone has {backbone.n_layers} blocks")
        self.model = backbone
        self.task_config = config
        self.head = SequenceHead(backbone.config.d_model, config.n_outputs, config.dropout)

    def features(
        self, tokens: Tensor | None, lengths: Tensor, embeds: Tensor | None = None
    ) -> Tensor:
        """tokens (B, L) right-padded, lengths (B,) -> pooled features (B, d_model).

        ``embeds`` (B, L, d_model) replaces the token lookup (``tokens`` None): attributions
        differentiate through a one-hot input mapped onto the embedding (`DNADecoder.hidden`).
        """
        hidden = self.model.hidden(tokens, layers=self.task_config.layer, embeds=embeds)
        return pool_hidden(hidden, lengths, self.task_config.pool)

    def outputs(
        self, tokens: Tensor | None, lengths: Tensor, embeds: Tensor | None = None
    ) -> Tensor:
        """Head outputs (B, n_outputs): logits, or the standardised value (``embeds``: as in
        `features`)."""
        return self.head(self.features(tokens, lengths, embeds))

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        return self.outputs(tokens, lengths)  # (B, n_outputs)

    def loss(self, outputs: Tensor, labels: Tensor) -> Tensor:
        """Cross-entropy over classes, or MSE against the standardised label."""
        if self.task_config.classification:
            return F.cross_entropy(outputs.float(), labels.long())
        target = (
            labels.to(outputs.dtype) - self.task_config.label_mean
        ) / self.task_config.label_std
        return F.mse_loss(outputs.float().squeeze(-1), target.float())

    def to_predictions(self, outputs: Tensor, outputs_rc: Tensor | None = None) -> Tensor:
        """Head outputs (B, K), and the reverse strands' when averaged -> float32 probabilities
        (B, K), or standardised values (B, 1); `label_units` finishes a regression."""
        outputs = outputs.float()
        if outputs_rc is None:
            return outputs.softmax(-1) if self.task_config.classification else outputs
        outputs_rc = outputs_rc.float()
        if self.task_config.classification:
            return 0.5 * (outputs.softmax(-1) + outputs_rc.softmax(-1))
        return 0.5 * (outputs + outputs_rc)

    def predict(self, tokens: Tensor, lengths: Tensor, both_strands: bool | None = None) -> Tensor:
        """Right-padded tokens -> `to_predictions` of one strand, or of both averaged
        (``both_strands`` None: the trained ``rc_average``)."""
        both = self.task_config.rc_average if both_strands is None else both_strands
        outputs = self.outputs(tokens, lengths)
        rc = self.outputs(reverse_complement_padded(tokens, lengths), lengths) if both else None
        return self.to_predictions(outputs, rc)

    def label_units(self, predictions: Tensor) -> Tensor:
        """`to_predictions` rows (any device) -> float64 on the CPU: probabilities as they are,
        regression values de-standardised (in float64, on the CPU: MPS has no float64)."""
        out = predictions.detach().cpu().double()
        if self.task_config.classification:
            return out
        return out * self.task_config.label_std + self.task_config.label_mean


def is_classifier_config(config: dict[str, Any]) -> bool:
    """Whether a checkpoint's run config is a fine-tuned model's (it has a ``head`` section)."""
    return isinstance(config.get("head"), dict) and "task" in config["head"]
