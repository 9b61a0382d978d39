"""Causal self-attention for GOAT, RoPE, ALiBi and NoPE through one kernel call, three backends.

* ``sdpa``: ``torch.nn.functional.scaled_dot_product_attention`` (default scale ``1/sqrt(d_h)``).
* ``flash``: flash-attn's ``flash_attn_func`` (CUDA, fp16/bf16; layout (B, L, H, D)). Other inputs
  (CPU, float32) fall back to SDPA, so one config serves training on GPU and tests on CPU.
* ``explicit``: materialises the (Lq, Lk) logits and GOAT's log-prior. Reference and analysis only:
  O(L^2) memory.
* ``auto``: ``flash`` when flash-attn is importable, else ``sdpa``.

The causal mask is bottom-aligned: a block of Lq queries ends at the last of the Lk keys (the KV
cache case). SDPA's ``is_causal`` aligns top-left, so it is used only when Lq == Lk; a one-token
step needs no mask; other blocks get an explicit boolean mask.

Padded batches (the Hugging Face wrapper's ``attention_mask``) pass per-row ``positions`` (B, L)
and a boolean ``mask`` (B, 1, Lq, Lk) from `padding_mask` instead: padded keys are masked, each
real token keeps its own absolute position, so a row's outputs are those of the row alone.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .alibi import AlibiPrior
from .cache import LayerCache
from .config import ModelConfig
from .goat import GoatPrior
from .rope import RotaryEmbedding

try:  # optional GPU extra: pip install "goatdna[gpu]"
    from flash_attn import flash_attn_func
except ImportError:  # pragma: no cover - flash-attn is never installed on CPU machines
    flash_attn_func = None

BACKENDS = ("auto", "sdpa", "flash", "explicit")


def flash_available() -> bool:
    return flash_attn_func is not None


def resolve_backend(name: str) -> str:
    """``auto`` -> ``flash`` if flash-attn is importable else ``sdpa``; check the name.

    ``flash`` without flash-attn warns and runs SDPA (same numbers): a checkpoint trained with
    flash on a GPU must still load for analysis on a CPU.
    """
    if name not in BACKENDS:
        raise ValueError(f"attention backend must be one of {', '.join(BACKENDS)}, got {name!r}")
    if name == "auto":
        return "flash" if flash_available() else "sdpa"
    if name == "flash" and not flash_available():
        warnings.warn(
            "attention: flash asked for, but flash-attn is not installed (pip install "
            "'goatdna[gpu]' on a CUDA machine); using torch SDPA",
            stacklevel=2,
        )
        return "sdpa"
    return name


def causal_mask(q_len: int, k_len: int, device: torch.device) -> Tensor:
    """Bottom-aligned causal mask (Lq, Lk): query t sits at key position k_len - q_len + t."""
    i = torch.arange(k_len - q_len, k_len, device=device)[:, None]
    j = torch.arange(k_len, device=device)[None, :]
    return j <= i  # True = may attend


def padding_mask(key_valid: Tensor, q_len: int) -> Tensor:
    """Which keys each query may see in a padded batch -> bool (B, 1, Lq, Lk), True = attend.

    ``key_valid`` (B, Lk) marks the real (unpadded) key columns; the ``q_len`` queries are the
    last columns (query t sits at column Lk - q_len + t, as in `causal_mask`). A query always sees
    its own column, so a padding query's row is never empty (no NaN); real queries never see a
    padding key, so padding changes nothing a real token computes.
    """
    k_len = key_valid.shape[-1]
    causal = causal_mask(q_len, k_len, key_valid.device)  # (Lq, Lk)
    own = (
        torch.arange(k_len, device=key_valid.device)[None, :]
        == torch.arange(k_len - q_len, k_len, device=key_valid.device)[:, None]
    )
    return ((causal & key_valid.bool()[:, None, :]) | own)[:, None]


def attend(q: Tensor, k: Tensor, v: Tensor, backend: str, mask: Tensor | None = None) -> Tensor:
    """Causal attention of packed/rotated q (B, H, Lq, d) over k, v (B, H, Lk, d), bottom-aligned.

    ``mask`` (B, 1, Lq, Lk'), from `padding_mask`, replaces the causal mask (padded batches);
    keys beyond its Lk' columns (a preallocated cache's unwritten slots) are masked out.
    """
    q_len, k_len = q.shape[2], k.shape[2]
    if (
        k.dtype != q.dtype
    ):  # a float32 KV cache read under bf16 autocast: exact, values came from q's dtype
        k, v = k.to(q.dtype), v.to(q.dtype)
    if mask is not None:
        if mask.shape[-1] < k_len:
            mask = F.pad(mask, (0, k_len - mask.shape[-1]), value=False)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if (
        backend == "flash"
        and q.is_cuda
        and q.dtype in (torch.float16, torch.bfloat16)
        and flash_attn_func is not None
    ):
        # flash-attn wants (B, L, H, D); its causal mask is bottom-right aligned (flash-attn >= 2.1)
        out = flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
        return out.transpose(1, 2)  # (B, H, Lq, d)
    if q_len == k_len:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if q_len == 1:
        return F.scaled_dot_product_attention(q, k, v)
    mask = causal_mask(q_len, k_len, q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def explicit_attention(logits: Tensor, v: Tensor) -> Tensor:
    """softmax(logits + causal mask) v with the (B, H, Lq, Lk) logits in memory (reference path)."""
    q_len, k_len = logits.shape[-2:]
    mask = causal_mask(q_len, k_len, logits.device)
    logits = logits.masked_fill(~mask, float("-inf"))
    probs = torch.softmax(logits.float(), dim=-1).to(v.dtype)
    return torch.matmul(probs, v)  # (B, H, Lq, d)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention; positions enter through GOAT's prior, ALiBi, RoPE or
    not at all (NoPE: only the causal mask orders the tokens).

    GOAT's and ALiBi's query/key projections produce only ``content_dim`` dims per head (the
    other ``d_p`` dims of q', k' come from the prior); values and the output keep the full head dim.
    GOAT's ``goat_qk_layout='authors'`` holds goat-attention's full-head q/k weights, of which
    only the content rows are multiplied (`_content`).
    With ``n_kv_heads`` < ``n_heads`` (grouped-query attention, GOAT only) keys and values have
    ``n_kv_heads`` heads, each read by a group of query heads; the cache keeps only those.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.kv_heads = config.kv_heads
        self.head_dim = config.head_dim
        self.qk_dim = config.content_dim  # d_c for GOAT and ALiBi, d_h for RoPE and NoPE
        self.backend = resolve_backend(config.attention)
        H, Hkv, bias = config.n_heads, config.kv_heads, config.attention_bias
        # separate projections, not one fused qkv: each output is contiguous, so RoPE's rotation
        # and GOAT's pack read dense rows, and backward has no concatenation of the three
        # gradients (transformers' Llama layout; peft finds them by these names)
        # goat_qk_layout 'authors': d_h rows per head, the last d_p carried but never read
        self.qk_rows = config.qk_rows
        self.q_proj = nn.Linear(config.d_model, H * self.qk_rows, bias=bias)
        self.k_proj = nn.Linear(config.d_model, Hkv * self.qk_rows, bias=bias)
        self.v_proj = nn.Linear(config.d_model, Hkv * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(H * self.head_dim, config.d_model, bias=bias)
        self.prior: GoatPrior | AlibiPrior | None = None
        self.rope: RotaryEmbedding | None = None
        # set only inside attention_maps.recording(): (layer, q', k', v, mask) -> output
        self.observer: Callable[[int, Tensor, Tensor, Tensor, Tensor | None], Tensor] | None = None
        if config.positional == "goat":
            self.prior = GoatPrior(
                config.n_heads,
                config.head_dim,
                config.goat_modes,
                config.train_length,
                config.goat_freq_base,
                learn_freqs=config.goat_learn_freqs,
                mlp_hidden=config.goat_mlp_hidden,
                init=config.goat_init,
                split_key_bias=config.goat_split_key_bias,
                alignment_slot=config.goat_alignment_slot,
                kv_heads=config.kv_heads,
                abs_modes=config.goat_abs_modes,
                abs_freq_base=config.goat_abs_freq_base,
                key_mlp=config.goat_key_mlp,
                slope_fn=config.goat_slope,
                features=config.goat_features,
                gate=config.goat_prior_gate,
                directional=config.goat_directional,
                sink=config.goat_sink,
                gate_vectors=config.goat_qk_layout == "authors",
            )
        elif config.positional == "alibi":
            self.prior = AlibiPrior(config.n_heads, config.head_dim)
        elif config.positional == "rope":
            self.rope = RotaryEmbedding(
                config.head_dim, config.rope_base, config.rope_extension, config.train_length
            )

    def _content(self, proj: nn.Module, x: Tensor, heads: int) -> Tensor:
        """The query or key projection's content rows: (B, L, heads, d_qk).

        In goat_qk_layout 'authors' a head's last d_p weight rows are carried, not computed: a
        plain `nn.Linear` multiplies by its content rows only (the same FLOPs as the 'content'
        layout; slicing the output instead cost a zero-filled activation-sized gradient in every
        backward, +4% of the layer's step at 1 x 1,024). The carried rows then get a zero gradient,
        as in goat-attention, which computes and overwrites them. A wrapped projection (peft's
        LoRA layers) runs its own forward, and its output's content rows are taken."""
        B, L, _ = x.shape
        rows, dqk = self.qk_rows, self.qk_dim
        if rows == dqk:
            return proj(x).view(B, L, heads, dqk)
        if type(proj) is nn.Linear:
            w = proj.weight.view(heads, rows, -1)[:, :dqk].reshape(heads * dqk, -1)
            b = None if proj.bias is None else proj.bias.view(heads, rows)[:, :dqk].reshape(-1)
            return F.linear(x, w, b).view(B, L, heads, dqk)
        return proj(x).view(B, L, heads, rows)[..., :dqk]

    def _project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        B, L, _ = x.shape
        H, Hkv, dh = self.n_heads, self.kv_heads, self.head_dim
        q = self._content(self.q_proj, x, H).transpose(1, 2)  # (B, H, L, d_qk)
        k = self._content(self.k_proj, x, Hkv).transpose(1, 2)  # (B, Hkv, L, d_qk)
        v = self.v_proj(x).view(B, L, Hkv, dh).transpose(1, 2)  # (B, Hkv, L, d_h)
        return q, k, v

    def expand_kv(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Grouped keys/values (B, Hkv, L, d) -> one per query head (B, H, L, d); as they are
        without grouping."""
        group = self.n_heads // self.kv_heads
        if group == 1:
            return k, v
        return k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)

    def _positions(
        self, q: Tensor, k: Tensor, pos: range | Tensor, tails: tuple[Tensor, Tensor] | None
    ) -> tuple[Tensor, Tensor]:
        """Attach positions: GOAT/ALiBi pack (q', k') (goat.py, Eqs. (23)-(24)), RoPE rotates, NoPE passes;
        all -> (B, H, L, d_h). ``pos``: a range shared by every row, or per-row positions (B, L);
        ``tails``: GOAT's position slots for ``pos`` when the decoder computed them for all
        layers at once (`goat.shared_tails`)."""
        if isinstance(self.prior, GoatPrior):
            return self.prior.pack(q, k, pos, pos, tails)
        if self.prior is not None:
            return self.prior.pack(q, k, pos, pos)
        if self.rope is not None:
            return self.rope(q, pos), self.rope(k, pos)
        return q, k

    def forward(
        self,
        x: Tensor,
        start_pos: int = 0,
        cache: LayerCache | None = None,
        layer: int = 0,
        positions: Tensor | None = None,
        mask: Tensor | None = None,
        tails: tuple[Tensor, Tensor] | None = None,
    ) -> Tensor:
        """x (B, L, d_model) at positions start_pos..start_pos+L-1 -> (B, L, d_model).

        With a cache, the new keys/values are appended and the queries attend to every cached
        position (``start_pos`` must equal ``cache.length``); cached decoding always runs the
        packed kernel path, also when the backend is ``explicit`` (the same numbers).
        ``positions`` (B, L), when given, are each row's own absolute positions (a padded
        batch), and ``mask`` (`padding_mask`) says which keys each query sees; both run the
        packed path too. ``tails``: see `_positions`.
        """
        B, L, _ = x.shape
        q, k, v = self._project(x)
        span = range(start_pos, start_pos + L)
        pos: range | Tensor = span if positions is None else positions
        observer = self.observer
        if observer is None and not self.packs(cache, positions, mask):
            k, v = self.expand_kv(k, v)
            y = explicit_attention(self.logits(q, k, span, span), v)
        else:
            q, k = self._positions(q, k, pos, tails)
            if cache is not None:
                k, v = cache.write(layer, k, v)
            k, v = self.expand_kv(k, v)
            if observer is not None:  # output_attentions: explicit weights for this call only
                y = observer(layer, q, k, v, mask)
            else:
                y = attend(q, k, v, self.backend, mask)  # (B, H, L, d_h)
        return self.o_proj(y.transpose(1, 2).reshape(B, L, self.n_heads * self.head_dim))

    def packs(
        self, cache: LayerCache | None, positions: Tensor | None, mask: Tensor | None
    ) -> bool:
        """Whether `forward` with these arguments packs q'/k' (every path but explicit logits)."""
        return not (
            self.backend == "explicit" and cache is None and positions is None and mask is None
        )

    def prior_logits(self, q: Tensor, pos_q: range, pos_k: range) -> Tensor:
        """The log-prior each query adds to its logits: (H, Lq, Lk), or (B, H, Lq, Lk) with
        GOAT's query-norm gate (a factor per query from its content ``q`` (B, H, Lq, d_c))."""
        assert self.prior is not None
        prior = self.prior.log_prior(pos_q, pos_k)
        gate = self.prior.gate(q) if isinstance(self.prior, GoatPrior) else None
        return prior if gate is None else prior * gate[..., None].to(prior.dtype)

    def logits(self, q: Tensor, k: Tensor, pos_q: range, pos_k: range) -> Tensor:
        """Explicit pre-softmax logits (B, H, Lq, Lk): s_ij + K_ij for GOAT and ALiBi (goat.py, Eqs. (4)-(10)),
        RoPE's rotated q.k/sqrt(d), NoPE's plain q.k/sqrt(d)."""
        if self.prior is not None:
            content = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.qk_dim)
            return content + self.prior_logits(q, pos_q, pos_k).to(content)  # dtype and device
        if self.rope is not None:
            q, k = self.rope(q, pos_q), self.rope(k, pos_k)
        return torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
