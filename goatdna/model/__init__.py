"""The decoder and its positional schemes (torch only, no other goatdna imports: the bottom
layer; `goat_attention`, the converter from the authors' package, raises its own
`GoatAttentionConversionError`, a `ValueError`).

GOAT's prior (`goat.GoatPrior`) is packed into the queries and keys so that one standard
SDPA/FlashAttention call computes attention with the prior; RoPE (`rope`) is the baseline.
"""

from .cache import KVCache
from .config import ModelConfig
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
