"""The decoder and its positional schemes (torch only, no other goatdna imports: the bottom
layer; `goat_attention`, the converter from the authors' package, raises its own
`GoatAttentionConversionError`, a `ValueError`).

GOAT's prior (`goat.GoatPrior`) is packed into the queries and keys so that one standard
SDPA/FlashAttention call computes attention with the prior; RoPE (`rope`) is the baseline.

`ModelConfig` (a plain dataclass) imports at once; every other name loads its module, and with
it torch, on first use: the run configs that hold a `ModelConfig` (`goatdna.training.config`)
are read by the CLI to build its flags, and ``goatdna --help`` stays free of torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .config import ModelConfig

if TYPE_CHECKING:  # type checkers see the names; at run time each loads on first use
    from .cache import KVCache
    from .flops import flops_per_token
    from .goat import GoatPrior
    from .goat_attention import (
        GoatAttentionConversionError,
        from_goat_attention,
        goat_attention_config,
        goat_attention_kwargs,
        goat_attention_state_dict,
    )
    from .scoring import (
        IGNORE_TARGET,
        next_token_loss,
        sequence_log_probs,
        target_log_probs,
    )
    from .transformer import DNADecoder

_HOMES = {
    "KVCache": "cache",
    "flops_per_token": "flops",
    "GoatPrior": "goat",
    "GoatAttentionConversionError": "goat_attention",
    "from_goat_attention": "goat_attention",
    "goat_attention_config": "goat_attention",
    "goat_attention_kwargs": "goat_attention",
    "goat_attention_state_dict": "goat_attention",
    "IGNORE_TARGET": "scoring",
    "next_token_loss": "scoring",
    "sequence_log_probs": "scoring",
    "target_log_probs": "scoring",
    "DNADecoder": "transformer",
}

__all__ = [
    "IGNORE_TARGET",
    "DNADecoder",
    "GoatAttentionConversionError",
    "GoatPrior",
    "KVCache",
    "ModelConfig",
    "flops_per_token",
    "from_goat_attention",
    "goat_attention_config",
    "goat_attention_kwargs",
    "goat_attention_state_dict",
    "next_token_loss",
    "sequence_log_probs",
    "target_log_probs",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value  # once loaded, a plain module attribute
    return value
