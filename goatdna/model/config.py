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

    The authors' ``goat.GoatAttention`` (goat-attention 0.1.1) is a set of options here, not a
    separate module (`goatdna.model.from_goat_attention` converts one): ``n_kv_heads`` (grouped
    query heads), ``attention_bias``, ``goat_abs_modes``/``goat_abs_freq_base`` (the key-bias
    MLP's own Fourier modes), ``goat_key_mlp='shared'`` (one MLP for all heads, a per-head gain;
    ``goat_mlp_hidden=None``: its hidden-size rule), ``goat_slope='softplus'``,
    ``goat_init='seeded'``/``'uniform'``, ``goat_alignment_slot=False`` (d_p = 2R + 1),
    ``goat_features='float32'`` (their float32 phases) and ``goat_prior_gate='query_norm'``.
    Every default is goatdna's own prior, unchanged.

    Ablation switches (docs/ablations.md): ``goat_directional=False`` fixes b_r = 0 (no
    parameter), ``goat_key_mlp='none'`` removes the key-only MLP term g_h, ``goat_sink=False`` the
    first-token bump, and ``goat_equal_content=True`` grows each head by d_p so the content dims
    equal RoPE's ``d_model / n_heads`` (values and the output projection grow with it).

    ``goat_qk_layout='authors'`` gives the query/key projections goat-attention's shape: d_h rows
    per head, of which the last d_p are computed by the package and overwritten by the position
    slots (here: carried, never read; their gradient is zero, so training only decays them), and
    keeps the gate's two per-head vectors when the gate is off. The function is the same as
    ``'content'``'s; the parameters are the package's one to one (the paper config's count).
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
    # "llama": RMSNorm, SwiGLU, no MLP biases; "gpt2": LayerNorm, GELU MLP with biases (the
    # paper's genome.py; pair it with attention_bias, tie_embeddings, mlp_hidden = 4 d_model)
    block_style: Literal["llama", "gpt2"] = "llama"
    attention: Literal["auto", "sdpa", "flash", "explicit"] = "auto"
    # GOAT prior
    goat_modes: int = 8
    goat_freq_base: float = 10000.0
    goat_learn_freqs: bool = False
    goat_init: Literal["zero", "alibi", "seeded", "uniform"] = "zero"
    goat_mlp_hidden: int | None = 32  # None: goat-attention's rule, min(2 F, 4) for F features
    goat_split_key_bias: bool = True
    goat_alignment_slot: bool = True  # False: d_p = 2R + 1 (needs goat_split_key_bias false)
    goat_abs_modes: int | None = None  # the key-bias MLP's Fourier modes; None: goat_modes's
    goat_abs_freq_base: float | None = None  # their base; None: goat_freq_base
    goat_key_mlp: Literal["per_head", "shared", "none"] = "per_head"  # none: no g_h (ablation)
    goat_slope: Literal["linear", "softplus"] = "linear"
    goat_features: Literal["float64", "float32"] = "float64"
    goat_prior_gate: Literal["none", "query_norm"] = "none"
    # ablations (docs/ablations.md): each False removes its term and its parameters
    goat_directional: bool = True  # False: b_r = 0, K_rel(t) even in t (no sin terms)
    goat_sink: bool = True  # False: no first-token bump sink_h 1{j=0}
    goat_equal_content: bool = False  # True: head_dim = d_model / n_heads + d_p (RoPE's d_c)
    # "content": q/k projections make the d_c content rows of each head; "authors": goat-attention's
    # full-head q/k projections (d_h rows; the d_p position rows are carried, never read) and its
    # query-norm gate vectors even with the gate off, so its parameters map one to one (GOAT only)
    goat_qk_layout: Literal["content", "authors"] = "content"
    # attention layout (goat-attention's grouped-query heads and linear biases)
    n_kv_heads: int | None = None  # None: n_heads (no grouping)
    attention_bias: bool = False
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
                f"content_dim = head_dim - position_dim = {self.head_dim} - "
                f"{self.position_dim} = {self.content_dim} must be > 0: "
                "lower goat_modes or raise the head dim (d_model / n_heads)"
            )
        if self.kv_heads < 1 or self.n_heads % self.kv_heads:
            raise ValueError(
                f"n_kv_heads ({self.n_kv_heads}) must divide n_heads ({self.n_heads}): "
                "change n_kv_heads"
            )
        if self.kv_heads != self.n_heads and self.positional != "goat":
            raise ValueError(
                f"n_kv_heads ({self.n_kv_heads}) != n_heads is only for positional 'goat': "
                "remove n_kv_heads"
            )
        if not self.goat_alignment_slot and self.goat_split_key_bias:
            raise ValueError(
                "goat_alignment_slot false leaves no slot for the bf16 split: "
                "set goat_split_key_bias false too"
            )
        if self.goat_qk_layout not in ("content", "authors"):
            raise ValueError(
                f"goat_qk_layout must be content or authors, got {self.goat_qk_layout!r}"
            )
        if self.goat_modes < 0 or (self.goat_abs_modes or 0) < 0:
            raise ValueError("goat_modes and goat_abs_modes must be >= 0")
        if self.positional == "goat" and self.goat_modes == 0 and self.goat_abs_modes is None:
            raise ValueError("goat_modes 0 needs goat_abs_modes set (the key-bias MLP's modes)")

    @property
    def head_dim(self) -> int:
        """d_h: ``d_model / n_heads``, plus d_p for GOAT with ``goat_equal_content``."""
        grown = self.positional == "goat" and self.goat_equal_content
        return self.d_model // self.n_heads + (self.position_dim if grown else 0)

    @property
    def position_dim(self) -> int:
        """d_p: 2R + 2 for GOAT (R cos/sin pairs, the key bias slot, the alignment slot; 2R + 1
        without the alignment slot), 2 for ALiBi (the key bias's hi/lo slots), 0 for RoPE and NoPE."""
        goat = 2 * self.goat_modes + 1 + int(self.goat_alignment_slot)
        return {"goat": goat, "alibi": 2}.get(self.positional, 0)

    @property
    def kv_heads(self) -> int:
        """Key/value heads: ``n_kv_heads``, or ``n_heads`` when it is None."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def qk_rows(self) -> int:
        """Rows per head of the query/key projections: d_c, or d_h for GOAT with goat_qk_layout
        'authors' (whose last d_p rows are parameters that nothing reads). Like every goat_*
        option, the layout does nothing for the other schemes (a paper config with
        ``positional`` switched is that scheme's model)."""
        grown = self.positional == "goat" and self.goat_qk_layout == "authors"
        return self.head_dim if grown else self.content_dim

    @property
    def content_dim(self) -> int:
        """d_c: query/key dims that carry content (the full head dim for RoPE and NoPE)."""
        return self.head_dim - self.position_dim
