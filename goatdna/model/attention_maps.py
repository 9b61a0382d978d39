"""Attention weights made visible: an explicit (non-fused) computation, for analysis calls only.

The model's forward never forms its attention weights: GOAT and ALiBi pack their prior into q'
and k' (goat.py, Eqs. (23)-(24)) and one SDPA call does the rest (attention.py). Looking inside
(transformers' ``output_attentions``, `goatdna attention`) needs them, so this module computes
them explicitly with the layer's own projections and positional pieces (through one hook,
``CausalSelfAttention.observer``), leaving the fast path as it is:

* `recording`: for the calls made inside it, each layer computes ``softmax(q' k'^T / sqrt(d_h))``
  (`explicit_weights`) over the keys `attention.attend` lets each query see (the same
  bottom-aligned causal mask, or the padding mask; float32, exact zeros on masked keys) and
  multiplies it by V in place of the fused kernel, keeping the weights: transformers'
  ``output_attentions``. Outside it nothing changes.
* `attention_terms`: the paper's two terms apart, Eqs. (4)-(10): the content logits
  ``s_ij = <qc_i, kc_j> / sqrt(d_c)`` and the prior's log-weights ``K_ij`` materialised by
  `GoatPrior.log_prior` / `AlibiPrior.log_prior` (not read back from the packing), and
  ``softmax(s + K)``. RoPE has no additive prior (its positions rotate q and k, so they live
  inside the content logits) and NoPE none at all: their ``prior`` is None.

Both cost O(L^2) memory per layer: for inspection, not for training or scoring.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from .attention import CausalSelfAttention, causal_mask
from .transformer import Block, DNADecoder


def explicit_weights(q: Tensor, k: Tensor, mask: Tensor | None = None) -> Tensor:
    """Attention probabilities of packed/rotated q (B, H, Lq, d) over k (B, H, Lk, d) -> float32
    (B, H, Lq, Lk), with the scale and the mask `attention.attend` uses.

    ``mask`` (B, 1, Lq, Lk'), from `attention.padding_mask`, replaces the causal mask; columns
    beyond its Lk' (a preallocated cache's unwritten slots) are masked out, as in `attend`.
    Without it the mask is the bottom-aligned causal one (a one-token step sees every key).
    """
    q_len, k_len = q.shape[2], k.shape[2]
    if mask is None:
        allowed = causal_mask(q_len, k_len, q.device)  # (Lq, Lk)
    elif mask.shape[-1] < k_len:
        allowed = F.pad(mask, (0, k_len - mask.shape[-1]), value=False)
    else:
        allowed = mask
    logits = torch.matmul(q.float(), k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return torch.softmax(logits.masked_fill(~allowed, float("-inf")), dim=-1)  # (B, H, Lq, Lk)


def _attention(decoder: DNADecoder, layer: int) -> tuple[Block, CausalSelfAttention]:
    block = decoder.blocks[layer]
    assert isinstance(block, Block)  # ModuleList items are typed as Module
    return block, block.attn


@contextlib.contextmanager
def recording(decoder: DNADecoder) -> Iterator[dict[int, Tensor]]:
    """While open, every attention layer of ``decoder`` runs explicitly: ``weights @ V`` with
    `explicit_weights` of the very q', k' (and cached keys) the fused kernel would read, and
    leaves its weights (B, H, Lq, Lk) in the yielded dict under its layer index. The forward's
    outputs are then functions of the weights (gradients reach them, as transformers'
    ``output_attentions`` promises); outside the block the fused path runs again.
    """
    weights: dict[int, Tensor] = {}

    def observe(layer: int, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        if k.dtype != q.dtype:  # a float32 KV cache read under autocast, as `attend` does
            k, v = k.to(q.dtype), v.to(q.dtype)
        probs = explicit_weights(q, k, mask)  # (B, H, Lq, Lk) float32
        weights[layer] = probs
        return torch.matmul(probs.to(v.dtype), v)  # (B, H, Lq, d_h)

    modules = [_attention(decoder, layer)[1] for layer in range(decoder.n_layers)]
    for attn in modules:
        attn.observer = observe
    try:
        yield weights
    finally:
        for attn in modules:
            attn.observer = None


@dataclass(frozen=True)
class AttentionTerms:
    """One layer's attention for a batch of sequences (no padding, no cache), term by term.

    ``content`` (B, H, L, L): GOAT/ALiBi ``<qc_i, kc_j> / sqrt(d_c)``; RoPE the rotated
    ``q.k / sqrt(d_h)`` (position inside); NoPE the plain one. ``prior`` (H, L, L) the
    log-prior ``K_ij`` (GOAT: ``K_rel(i - j) + u_h(j)``; ALiBi: ``m_h j``, softmax-equal to
    ``-m_h (i - j)``), None for RoPE and NoPE. ``weights`` = softmax over j <= i of
    ``content + prior`` (float32, exact zeros above the diagonal); ``output`` = weights @ V
    (B, H, L, d_h), what the heads hand to the output projection. Entries above the diagonal of
    ``content`` and ``prior`` are computed but never attended.
    """

    layer: int
    content: Tensor
    prior: Tensor | None
    weights: Tensor
    output: Tensor


def attention_terms(
    decoder: DNADecoder, idx: Tensor, layers: Sequence[int], start_pos: int = 0
) -> list[AttentionTerms]:
    """The `AttentionTerms` of ``layers`` (0-based) for token ids ``idx`` (B, L) at positions
    ``start_pos..``: one trunk pass for the blocks' inputs, then each layer's terms explicitly."""
    return list(iter_attention_terms(decoder, idx, layers, start_pos))


def iter_attention_terms(
    decoder: DNADecoder, idx: Tensor, layers: Sequence[int], start_pos: int = 0
) -> Iterator[AttentionTerms]:
    """`attention_terms` one layer at a time (the trunk pass now, each layer's terms when it is
    asked for): a caller that copies each layer out and drops it before the next holds one
    layer's L x L tensors, not every layer's (`goatdna attention`'s peak memory)."""
    layers = list(layers)
    for layer in layers:
        if not 0 <= layer < decoder.n_layers:
            raise ValueError(f"layer must be in 0..{decoder.n_layers - 1}, got {layer}")
    states: list[Tensor] = []
    deepest = max(layers, default=-1) + 1
    decoder.hidden(idx, start_pos, layers=deepest, states=states)  # states[l]: block l's input
    span = range(start_pos, start_pos + idx.shape[1])
    return (_terms(decoder, layer, states[layer], span) for layer in layers)


def _terms(decoder: DNADecoder, layer: int, x: Tensor, span: range) -> AttentionTerms:
    block, attn = _attention(decoder, layer)
    q, k, v = attn._project(
        block.attn_norm(x)
    )  # (B, H, L, d_qk), (B, Hkv, L, d_qk), (B, Hkv, L, d_h)
    k, v = attn.expand_kv(k, v)  # grouped-query heads: one per query head
    prior: Tensor | None = None
    if attn.prior is not None:  # GOAT and ALiBi: s_ij = <qc_i, kc_j> / sqrt(d_c), Eqs. (4)-(10)
        content = torch.matmul(q.float(), k.float().transpose(-1, -2)) / math.sqrt(attn.qk_dim)
        prior = attn.prior_logits(q, span, span).float().to(content.device)  # (B?, H, L, L)
    else:
        if attn.rope is not None:  # RoPE: the position is inside the rotated q.k
            q, k = attn.rope(q, span), attn.rope(k, span)
        content = torch.matmul(q.float(), k.float().transpose(-1, -2)) / math.sqrt(attn.head_dim)
    logits = content if prior is None else content + prior  # (B, H, L, L)
    allowed = causal_mask(len(span), len(span), logits.device)
    weights = torch.softmax(logits.masked_fill(~allowed, float("-inf")), dim=-1)
    output = torch.matmul(weights, v.float())  # (B, H, L, d_h)
    return AttentionTerms(layer, content, prior, weights, output)
