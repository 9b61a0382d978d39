"""The `goatdna attention` figure: heads x distance profiles, the prior's share, and one head's maps.

Top row, one row per (layer, head): the prior's and the content's log-weights by distance,
relative to the query's own position, the mean attention weight by distance, and each head's
prior share (see `goatdna.analysis.attention`). Bottom row, one head: its weights, and its
content and prior logits (row-centred: softmax ignores a per-row constant), above the diagonal
blank. Drawn with the house style of `goatdna.analysis.plots`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from goatdna.analysis.plots import _save, new_figure, styled
from goatdna.errors import GoatDNAError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import SubFigure

    from goatdna.analysis.attention import AttentionMaps


def _row_labels(maps: AttentionMaps) -> list[str]:
    return [f"L{layer} h{head}" for layer in maps.layers for head in range(maps.n_heads)]


def _profile(
    ax: Axes, values: np.ndarray | None, title: str, note: str, label: str, **kw: object
) -> None:
    """A (rows, distance) heat map, or the note where the scheme has no such term."""
    ax.set_title(title)
    if values is None:
        ax.text(0.5, 0.5, note, ha="center", va="center", wrap=True, transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    rows = values.reshape(-1, values.shape[-1])
    image = ax.imshow(rows, aspect="auto", interpolation="nearest", **kw)  # type: ignore[arg-type]
    ax.set_xlabel("distance i - j (bases)")
    ax.figure.colorbar(image, ax=ax, shrink=0.85, label=label)


def _head_map(ax: Axes, values: np.ndarray | None, title: str, note: str, **kw: object) -> None:
    ax.set_title(title)
    if values is None:
        ax.text(0.5, 0.5, note, ha="center", va="center", wrap=True, transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    image = ax.imshow(values, interpolation="nearest", origin="upper", **kw)  # type: ignore[arg-type]
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position i")
    ax.figure.colorbar(image, ax=ax, shrink=0.85)


def _centred(term: np.ndarray) -> np.ma.MaskedArray:
    """A (L, L) term minus each row's mean over j <= i, masked above the diagonal."""
    length = term.shape[-1]
    allowed = np.tril(np.ones((length, length), dtype=bool))
    counts = allowed.sum(-1, keepdims=True)
    mean = np.where(allowed, term, 0.0).sum(-1, keepdims=True) / counts
    return np.ma.masked_where(~allowed, term - mean)


def _symmetric(values: np.ndarray | np.ma.MaskedArray | None) -> dict[str, object]:
    if values is None or not np.ma.count(values):
        return {"cmap": "coolwarm"}
    bound = float(np.ma.max(np.ma.abs(values))) or 1.0
    return {"cmap": "coolwarm", "vmin": -bound, "vmax": bound}


@styled
def plot_attention(maps: AttentionMaps, path: Path, head: int = 0, title: str = "") -> Path:
    """Draw the figure for ``maps``; the bottom row shows ``head`` of its first layer."""
    from matplotlib.colors import LogNorm

    if not 0 <= head < maps.n_heads:
        raise GoatDNAError(
            f"--head {head}: the model has {maps.n_heads} heads, 0..{maps.n_heads - 1}"
        )
    labels = _row_labels(maps)
    n_rows = len(labels)
    fig = new_figure(figsize=(19, 4.2 + 0.12 * n_rows + 4.6), layout="constrained")
    parts = fig.subfigures(2, 1, height_ratios=[1.0 + 0.03 * n_rows, 1.25])
    upper, lower = cast("Sequence[SubFigure]", parts)
    axes = upper.subplots(1, 4, gridspec_kw={"width_ratios": [1, 1, 1, 0.55]})
    note = maps.note
    _profile(
        axes[0], maps.prior_profile, "prior log-weight K(i, i-d) - K(i, i)", note,
        "nats", **_symmetric(maps.prior_profile),
    )  # fmt: skip
    _profile(
        axes[1], maps.content_profile, "content logit s(i, i-d) - s(i, i)", note,
        "nats", **_symmetric(maps.content_profile),
    )  # fmt: skip
    profile = np.clip(maps.weight_profile, 1e-6, None)
    _profile(
        axes[2], profile, "mean attention weight at distance d", note, "weight",
        norm=LogNorm(vmin=float(profile.min()), vmax=float(profile.max())), cmap="magma",
    )  # fmt: skip
    share = maps.prior_share.reshape(-1)
    y = np.arange(n_rows)
    bars = axes[3]
    if np.all(np.isnan(share)):
        bars.barh(y, maps.mean_distance.reshape(-1), color="#7570b3")
        bars.set_xlabel("mean attended distance (bases)")
        bars.set_title("no prior: distance only")
    else:
        colors = ["#d95f02" if s >= 0.5 else "#1b9e77" for s in share]
        bars.barh(y, share, color=colors)
        bars.axvline(0.5, color="#222222", lw=0.8, ls="--")
        bars.set_xlim(0, 1)
        bars.set_xlabel("prior share of logit variance")
        bars.set_title("positional (orange) vs content (green)")
    bars.set_ylim(n_rows - 0.5, -0.5)
    step = max(1, n_rows // 24)
    for ax in (*axes[:3], bars):
        if ax.get_images() or ax is bars:
            ax.set_yticks(y[::step], [labels[i] for i in y[::step]])
    layer = maps.layers[0]
    bottom = lower.subplots(1, 3)
    weights = np.ma.masked_where(maps.weights[0, head] <= 0, maps.weights[0, head])
    positive = maps.weights[0, head][maps.weights[0, head] > 0]
    _head_map(
        bottom[0], weights, f"layer {layer} head {head}: weights A_ij", note,
        norm=LogNorm(vmin=max(float(positive.min()), 1e-6), vmax=1.0), cmap="magma",
    )  # fmt: skip
    content = _centred(maps.content[0, head])
    _head_map(bottom[1], content, "content logits (row-centred)", note, **_symmetric(content))
    prior = _centred(maps.prior[0, head]) if maps.prior is not None else None
    _head_map(bottom[2], prior, "prior log-weights (row-centred)", note, **_symmetric(prior))
    fig.suptitle(title or f"Attention of a {len(maps.tokens):,}-base sequence ({maps.scheme})")
    return _save(fig, path)
