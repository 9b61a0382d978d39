"""Training FLOPs per token, the denominator of MFU.

``6 N + 12 n_layers d_model T`` (Kaplan et al. 2020; PaLM, Chowdhery et al. 2022, App. B):
``6 N`` for the forward and backward matmuls of the ``N`` weights a token passes through (every
parameter except the embedding table, which is a lookup), plus the attention score and value
products: forward ``2 T d_h`` each per head and layer, times 3 for forward + backward, over the
full ``T``-long context (the usual convention; causal kernels skip about half). GOAT's q'/k' carry
the full head dim, so its attention term equals RoPE's; its prior's MLP runs once per key position
per layer and is counted in ``N``.
"""

from __future__ import annotations

import torch

from .config import ModelConfig


def carried_rows(config: ModelConfig) -> int:
    """GOAT's ``goat_qk_layout: authors``: the query/key weight and bias rows of each head's d_p
    position dims, held (goat-attention's shape) but never multiplied."""
    if config.positional != "goat" or config.goat_qk_layout != "authors":
        return 0
    heads = config.n_heads + config.kv_heads
    per_row = config.d_model + int(config.attention_bias)
    return config.n_layers * heads * config.position_dim * per_row


def matmul_params(config: ModelConfig) -> int:
    """Parameters a token multiplies through: everything but the (untied) embedding table and
    the q/k rows `carried_rows` counts."""
    from .transformer import DNADecoder

    with torch.device("meta"):
        model = DNADecoder(config)
    breakdown = model.param_breakdown()
    total = sum(breakdown.values()) - carried_rows(config)
    return total if config.tie_embeddings else total - breakdown["embedding"]


def flops_per_token(config: ModelConfig, seq_len: int) -> float:
    """Training FLOPs per token at context length ``seq_len``: 6 N + 12 n_layers d_model T."""
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    attention = 12 * config.n_layers * config.n_heads * config.head_dim * seq_len
    return float(6 * matmul_params(config) + attention)
