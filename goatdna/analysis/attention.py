"""Attention maps of one sequence, term by term: which heads are positional, which content-driven.

For each asked-for layer and head, the weights ``A = softmax_j<=i(s + K)`` and their two terms
(the paper's Eqs. (4)-(10)): the content logits ``s_ij`` and the prior's log-weights ``K_ij``
(GOAT: ``K_rel(i - j) + u_h(j)``, Eqs. (12)-(22); ALiBi: its fixed bias). They come from
`goatdna.model.attention_maps.attention_terms`, the explicit computation beside the fused path.
RoPE has no additive prior (positions rotate q and k, so they are inside ``s``) and NoPE no
positional term at all: their maps have ``prior`` None and say so in `SCHEME_NOTES`.

Per-head summaries, over the causal entries (j <= i) of every query row:

* ``var_content``, ``var_prior``: variance of each term after removing its mean over the row
  (softmax ignores a per-row constant, so only within-row differences move the weights);
* ``prior_share = var_prior / (var_prior + var_content)``: 1 for a head whose logits are all
  prior (positional), 0 for one whose logits are all content; NaN without a prior;
* ``mean_distance``: the attention-weighted distance ``sum_j A_ij (i - j)``, averaged over rows;
* profiles by distance ``d = i - j`` (averaged over the rows that have that distance): the mean
  weight, and each term relative to the query's own position (``K_i,i-d - K_i,i``; for ALiBi
  exactly its bias ``-m_h d``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from goatdna.atomic import atomic_path
from goatdna.errors import GoatDNAError

if TYPE_CHECKING:
    import pandas as pd

    from goatdna.model import DNADecoder

SCHEME_NOTES = {
    "goat": "GOAT: prior K_ij = K_rel(i-j) + u_h(j), learned (Eqs. (12)-(22)); content "
    "s_ij = <qc_i, kc_j>/sqrt(d_c)",
    "alibi": "ALiBi: prior = its fixed bias -m_h (i-j), kept key-only as m_h j (softmax-equal); "
    "content s_ij = <qc_i, kc_j>/sqrt(d_c)",
    "rope": "RoPE has no additive prior: positions rotate q and k, so they are inside the "
    "content logits q_i.k_j/sqrt(d_h)",
    "nope": "NoPE has no positional term: only the causal mask orders the tokens; content "
    "logits q_i.k_j/sqrt(d_h)",
}
"""What ``prior`` and ``content`` mean for each positional scheme (also written into the .npz)."""

MAX_ARRAY_BYTES = 2 << 30
"""The L x L maps of all asked-for layers may weigh at most this (2 GiB): beyond it, fewer
layers or a shorter sequence."""


@dataclass(frozen=True)
class AttentionMaps:
    """One sequence's attention, for ``layers`` (0-based blocks), every head.

    Arrays are float32 numpy: ``weights``, ``content`` (n_layers, H, L, L), ``prior`` the same
    or None (RoPE, NoPE); summaries (n_layers, H) and profiles (n_layers, H, L) as in the module
    docstring. ``tokens`` (L,) are the shard ids the model read, ``start`` the position of the
    first (0 unless asked).
    """

    scheme: str
    layers: tuple[int, ...]
    start: int
    tokens: np.ndarray
    weights: np.ndarray
    content: np.ndarray
    prior: np.ndarray | None
    var_content: np.ndarray
    var_prior: np.ndarray
    prior_share: np.ndarray
    mean_distance: np.ndarray
    weight_profile: np.ndarray
    content_profile: np.ndarray
    prior_profile: np.ndarray | None

    @property
    def note(self) -> str:
        return SCHEME_NOTES[self.scheme]

    @property
    def n_heads(self) -> int:
        return int(self.weights.shape[1])

    def head_kind(self, row: int, head: int) -> str:
        """``positional`` (prior share >= 0.5), ``content`` or ``content (no prior)``."""
        share = self.prior_share[row, head]
        if np.isnan(share):
            return "content (no prior)"
        return "positional" if share >= 0.5 else "content"


def check_layers(
    layers: Sequence[int] | None, n_layers: int, option: str = "--layer"
) -> tuple[int, ...]:
    """The asked-for layers (None: every layer), each in 0..n_layers-1, in the order given."""
    if not layers:
        return tuple(range(n_layers))
    bad = [layer for layer in layers if not 0 <= layer < n_layers]
    if bad:
        raise GoatDNAError(
            f"{option} {bad[0]}: the model has {n_layers} layers, numbered 0..{n_layers - 1}"
        )
    return tuple(dict.fromkeys(layers))  # repeated layers once


def check_size(length: int, n_heads: int, n_layers: int, has_prior: bool) -> None:
    """Refuse, before any work, maps that would not fit `MAX_ARRAY_BYTES`."""
    maps = 3 if has_prior else 2
    size = maps * n_layers * n_heads * length * length * 4
    if size > MAX_ARRAY_BYTES:
        raise GoatDNAError(
            f"{length:,} bases x {n_layers} layer(s) x {n_heads} heads make {size / 2**30:.1f} GiB "
            f"of L x L maps (at most {MAX_ARRAY_BYTES / 2**30:.0f} GiB): ask for fewer layers "
            "(--layer) or a shorter sequence"
        )


def _row_centred(term: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """``term`` (..., L, L) minus its mean over each row's allowed keys, 0 where not allowed."""
    counts = allowed.sum(-1, keepdims=True)  # (L, 1)
    masked = np.where(allowed, term, 0.0)
    return np.where(allowed, masked - masked.sum(-1, keepdims=True) / counts, 0.0)


def _variance(term: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Within-row variance over every causal entry -> (..., ) per head."""
    centred = _row_centred(term.astype(np.float64), allowed)
    return (centred**2).sum((-1, -2)) / allowed.sum()


def _by_distance(term: np.ndarray, relative: bool) -> np.ndarray:
    """Mean over rows i >= d of ``term[i, i - d]`` (minus ``term[i, i]`` if ``relative``) for
    d = 0..L-1: (..., L, L) -> (..., L)."""
    length = term.shape[-1]
    out = np.empty(term.shape[:-2] + (length,), dtype=np.float64)
    diagonal = np.diagonal(term, 0, -2, -1).astype(np.float64)  # (..., L): term[i, i]
    for d in range(length):
        band = np.diagonal(term, -d, -2, -1).astype(np.float64)  # term[i, i - d], i = d..L-1
        if relative:
            band = band - diagonal[..., d:]
        out[..., d] = band.mean(-1)
    return out


def attention_maps(
    model: DNADecoder, tokens: np.ndarray, layers: Sequence[int], start: int = 0
) -> AttentionMaps:
    """The maps and summaries of ``tokens`` (L,) shard ids at positions ``start..`` for ``layers``."""
    import torch

    from goatdna.model.attention_maps import attention_terms

    scheme = model.config.positional
    length = int(len(tokens))
    if length < 2:
        raise GoatDNAError(f"the sequence has {length} base(s); attention needs at least 2")
    check_size(length, model.config.n_heads, len(layers), scheme in ("goat", "alibi"))
    device = next(model.parameters()).device
    idx = torch.as_tensor(np.asarray(tokens, dtype=np.int64), device=device)[None]  # (1, L)
    with torch.no_grad():
        terms = attention_terms(model, idx, list(layers), start)
    weights = np.stack([t.weights[0].cpu().numpy() for t in terms]).astype(np.float32)
    content = np.stack([t.content[0].cpu().numpy() for t in terms]).astype(np.float32)
    prior = None
    if all(t.prior is not None for t in terms):
        prior = np.stack([t.prior.cpu().numpy() for t in terms if t.prior is not None])
        prior = prior.astype(np.float32)  # (n, H, L, L)
    allowed = np.tril(np.ones((length, length), dtype=bool))  # j <= i
    var_content = _variance(content, allowed)
    var_prior = _variance(prior, allowed) if prior is not None else np.zeros_like(var_content)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = var_prior / (var_prior + var_content)
    if prior is None:
        share = np.full_like(var_content, np.nan)
    distance = np.arange(length)[:, None] - np.arange(length)[None, :]  # i - j
    mean_distance = (weights * np.where(allowed, distance, 0)).sum(-1).mean(-1)
    return AttentionMaps(
        scheme=scheme,
        layers=tuple(layers),
        start=start,
        tokens=np.asarray(tokens, dtype=np.uint8),
        weights=weights,
        content=content,
        prior=prior,
        var_content=var_content.astype(np.float32),
        var_prior=var_prior.astype(np.float32),
        prior_share=share.astype(np.float32),
        mean_distance=mean_distance.astype(np.float32),
        weight_profile=_by_distance(weights, relative=False).astype(np.float32),
        content_profile=_by_distance(content, relative=True).astype(np.float32),
        prior_profile=(
            _by_distance(prior, relative=True).astype(np.float32) if prior is not None else None
        ),
    )


def write_npz(maps: AttentionMaps, path: Path) -> Path:
    """Every array of ``maps`` (``prior`` and ``prior_profile`` only where the scheme has a prior),
    with ``scheme``, ``note``, ``layers``, ``start`` and ``sequence``, written atomically."""
    from goatdna.io.tokens import decode

    arrays: dict[str, np.ndarray] = {
        "scheme": np.array(maps.scheme),
        "note": np.array(maps.note),
        "layers": np.array(maps.layers, dtype=np.int64),
        "start": np.int64(maps.start),
        "sequence": np.array(decode(maps.tokens)),
        "tokens": maps.tokens,
        "weights": maps.weights,
        "content": maps.content,
        "var_content": maps.var_content,
        "var_prior": maps.var_prior,
        "prior_share": maps.prior_share,
        "mean_distance": maps.mean_distance,
        "weight_profile": maps.weight_profile,
        "content_profile": maps.content_profile,
    }
    if maps.prior is not None and maps.prior_profile is not None:
        arrays["prior"] = maps.prior
        arrays["prior_profile"] = maps.prior_profile
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez_compressed(handle, **arrays)  # type: ignore[arg-type]
    return path


def summary_frame(maps: AttentionMaps) -> pd.DataFrame:
    """One row per (layer, head): the two terms' variances, the prior's share, the head's kind
    and its mean attended distance."""
    import pandas as pd

    rows = [
        {
            "layer": layer,
            "head": head,
            "var_content": float(maps.var_content[row, head]),
            "var_prior": float(maps.var_prior[row, head]),
            "prior_share": float(maps.prior_share[row, head]),
            "kind": maps.head_kind(row, head),
            "mean_distance": float(maps.mean_distance[row, head]),
        }
        for row, layer in enumerate(maps.layers)
        for head in range(maps.n_heads)
    ]
    return pd.DataFrame(rows)
