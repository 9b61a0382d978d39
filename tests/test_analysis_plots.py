"""The report's figures leave matplotlib's global state alone (backend, rcParams, pyplot's figure
registry) and still draw in the house style; every model gets a colour however many there are."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
from helpers import tiny_config

from goatdna.analysis import plots

MODELS = ["goat", "rope", "alibi", "nope", "rope-ntk"]


def _inputs(tmp_path: Path) -> list[tuple[str, object]]:
    """(name, call) for every plotting function, on small hand-made data."""
    import torch

    from goatdna.model import DNADecoder

    torch.manual_seed(0)
    model = DNADecoder(tiny_config(train_length=16))
    prior = model.blocks[0].attn.prior
    lengths = [16, 32, 64]
    evaluations = {
        m: pd.DataFrame({"context_length": lengths, "nll": [1.3 - 0.01 * i, 1.29, 1.31]})
        for i, m in enumerate(MODELS)
    }
    metrics = {
        m: pd.DataFrame(
            {"step": [5, 10, 15], "train_loss": [1.4, 1.35, 1.3], "val_loss": [np.nan, 1.36, 1.32]}
        )
        for m in MODELS
    }
    rng = np.random.default_rng(0)
    seq = lambda n: "".join(rng.choice(list("ACGT"), n))  # noqa: E731
    gc_rows = pd.DataFrame(
        [
            {"model": m, "region": f"chr{r}:1-60", "prompt": seq(30), "reference": seq(60),
             "continuation": seq(60)}
            for r in range(2) for m in MODELS
        ]
    )  # fmt: skip
    recall = {
        m: pd.DataFrame(
            {"distance": [1, 8, 64], "recall_gain": [0.5, 0.2, 0.0],
             "recall_gain_se": [0.05, 0.04, 0.03], "copy_accuracy": [0.7, 0.5, 0.25]}
        )
        for m in MODELS
    }  # fmt: skip
    train = dict.fromkeys(MODELS, 16)
    return [
        ("nll", lambda: plots.plot_nll_vs_context(evaluations, train, tmp_path / "nll.png")),
        ("training", lambda: plots.plot_training_curves(metrics, tmp_path / "training.png")),
        ("gc", lambda: plots.plot_gc_trajectories(gc_rows, tmp_path / "gc.png", 2, 10)),
        ("recall", lambda: plots.plot_recall(recall, train, 4, tmp_path / "recall.png")),
        ("curves", lambda: plots.plot_prior_curves(prior, 16, 0, tmp_path / "curves.png")),
        ("heatmap", lambda: plots.plot_prior_heatmap(prior, 0, tmp_path / "heatmap.png", 16)),
    ]


def test_plots_leave_backend_and_rcparams_alone(tmp_path: Path) -> None:
    previous = matplotlib.get_backend()
    matplotlib.use("svg")  # not the Agg backend the figures are written with
    try:
        backend = matplotlib.get_backend()
        params = matplotlib.rcParams.copy()
        for name, draw in _inputs(tmp_path):
            path = draw()
            assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n"), name
            assert matplotlib.get_backend() == backend, name
            changed = {k for k in params if matplotlib.rcParams[k] != params[k]}
            assert not changed, (name, sorted(changed))
        if "matplotlib.pyplot" in __import__("sys").modules:
            import matplotlib.pyplot as plt

            assert plt.get_fignums() == []  # nothing left open in pyplot's registry
    finally:
        matplotlib.use(previous)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{n}.png" for n in ("nll", "training", "gc", "recall", "curves", "heatmap")
    )  # written atomically: no temporary file left behind


def test_figures_use_the_house_style_and_show_every_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = {}

    def keep(fig, path):
        figures[Path(path).stem] = fig
        return Path(path)

    monkeypatch.setattr(plots, "_save", keep)
    for _, draw in _inputs(tmp_path):
        draw()
    for name in ("nll", "training", "gc", "recall"):
        ax = figures[name].axes[0]
        assert not ax.spines["top"].get_visible(), name  # STYLE applied while drawing
        if ax.get_title():
            assert ax.title.get_fontsize() == plots.STYLE["axes.titlesize"], name
        labels = {t.get_text() for a in figures[name].axes if a.get_legend() for t in
                  a.get_legend().get_texts()}  # fmt: skip
        for model in MODELS:
            assert any(label.startswith(model) for label in labels), (name, model, labels)
    assert matplotlib.rcParams["axes.spines.top"] == matplotlib.rcParamsDefault["axes.spines.top"]


def test_model_colors_any_number_of_models() -> None:
    names = ["goat-a", "rope-b"] + [f"run{i}" for i in range(15)]
    colors = plots.model_colors(names)
    assert set(colors) == set(names)
    assert colors["goat-a"] == "#d95f02" and colors["rope-b"] == "#1b9e77"
    assert len({colors[n] for n in names[:6]}) == 6  # distinct while the palette lasts
