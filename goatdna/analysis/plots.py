"""The report's figures (matplotlib, PNG), drawn without touching matplotlib's global state.

Each function takes plain data (DataFrames, arrays, a model) and a path, draws one figure with
labelled axes and units, writes it atomically and returns the path. Colours are fixed per model
name so GOAT and RoPE look the same in every figure. Figures are explicit
`matplotlib.figure.Figure` objects (no pyplot, so no backend switch and no figure registry) and
the house style applies through `matplotlib.rc_context` while a figure is drawn and saved, so a
notebook that imports these functions keeps its backend and rcParams.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec

import numpy as np

from goatdna.analysis.gc import TRAJECTORY_WINDOW, gc_trajectory
from goatdna.atomic import atomic_path

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from goatdna.model import GoatPrior

REFERENCE_COLOR = "#222222"
_PALETTE = ["#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#e6ab02"]
DPI = 110
STYLE: dict[Any, Any] = {  # rcParams while a figure is drawn (matplotlib types keys as Literals)
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}

P = ParamSpec("P")


def styled(draw: Callable[P, Path]) -> Callable[P, Path]:
    """Run a drawing function under the house style, restoring rcParams afterwards."""

    @functools.wraps(draw)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> Path:
        import matplotlib

        with matplotlib.rc_context(STYLE):
            return draw(*args, **kwargs)

    return wrapper


def new_figure(**kwargs: Any) -> Figure:
    """A `matplotlib.figure.Figure` outside pyplot (nothing to close, no backend needed)."""
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def model_colors(names: Sequence[str]) -> dict[str, str]:
    """A stable colour per model: GOAT runs orange, RoPE runs green, others from the palette."""
    colors: dict[str, str] = {}
    rest = itertools.cycle(_PALETTE[2:] + _PALETTE[:2])
    for name in names:
        low = name.lower()
        if "goat" in low and _PALETTE[0] not in colors.values():
            colors[name] = _PALETTE[0]
        elif "rope" in low and _PALETTE[1] not in colors.values():
            colors[name] = _PALETTE[1]
        else:
            colors[name] = next(rest)
    return colors


def _save(fig: Figure, path: Path) -> Path:
    """Write ``fig`` as PNG through a temporary file beside ``path`` (goatdna.atomic)."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI, bbox_inches="tight")
    return Path(path)


@styled
def plot_nll_vs_context(
    evaluations: Mapping[str, Any], train_lengths: Mapping[str, int], path: Path
) -> Path:
    """NLL (nats/base, left axis; bits/base on the right) against context length per model, with
    each point's 95% bootstrap interval over the windows as an error bar.

    ``evaluations[name]`` is a DataFrame with ``context_length`` and ``nll`` columns (and
    ``nll_low``/``nll_high``, `evaluate.ContextResult`'s interval, where known). The bars keep the
    axis from magnifying noise: a difference smaller than them is not a result.
    """
    colors = model_colors(list(evaluations))
    fig = new_figure(figsize=(6.4, 4.0))
    ax = fig.subplots()
    for name, frame in evaluations.items():
        frame = frame.sort_values("context_length")
        ax.errorbar(
            frame["context_length"], frame["nll"], yerr=nll_error_bars(frame), fmt="o-",
            color=colors[name], label=name, lw=2, capsize=3,
        )  # fmt: skip
    for i, length in enumerate(sorted(set(train_lengths.values()))):
        ax.axvline(length, color="0.5", ls="--", lw=1, label="training length" if i == 0 else None)
    ax.set_xscale("log", base=2)
    all_lengths = sorted({int(x) for f in evaluations.values() for x in f["context_length"]})
    ax.set_xticks(all_lengths)
    ax.set_xticklabels([f"{x:,}" for x in all_lengths])
    ax.minorticks_off()
    ax.set_xlabel("evaluation context length (bases)")
    ax.set_ylabel("NLL (nats / base; bars: 95% bootstrap interval)")
    lo, hi = ax.get_ylim()
    right = ax.twinx()
    right.set_ylim(lo / math.log(2), hi / math.log(2))
    right.set_ylabel("bits / base")
    right.spines["right"].set_visible(True)
    ax.set_title("Held-out NLL vs context length (right of the dashed line: extrapolation)")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best")
    return _save(fig, path)


def nll_error_bars(frame: Any) -> np.ndarray | None:
    """(2, n) distances from each NLL down to ``nll_low`` and up to ``nll_high`` (None without
    interval columns), for ``errorbar``'s ``yerr``."""
    if "nll_low" not in frame or "nll_high" not in frame:
        return None
    nll = frame["nll"].to_numpy(dtype=float)
    low = frame["nll_low"].to_numpy(dtype=float)
    high = frame["nll_high"].to_numpy(dtype=float)
    return np.nan_to_num(np.stack([nll - low, high - nll]).clip(min=0.0))


RECALL_NO_GAIN_LABEL = "no recall (gain 0)"
RECALL_CHANCE_LABEL = "chance (1 of 4 bases)"


def recall_probe_length(distance: Any, segment_length: int) -> Any:
    """Inputs the model reads for a recall probe at filler ``distance``: 2S + d - 1 (the probe
    is S + d + S bases; the last predicts nothing), the length compared with training's."""
    return 2 * segment_length + distance - 1


@styled
def plot_recall(
    summaries: Mapping[str, Any], train_lengths: Mapping[str, int], segment_length: int, path: Path
) -> Path:
    """Recall gain (nats/base) and greedy copy accuracy per model, with 95% bootstrap intervals
    over the trials, against the probe's length.

    ``summaries[name]`` is `recall.summarize_recall`'s frame. The x axis is the number of inputs
    the model reads, 2S + d - 1 (`recall_probe_length`; tick labels give the filler distance d),
    so the dashed line stands at the training length itself and the points right of it are
    extrapolation, as the summary's ``extrapolation`` column says. The dotted line of each model
    is its ceiling: the gain of a perfect copier, which predicts the second copy at no cost, is
    the NLL of the first copy (``nll_first``), not ln 4. The grey baselines are labelled in each
    panel's legend, so a reader knows what a point near them means: gain 0 is no recall (the
    second copy predicted no better than the first), accuracy 0.25 is chance (1 of 4 bases).
    """
    colors = model_colors(list(summaries))
    fig = new_figure(figsize=(10.0, 3.8))
    gain_ax, acc_ax = fig.subplots(1, 2)
    ticks: set[tuple[int, int]] = set()  # (probe length, filler distance)
    for name, frame in summaries.items():
        frame = frame.sort_values("distance")
        x = recall_probe_length(frame["distance"], segment_length)
        ticks.update(zip(x.astype(int), frame["distance"].astype(int), strict=True))
        gain_ax.errorbar(
            x, frame["recall_gain"], yerr=_interval_bars(frame, "recall_gain"), fmt="o-", lw=2,
            color=colors[name], label=name, capsize=3,
        )  # fmt: skip
        acc_ax.errorbar(
            x, frame["copy_accuracy"], yerr=_interval_bars(frame, "copy_accuracy"), fmt="o-",
            lw=2, color=colors[name], label=name, capsize=3,
        )  # fmt: skip
        if "nll_first" in frame:
            gain_ax.axhline(
                float(frame["nll_first"].mean()), color=colors[name], ls=":", lw=1.2,
                label=f"{name} perfect copy (= NLL of the first copy)",
            )  # fmt: skip
    for i, length in enumerate(sorted(set(train_lengths.values()))):
        for ax in (gain_ax, acc_ax):
            ax.axvline(
                length, color="0.5", ls="--", lw=1, label="training length" if i == 0 else None
            )
    gain_ax.axhline(0, color="0.7", lw=0.8, label=RECALL_NO_GAIN_LABEL)
    for ax, label in ((gain_ax, "recall gain (nats / base)"), (acc_ax, "greedy copy accuracy")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(t for t, _ in ticks))
        ax.set_xticklabels([f"{t:,}\nd={d:,}" for t, d in sorted(ticks)])
        ax.minorticks_off()
        ax.set_xlabel(f"probe length 2S + d - 1 (bases; S = {segment_length}, d = filler)")
        ax.set_ylabel(label + " (bars: 95% interval)")
        ax.grid(True, alpha=0.3)
    acc_ax.axhline(0.25, color="0.7", lw=0.8, label=RECALL_CHANCE_LABEL)
    # below the axes: the ceilings run across the top of the gain panel
    for ax in (gain_ax, acc_ax):
        ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.3), ncol=2, frameon=False)
    fig.suptitle(f"Recall of a {segment_length}-base segment across real DNA filler")
    return _save(fig, path)


def _interval_bars(frame: Any, column: str) -> np.ndarray | None:
    """``yerr`` for ``column`` from its ``_low``/``_high`` interval (else +- its ``_se``)."""
    low, high = f"{column}_low", f"{column}_high"
    value = frame[column].to_numpy(dtype=float)
    if low in frame and high in frame:
        bars = np.stack([value - frame[low].to_numpy(float), frame[high].to_numpy(float) - value])
        return np.nan_to_num(bars.clip(min=0.0))
    if f"{column}_se" in frame:
        return frame[f"{column}_se"].to_numpy(dtype=float)
    return None


@styled
def plot_training_curves(metrics: Mapping[str, Any], path: Path) -> Path:
    """Training loss (lines) and validation loss (markers) against step, per model.

    ``metrics[name]`` is a DataFrame read from the run's metrics.csv (columns step, train_loss,
    val_loss; empty cells where a value was not logged).
    """
    colors = model_colors(list(metrics))
    fig = new_figure(figsize=(6.4, 4.0))
    ax = fig.subplots()
    for name, frame in metrics.items():
        for column, style, label in (
            ("train_loss", "-", "train"),
            ("val_loss", "o--", "validation"),
        ):
            if column not in frame:
                continue
            part = frame[["step", column]].dropna()
            if part.empty:
                continue
            ax.plot(
                part["step"],
                part[column],
                style,
                color=colors[name],
                lw=1.5 if column == "train_loss" else 1.2,
                ms=4,
                alpha=0.9,
                label=f"{name} {label}",
            )
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("cross-entropy (nats / base)")
    ax.set_title("Training curves")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper right")
    return _save(fig, path)


@styled
def plot_gc_trajectories(
    rows: pd.DataFrame, path: Path, n_prompts: int = 3, window: int = TRAJECTORY_WINDOW
) -> Path:
    """Sliding-window GC% of the reference and of each model's first continuation, a few prompts.

    ``rows`` is the gc_continuations table (columns model, region, reference, continuation).
    """
    regions = list(dict.fromkeys(rows["region"]))[:n_prompts]
    models = list(dict.fromkeys(rows["model"]))
    colors = model_colors(models)
    fig = new_figure(figsize=(7.5, 2.3 * len(regions) + 0.6), layout="constrained")
    axes = fig.subplots(len(regions), 1, sharex=True, squeeze=False)
    for ax, region in zip(axes[:, 0], regions, strict=True):
        subset = rows[rows["region"] == region]
        reference = subset["reference"].iloc[0]
        ref_traj = gc_trajectory(reference, window) * 100
        x = np.arange(ref_traj.size) + window / 2
        ax.plot(x, ref_traj, color=REFERENCE_COLOR, lw=2.2, label="reference")
        for name in models:
            first = subset[subset["model"] == name]
            if first.empty:
                continue
            traj = gc_trajectory(first["continuation"].iloc[0], window) * 100
            ax.plot(x[: traj.size], traj, color=colors[name], lw=1.5, label=name)
        ax.set_ylim(-3, 103)
        ax.set_ylabel("GC (%)")
        ax.set_title(f"{region} (continuation after a {len(subset['prompt'].iloc[0])}-nt prompt)")
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel(f"position in continuation (nt; centre of a {window}-nt window)")
    axes[0, 0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"GC trajectories: reference vs generated ({window}-nt sliding window)")
    return _save(fig, path)


def prior_curves(prior: GoatPrior, max_position: int) -> tuple[np.ndarray, np.ndarray]:
    """u_h(j) and K_rel(d) for j, d = 0..max_position-1: two (H, max_position) float64 arrays.

    K_rel(d) is read through the public API as log_prior(i=d, j=0) - key_bias(0).
    """
    import torch

    device = prior.alpha.device
    with torch.no_grad():
        pos = torch.arange(max_position, device=device)
        u = prior.key_bias(pos).double().cpu().numpy()  # (H, max_position)
        zero = torch.zeros(1, dtype=torch.long, device=device)
        k_full = prior.log_prior(pos, zero)[:, :, 0]  # (H, max_position)
        k_rel = (k_full - prior.key_bias(zero)[:, :1]).double().cpu().numpy()
    return u, k_rel


def prior_attention(prior: GoatPrior, length: int) -> np.ndarray:
    """Causally masked, row-normalised prior softmax_j<=i(K_ij): (H, length, length) float64."""
    import torch

    device = prior.alpha.device
    with torch.no_grad():
        pos = torch.arange(length, device=device)
        logits = prior.log_prior(pos, pos).double()  # (H, L, L)
        mask = torch.ones(length, length, dtype=torch.bool, device=device).tril()
        logits = logits.masked_fill(~mask, float("-inf"))
        return torch.softmax(logits, dim=-1).cpu().numpy()


@styled
def plot_prior_curves(prior: GoatPrior, train_length: int, layer: int, path: Path) -> Path:
    """Per head: the key-only term u_h(j) and the relative term K_rel(d), out to 2x training length."""
    import matplotlib

    span = 2 * train_length
    u, k_rel = prior_curves(prior, span)
    heads = u.shape[0]
    cmap = matplotlib.colormaps["viridis"]
    fig = new_figure(figsize=(11.0, 4.0))
    ax_u, ax_k = fig.subplots(1, 2)
    x = np.arange(span)
    for h in range(heads):
        color = cmap(h / max(heads - 1, 1))
        ax_u.plot(x[1:], u[h, 1:], color=color, lw=1.3, label=f"head {h}")
        ax_u.plot([0], [u[h, 0]], "o", color=color, ms=4)
        ax_k.plot(x, k_rel[h], color=color, lw=1.3, label=f"head {h}")
    for ax in (ax_u, ax_k):
        ax.axvspan(train_length, span, color="0.9", zorder=0, label="beyond training length")
        ax.grid(True, alpha=0.3)
    ax_u.set_xlabel("key position j (bases)")
    ax_u.set_ylabel("u_h(j) (nats, added to logits)")
    ax_u.set_title(f"Layer {layer}: key-only term u_h(j) (dot at j=0: sink)")
    ax_k.set_xlabel("distance d = i - j (bases)")
    ax_k.set_ylabel("K_rel(d) (nats, added to logits)")
    ax_k.set_title(f"Layer {layer}: relative term K_rel(d)")
    handles, labels = ax_k.get_legend_handles_labels()
    ncol = min(heads + 1, 7)
    fig.legend(
        handles,
        labels,
        loc="lower center",
        ncol=ncol,
        bbox_to_anchor=(0.5, -0.08 - 0.05 * ((heads + 1) // 7)),
    )
    fig.tight_layout()
    return _save(fig, path)


@styled
def plot_prior_heatmap(
    prior: GoatPrior, layer: int, path: Path, length: int = 128, train_length: int | None = None
) -> Path:
    """Per head: the causally masked, row-normalised prior exp(K_ij)/sum_j<=i exp(K_ij), log scale.

    Only query and key positions 0..``length``-1 are drawn (`heatmap_positions` says which in
    the title): a reader would otherwise take a map of the first 128 positions for the whole
    ``train_length`` window.
    """
    from matplotlib.colors import LogNorm

    probs = prior_attention(prior, length)  # (H, L, L)
    heads = probs.shape[0]
    cols = min(heads, 4)
    rows = math.ceil(heads / cols)
    fig = new_figure(figsize=(3.1 * cols + 1.0, 3.0 * rows + 0.4), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    positive = probs[probs > 0]
    vmin = max(float(positive.min()), 1e-6)
    norm = LogNorm(vmin=vmin, vmax=1.0)
    image = None
    for h in range(rows * cols):
        ax = axes[h // cols, h % cols]
        if h >= heads:
            ax.axis("off")
            continue
        masked = np.ma.masked_where(probs[h] <= 0, probs[h])
        image = ax.imshow(masked, norm=norm, cmap="magma", interpolation="nearest", origin="upper")
        ax.set_title(f"head {h}")
        ax.set_xlabel("key position j")
        if h % cols == 0:
            ax.set_ylabel("query position i")
    fig.suptitle(
        f"Layer {layer}: masked, normalised prior softmax_j\u2264i(K_ij), "
        + heatmap_positions(length, train_length)
    )
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.9, label="prior probability")
    return _save(fig, path)


def heatmap_positions(length: int, train_length: int | None = None) -> str:
    """Which positions a prior heat map shows, for its title and the report's caption."""
    shown = f"query and key positions 0-{length - 1:,}"
    if train_length is None:
        return shown
    if length < train_length:
        return f"{shown} (the first {length:,} of the {train_length:,}-base training window)"
    if length == train_length:
        return f"{shown} (the whole {train_length:,}-base training window)"
    return f"{shown} (past the {train_length:,}-base training window from {train_length:,} on)"


@styled
def plot_ism(
    scores: np.ndarray,
    ref: np.ndarray,
    path: Path,
    start: int = 0,
    title: str = "",
    score_label: str = "LLR (nats)",
) -> Path:
    """In-silico mutagenesis as gReLU's ``plot_ISM`` draws it: a heatmap of the (L, 4) scores
    (rows A C G T, one column per position, reference cells dotted) under a logo of the
    reference whose letter heights are minus the mean score of the three alternatives, so a
    position where every change costs likelihood stands tall (letters below the axis: changes
    the model prefers). ``start`` is the 0-based contig position of column 0; ``ref`` holds
    tokens A C G T N = 0..4 (N columns stay blank). Letters are drawn by logomaker.
    """
    import logomaker
    import pandas as pd
    from matplotlib.colors import TwoSlopeNorm

    length = len(ref)
    known = ref < 4
    alt_mask = np.arange(4)[None, :] != np.where(known, ref, 0)[:, None]
    alternatives = np.where(alt_mask, scores, np.nan)
    with np.errstate(all="ignore"):
        importance = -np.nanmean(np.where(known[:, None], alternatives, 0.0), axis=1)
    heights = np.zeros((length, 4))
    heights[np.flatnonzero(known), ref[known]] = np.nan_to_num(importance[known])
    width = min(24.0, max(6.0, 0.16 * length + 1.5))
    fig = new_figure(figsize=(width, 3.4), layout="constrained")
    logo_ax, heat_ax = fig.subplots(2, 1, sharex=True, height_ratios=[1.0, 1.3])
    frame = pd.DataFrame(heights, columns=list("ACGT"), index=np.arange(length))
    logomaker.Logo(frame, ax=logo_ax, color_scheme="classic", baseline_width=0.5)
    logo_ax.set_ylabel("-mean " + score_label.split(" ")[0])
    logo_ax.set_title(title or "In-silico mutagenesis")
    finite = scores[np.isfinite(scores)]
    bound = float(np.abs(finite).max()) if finite.size and np.abs(finite).max() > 0 else 1.0
    image = heat_ax.imshow(
        np.ma.masked_invalid(scores.T),
        aspect="auto",
        cmap="RdBu_r",
        norm=TwoSlopeNorm(vcenter=0.0, vmin=-bound, vmax=bound),
        interpolation="nearest",
        extent=(-0.5, length - 0.5, 3.5, -0.5),
    )
    columns = np.flatnonzero(known)
    heat_ax.scatter(columns, ref[known], s=6, c="black", marker="o", linewidths=0)
    heat_ax.set_yticks(range(4), list("ACGT"))
    ticks = np.linspace(0, length - 1, num=min(length, 8)).round().astype(int)
    heat_ax.set_xticks(ticks, [f"{start + 1 + t:,}" for t in ticks])
    heat_ax.set_xlabel("position (1-based)")
    heat_ax.set_ylabel("alternative base")
    fig.colorbar(image, ax=heat_ax, label=score_label, shrink=0.9)
    return _save(fig, path)
