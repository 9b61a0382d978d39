"""The decoder and its positional schemes (torch only; no other goatdna imports).

GOAT's prior (`goat.GoatPrior`) is packed into the queries and keys so that one standard
SDPA/FlashAttention call computes attention with the prior; RoPE (`rope`) is the baseline.
"""

from .cache import KVCache
from .config import ModelConfig
from .flops import flops_per_token
from .goat import GoatPrior
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
    "GoatPrior",
    "KVCache",
    "ModelConfig",
    "flops_per_token",
    "next_token_loss",
    "sequence_log_probs",
    "target_log_probs",
]
