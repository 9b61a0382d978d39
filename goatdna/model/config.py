"""`ModelConfig`: the decoder's shape and its positional scheme, as one dataclass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .vocab import VOCAB_SIZE


@dataclass
class ModelConfig:
    """Shape of a pre-norm decoder (RMSNorm, SwiGLU, no biases) and its positional scheme.

    ``positional='goat'`` splits each head into ``content_dim = head_dim - (2*goat_modes + 2)``
    content dims and ``2*goat_modes + 2`` position dims (see `goatdna.model.goat`); ``'rope'`` rotates
    the full head dim (``rope_extension`` stretches it beyond ``train_length``: position
    interpolation or NTK-aware); ``'alibi'`` is GOAT's slope term alone with ALiBi's fixed slopes
    (2 position dims, `goatdna.model.alibi`); ``'nope'`` has no positional signal but the causal mask. Tokens are the shard ids A C G T N = 0..4; the embedding is padded to
    ``padded_vocab_size`` rows so matmuls stay aligned, and the head predicts ``vocab_size`` classes.
    """

    positional: Literal["goat", "rope", "alibi", "nope"] = "goat"
    n_layers: int = 18
    d_model: int = 768
    n_heads: int = 12
    mlp_hidden: int = 2048
    vocab_size: int = VOCAB_SIZE
    padded_vocab_size: int = 8
    train_length: int = 1024
    norm_eps: float = 1e-5
    init_std: float = 0.02
    tie_embeddings: bool = False
    attention: Literal["auto", "sdpa", "flash", "explicit"] = "auto"
    # GOAT prior
    goat_modes: int = 8
    goat_freq_base: float = 10000.0
    goat_learn_freqs: bool = False
    goat_init: Literal["zero", "alibi"] = "zero"
    goat_mlp_hidden: int = 32
    goat_split_key_bias: bool = True
    # RoPE baseline
    rope_base: float = 10000.0
    rope_extension: Literal["none", "linear", "ntk"] = (
        "none"  # not `rope_scaling`: transformers reserves that name
    )

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        if self.padded_vocab_size < self.vocab_size:
            raise ValueError("padded_vocab_size must be >= vocab_size")
        if self.positional == "alibi" and self.content_dim <= 0:
            raise ValueError(f"ALiBi needs head_dim > 2, got {self.head_dim}")
        if self.positional == "goat" and self.content_dim <= 0:
            raise ValueError(
                f"content_dim = head_dim - (2*goat_modes + 2) = {self.head_dim} - "
                f"{2 * self.goat_modes + 2} = {self.content_dim} must be > 0: "
                "lower goat_modes or raise the head dim (d_model / n_heads)"
            )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def position_dim(self) -> int:
        """d_p: 2R + 2 for GOAT (R cos/sin pairs, the key bias slot, the alignment slot), 2 for
        ALiBi (the key bias's hi/lo slots), 0 for RoPE and NoPE."""
        return {"goat": 2 * self.goat_modes + 2, "alibi": 2}.get(self.positional, 0)

    @property
    def content_dim(self) -> int:
        """d_c: query/key dims that carry content (the full head dim for RoPE and NoPE)."""
        return self.head_dim - self.position_dim
