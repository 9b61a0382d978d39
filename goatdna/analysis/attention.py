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

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from goatdna.atomic import atomic_path
from goatdna.errors import GoatDNAError

if TYPE_CHECKING:
    import pandas as pd

    from goatdna.model import DNADecoder
    from goatdna.model.attention_maps import AttentionTerms

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

MAX_PEAK_BYTES = 8 * 2**30
"""What `attention_maps` may hold at its peak, by `peak_bytes` (8 GiB, the bound score-variants
and check-precision keep for one pass): beyond it, fewer layers or a shorter sequence."""

SUMMARY_BLOCK_BYTES = 8 << 20
"""The float64 summaries (variances, mean distance) read the maps a block of query rows at a
time, each temporary at most this: a float64 copy of a whole map stack is twice its size."""

FIXED_PEAK_BYTES = 128 << 20
"""What `peak_bytes` adds for what does not grow with heads x L^2: the summaries' block
temporaries (a few `SUMMARY_BLOCK_BYTES`), the trunk pass, torch's first-call allocations
(about 80 MiB measured in a fresh process)."""

HEAP_MAP_BYTES = 32 << 20
"""glibc's largest heap allocation (the ceiling of its mmap threshold): a larger (H, L, L) map
is mapped and unmapped whole, a smaller one freed may stay resident on the heap."""

HEAP_SLACK_MAPS = 8
"""Maps of at most `HEAP_MAP_BYTES` the heap was measured to keep beyond the live ones (up to
about 7, with 16 layers of 31 MiB maps): `peak_bytes` counts 8 more maps then."""


def peak_bytes(length: int, n_heads: int, n_layers: int, has_prior: bool) -> int:
    """The most `attention_maps` holds at once for one sequence of ``length`` bases, in bytes.

    The result keeps ``maps`` float32 (n_layers, H, L, L) arrays (weights and content; GOAT and
    ALiBi also the prior). The layers are computed one at a time, each copied into them and
    dropped before the next (`_as_arrays`), and one layer's explicit computation holds, at its
    softmax, its content logits, the prior, their sum, the masked sum and the weights: ``maps +
    2`` (H, L, L) float32 maps for GOAT/ALiBi, ``maps + 1`` for RoPE/NoPE (the logits are the
    content); `HEAP_SLACK_MAPS` more where a map is small enough for the heap. Then a few
    (L, L) boolean causal masks, and `FIXED_PEAK_BYTES`. One sequence: `goatdna attention`
    reads batch 1. Checked against the measured peak resident memory at several lengths, layer
    counts and schemes (tests/test_analysis_attention.py)."""
    maps = 3 if has_prior else 2
    per_map = n_heads * length * length * 4
    live = maps * n_layers + maps + 1 + int(has_prior)
    slack = HEAP_SLACK_MAPS if per_map <= HEAP_MAP_BYTES else 0
    return (live + slack) * per_map + 4 * length**2 + FIXED_PEAK_BYTES


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


def check_size(
    length: int, n_heads: int, n_layers: int, has_prior: bool, shorten: str = "the sequence"
) -> None:
    """Refuse, before any work, maps whose computation would pass `MAX_PEAK_BYTES` at its peak
    (`peak_bytes`), naming what to change: fewer layers (``--layer``) where one layer fits at
    this length, else at most how many bases to read (``shorten``: the flag that gave them)."""
    need = peak_bytes(length, n_heads, n_layers, has_prior)
    if need <= MAX_PEAK_BYTES:
        return
    fit = max((k for k in range(1, n_layers) if peak_bytes(length, n_heads, k, has_prior)
               <= MAX_PEAK_BYTES), default=0)  # fmt: skip
    if fit:
        advice = f"ask for at most {fit} layer(s) with --layer"
    else:
        low, high = 1, length  # the longest sequence one layer fits, by bisection
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (
                (middle, high)
                if peak_bytes(middle, n_heads, 1, has_prior) <= MAX_PEAK_BYTES
                else (low, middle)
            )
        longest = low
        advice = f"read at most {longest:,} bases ({shorten})" + (
            " with one --layer" if n_layers > 1 else ""
        )
    raise GoatDNAError(
        f"{length:,} bases x {n_layers} layer(s) x {n_heads} heads need about "
        f"{need / 2**30:.1f} GiB at the peak (every asked-for layer's L x L maps and one layer's "
        f"explicit computation), above the {MAX_PEAK_BYTES / 2**30:.0f} GiB bound: {advice}"
    )


def _row_centred(term: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """``term`` (..., L, L) minus its mean over each row's allowed keys, 0 where not allowed."""
    counts = allowed.sum(-1, keepdims=True)  # (L, 1)
    masked = np.where(allowed, term, 0.0)
    return np.where(allowed, masked - masked.sum(-1, keepdims=True) / counts, 0.0)


def _row_blocks(shape: tuple[int, ...]) -> list[slice]:
    """Query rows of (..., L, L) maps in blocks whose float64 copy is at most
    `SUMMARY_BLOCK_BYTES` (one row at least)."""
    length = shape[-1]
    row_bytes = 8 * length * int(np.prod(shape[:-2]))
    rows = max(1, SUMMARY_BLOCK_BYTES // max(1, row_bytes))
    return [slice(lo, min(lo + rows, length)) for lo in range(0, length, rows)]


def _variance(term: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Within-row variance over every causal entry -> (..., ) per head, in float64, a block of
    rows at a time (`_row_blocks`)."""
    total = np.zeros(term.shape[:-2], dtype=np.float64)
    for rows in _row_blocks(term.shape):
        centred = _row_centred(term[..., rows, :].astype(np.float64), allowed[rows])
        total += (centred**2).sum((-1, -2))
    return total / allowed.sum()


def _mean_distance(weights: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """``sum_j A_ij (i - j)`` averaged over rows i -> (...,) per head, a block of rows at a time."""
    length = weights.shape[-1]
    per_row = np.empty(weights.shape[:-1], dtype=np.float64)  # (..., L)
    for rows in _row_blocks(weights.shape):
        distance = np.arange(length)[rows, None] - np.arange(length)[None, :]  # i - j
        attended = np.where(allowed[rows], distance, 0).astype(np.float64)
        per_row[..., rows] = (weights[..., rows, :] * attended).sum(-1)
    return per_row.mean(-1)


def _as_arrays(
    terms: Iterator[AttentionTerms], n_layers: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The layers' (weights, content, prior) as float32 numpy (n_layers, H, L, L), each layer
    copied out and its tensors dropped before the next layer is computed (`peak_bytes`)."""
    weights = content = np.empty(0, dtype=np.float32)
    prior: np.ndarray | None = None
    for row, layer in enumerate(terms):
        if row == 0:
            shape = (n_layers, *layer.weights.shape[1:])
            weights = np.empty(shape, dtype=np.float32)
            content = np.empty(shape, dtype=np.float32)
            prior = np.empty(shape, dtype=np.float32) if layer.prior is not None else None
        weights[row] = layer.weights[0].cpu().numpy()
        content[row] = layer.content[0].cpu().numpy()
        if prior is not None and layer.prior is not None:
            prior[row] = layer.prior.cpu().numpy()
        del layer  # before the next layer's tensors exist
    return weights, content, prior


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

    from goatdna.model.attention_maps import iter_attention_terms

    scheme = model.config.positional
    length = int(len(tokens))
    if length < 2:
        raise GoatDNAError(f"the sequence has {length} base(s); attention needs at least 2")
    check_size(length, model.config.n_heads, len(layers), scheme in ("goat", "alibi"))
    device = next(model.parameters()).device
    idx = torch.as_tensor(np.asarray(tokens, dtype=np.int64), device=device)[None]  # (1, L)
    with torch.no_grad():
        terms = iter_attention_terms(model, idx, layers, start)
        weights, content, prior = _as_arrays(terms, len(layers))  # prior None: RoPE, NoPE
    allowed = np.tril(np.ones((length, length), dtype=bool))  # j <= i
    var_content = _variance(content, allowed)
    var_prior = _variance(prior, allowed) if prior is not None else np.zeros_like(var_content)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = var_prior / (var_prior + var_content)
    if prior is None:
        share = np.full_like(var_content, np.nan)
    mean_distance = _mean_distance(weights, allowed)
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
