"""The report's figures and tables do not overstate: every estimate has its interval, the
reference lines stand where they belong, and a difference inside the noise is said to be."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import tiny_config
from matplotlib.lines import Line2D

from goatdna.analysis import plots
from goatdna.analysis.evaluate import ContextResult
from goatdna.analysis.recall import summarize_recall
from goatdna.analysis.report_frames import (
    NOT_GPU_MEMORY,
    NOT_SIDE_BY_SIDE,
    difference_text,
    nll_difference,
    paper_frame,
)
from goatdna.metrics import percentile_interval, resampled_ratios


def _captured(monkeypatch: pytest.MonkeyPatch) -> dict:
    figures: dict = {}

    def keep(fig, path):
        figures[Path(path).stem] = fig
        return Path(path)

    monkeypatch.setattr(plots, "_save", keep)
    return figures


def _recall_frame(rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for distance in (13, 157, 1024):
        for trial in range(40):
            first = 1.2 + 0.1 * rng.standard_normal()
            second = first - max(0.0, 0.8 - distance / 2000) + 0.05 * rng.standard_normal()
            rows.append({"trial": trial, "distance": distance, "nll_first": first,
                         "nll_second": second, "copy_accuracy": rng.uniform(0.2, 0.9)})  # fmt: skip
    frame = pd.DataFrame(rows)
    frame["recall_gain"] = frame["nll_first"] - frame["nll_second"]
    return frame


def test_recall_summary_intervals_are_the_trial_bootstrap() -> None:
    frame = _recall_frame(np.random.default_rng(0))
    summary = summarize_recall(frame, train_length=256, segment_length=50)
    for row in summary.itertuples():
        trials = frame[frame["distance"] == row.distance]
        for column in ("recall_gain", "copy_accuracy"):
            values = trials[column].to_numpy()
            low, high = getattr(row, f"{column}_low"), getattr(row, f"{column}_high")
            assert low < getattr(row, column) < high
            rng = np.random.default_rng(0)  # brute force: one resample at a time, same draws
            means = [values[rng.integers(0, values.size, values.size)].mean() for _ in range(1000)]
            assert (low, high) == pytest.approx(tuple(np.quantile(means, [0.025, 0.975])))
    # extrapolation: the probe's 2S + d - 1 inputs against the training length
    assert summary["extrapolation"].tolist() == [False, False, True]  # 2S + 157 - 1 = 256 fits


def test_recall_figure_lines_stand_at_the_training_length_and_the_ceiling(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    figures = _captured(monkeypatch)
    frame = _recall_frame(np.random.default_rng(1))
    segment, train_length = 50, 256
    summaries = {"goat": summarize_recall(frame, train_length, segment)}
    plots.plot_recall(summaries, {"goat": train_length}, segment, tmp_path / "recall.png")
    gain_ax, acc_ax = figures["recall"].axes[:2]
    for ax in (gain_ax, acc_ax):
        vertical = [ln for ln in ax.get_lines() if ln.get_label() == "training length"]
        assert len(vertical) == 1
        assert list(vertical[0].get_xdata()) == [train_length, train_length]  # not 157
        points = [c for c in ax.containers if c.get_label() == "goat"][0].lines[0]
        assert list(points.get_xdata()) == [2 * segment + d - 1 for d in (13, 157, 1024)]
    # the distance whose probe just fits (d = L + 1 - 2S) stands left of or on the line
    assert 2 * segment + (train_length + 1 - 2 * segment) - 1 == train_length
    ceilings = [ln for ln in gain_ax.get_lines() if "perfect copy" in str(ln.get_label())]
    assert len(ceilings) == 1
    assert ceilings[0].get_ydata()[0] == pytest.approx(summaries["goat"]["nll_first"].mean())
    assert all(ln.get_ydata()[0] != pytest.approx(math.log(4)) for ln in gain_ax.get_lines()
               if isinstance(ln, Line2D) and len(set(ln.get_ydata())) == 1)  # fmt: skip
    # error bars: the summary's bootstrap intervals
    bars = [c for c in gain_ax.containers if c.get_label() == "goat"][0]
    segments = bars.lines[2][0].get_segments()
    for (x0, y0), (_, y1) in (s for s in segments):
        row = summaries["goat"][2 * segment + summaries["goat"]["distance"] - 1 == x0].iloc[0]
        assert (y0, y1) == pytest.approx((row.recall_gain_low, row.recall_gain_high))


def test_recall_figure_labels_its_baselines(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The grey lines at gain 0 and accuracy 0.25 are named in each panel's legend."""
    figures = _captured(monkeypatch)
    summaries = {"goat": summarize_recall(_recall_frame(np.random.default_rng(2)), 256, 50)}
    plots.plot_recall(summaries, {"goat": 256}, 50, tmp_path / "recall.png")
    gain_ax, acc_ax = figures["recall"].axes[:2]
    for ax, label, level in ((gain_ax, "no recall (gain 0)", 0.0),
                             (acc_ax, "chance (1 of 4 bases)", 0.25)):  # fmt: skip
        lines = [ln for ln in ax.get_lines() if ln.get_label() == label]
        assert len(lines) == 1 and list(lines[0].get_ydata()) == [level, level]
        legend = ax.get_legend()
        assert legend is not None and label in [t.get_text() for t in legend.get_texts()]


def test_prior_heatmap_says_which_positions_it_shows(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import torch

    from goatdna.model import DNADecoder

    figures = _captured(monkeypatch)
    torch.manual_seed(0)
    config = tiny_config()
    prior = DNADecoder(config).blocks[0].attn.prior
    plots.plot_prior_heatmap(prior, 0, tmp_path / "part.png", 16, train_length=32)
    title = figures["part"].get_suptitle()
    assert "positions 0-15 (the first 16 of the 32-base training window)" in title
    assert figures["part"].axes[0].get_images()[0].get_array().shape == (16, 16)
    plots.plot_prior_heatmap(prior, 0, tmp_path / "whole.png", 32, train_length=32)
    assert "positions 0-31 (the whole 32-base training window)" in figures["whole"].get_suptitle()


def test_paper_table_memory_row_says_gpu_memory_against_cpu_rss() -> None:
    summary = pd.DataFrame(
        {"model": ["goat", "rope"], "val_nll": [1.2, 1.3], "bits_per_base": [1.7, 1.9],
         "tokens_per_s": [1.0, 1.0], "peak_memory_gb": [0.6, 0.5]}
    )  # fmt: skip

    def memory_row(devices: dict[str, object] | None) -> pd.Series:
        table = paper_frame(summary, "goat", "rope", None, devices)
        return table[table["metric"].str.startswith("peak memory")].iloc[0]

    cpu = memory_row({"goat": "cpu", "rope": "cpu"})
    assert cpu["metric"] == (
        "peak memory, GB (paper: GPU memory, CUDA max allocated; ours: process peak RSS on CPU)"
    )
    assert cpu["ours GOAT vs RoPE"] == "+20.0%" + NOT_GPU_MEMORY
    gpu = memory_row({"goat": "NVIDIA H100 80GB HBM3", "rope": "NVIDIA H100 80GB HBM3"})
    assert gpu["metric"].endswith("ours: GPU memory, CUDA max allocated)")
    assert gpu["ours GOAT vs RoPE"] == "+20.0%"
    mixed = memory_row({"goat": "NVIDIA H100 80GB HBM3", "rope": "cpu"})["metric"]
    assert "RoPE process peak RSS on CPU; GOAT GPU memory" in mixed
    assert "RSS on CPU" in memory_row(None)["metric"]  # no devices: both measures named


def _result(nll: float, resampled: np.ndarray, windows: int = 10) -> ContextResult:
    low, high = percentile_interval(resampled)
    return ContextResult(
        context_length=64, extrapolation=False, windows=windows, bases=640, nll=nll,
        bits_per_base=nll / math.log(2), perplexity=math.exp(nll), repeat_bases=0,
        repeat_nll=math.nan, repeat_bits_per_base=math.nan, nonrepeat_bases=640,
        nonrepeat_nll=nll, nonrepeat_bits_per_base=nll / math.log(2), nll_low=low,
        nll_high=high, resampled_nll=resampled,
    )  # fmt: skip


def test_nll_figure_draws_each_points_interval(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    figures = _captured(monkeypatch)
    frame = pd.DataFrame({"context_length": [64, 128], "nll": [1.30, 1.29],
                          "nll_low": [1.28, 1.25], "nll_high": [1.33, 1.31]})  # fmt: skip
    plots.plot_nll_vs_context({"goat": frame}, {"goat": 64}, tmp_path / "nll.png")
    ax = figures["nll"].axes[0]
    bars = [c for c in ax.containers if c.get_label() == "goat"][0]
    got = sorted((float(a[1]), float(b[1])) for a, b in bars.lines[2][0].get_segments())
    # pytest.approx takes flat sequences only (pytest 9.2 raises on nested ones)
    assert [v for segment in got for v in segment] == pytest.approx([1.25, 1.31, 1.28, 1.33])
    low, high = ax.get_ylim()
    assert low <= 1.25 and high >= 1.33  # the axis holds the intervals, not just the points


def test_differences_inside_the_noise_are_marked_and_throughput_is_caveated() -> None:
    rng = np.random.default_rng(0)
    sums, counts = rng.normal(80, 5, 50), np.full(50, 64)
    a = resampled_ratios(sums, counts)
    noisy = _result(float(sums.sum() / counts.sum()), a, 50)
    close = _result(noisy.nll + 1e-4, resampled_ratios(sums + rng.normal(0, 3, 50), counts), 50)
    far = _result(noisy.nll - 0.2, a - 0.2, 50)
    inside, outside = nll_difference(close, noisy), nll_difference(far, noisy)
    assert inside.paired and inside.within_noise and "inside the noise" in difference_text(inside)
    assert not outside.within_noise and outside.high < 0
    assert outside.value == pytest.approx(-0.2) and outside.low == pytest.approx(-0.2)
    summary = pd.DataFrame(
        {"model": ["goat", "rope"], "val_nll": [close.nll, noisy.nll],
         "bits_per_base": [close.bits_per_base, noisy.bits_per_base],
         "tokens_per_s": [7750.0, 10000.0], "peak_memory_gb": [0.5, 0.5]}
    )  # fmt: skip
    table = paper_frame(summary, "goat", "rope", inside).set_index("metric")["ours GOAT vs RoPE"]
    assert table["training tokens/s"] == "-22.5%" + NOT_SIDE_BY_SIDE
    assert table["validation NLL (nats/base)"].endswith("(inside the noise)")
    far_table = paper_frame(summary, "goat", "rope", outside).set_index("metric")
    assert "noise" not in far_table.loc["validation NLL (nats/base)", "ours GOAT vs RoPE"]


def test_gc_summary_intervals_are_the_continuation_bootstrap() -> None:
    from goatdna.analysis.gc import SampleStats, summarize_samples

    rng = np.random.default_rng(3)
    stats = [
        SampleStats(0.4, 0.4 + 0.05 * rng.standard_normal(), float(rng.uniform(-0.5, 0.9)),
                    float(rng.uniform(0.2, 0.5)))
        for _ in range(30)
    ]  # fmt: skip
    seqs = ["ACGTACGTAC"] * 30
    summary = summarize_samples(stats, seqs, seqs, ks=(1,))
    err = np.array([s.gc_continuation - s.gc_reference for s in stats])

    def brute(values: np.ndarray) -> tuple[float, float]:
        draws = np.random.default_rng(0)
        means = [values[draws.integers(0, values.size, values.size)].mean() for _ in range(1000)]
        return tuple(np.quantile(means, [0.025, 0.975]))

    assert (summary.gc_mae_low, summary.gc_mae_high) == pytest.approx(brute(np.abs(err)))
    low, high = brute(err**2)
    assert (summary.gc_rmse_low, summary.gc_rmse_high) == pytest.approx((low**0.5, high**0.5))
    accuracy = np.array([s.base_accuracy for s in stats])
    assert (summary.base_accuracy_low, summary.base_accuracy_high) == pytest.approx(brute(accuracy))
    for name in ("gc_mae", "gc_rmse", "gc_pearson", "base_accuracy"):
        low, high = getattr(summary, f"{name}_low"), getattr(summary, f"{name}_high")
        assert low < getattr(summary, name) < high, name


def test_tables_show_each_estimate_with_its_interval() -> None:
    from goatdna.analysis.report_frames import SUMMARY_FORMATS, interval_text, with_intervals

    frame = pd.DataFrame({"model": ["goat"], "val_nll": [1.23456], "val_nll_low": [1.2],
                          "val_nll_high": [1.3], "gc_pearson": [0.1], "gc_pearson_low": [-0.2],
                          "gc_pearson_high": [0.4]})  # fmt: skip
    shown = with_intervals(frame, SUMMARY_FORMATS)
    assert list(shown.columns) == ["model", "val_nll", "gc_pearson"]
    assert shown.loc[0, "val_nll"] == "1.2346 (1.2000-1.3000)"
    assert shown.loc[0, "gc_pearson"] == "0.100 (-0.200 to 0.400)"
    assert interval_text(math.nan, 1.0) == "n/a"


def test_recipe_names_genome_py_configs_and_goatdnas_own() -> None:
    """`recipe_of`: the paper-dna configs are genome.py's recipe, the 125M ones goatdna's; an old
    run config without the newer keys is goatdna's with '?' for what it lacks."""
    from goatdna.analysis.report_runs import recipe_of
    from goatdna.configfile import to_dict
    from goatdna.training import load_run_config

    configs = Path(__file__).resolve().parents[1] / "configs"
    paper = to_dict(load_run_config(configs / "goat-paper-dna.yaml"))
    assert (
        recipe_of(paper)
        == "genome.py's (paper-dna config), 8 x 512, 1,000 steps of 8 x 1,024 bases"
    )
    ours = to_dict(load_run_config(configs / "rope-125m.yaml"))
    assert recipe_of(ours).startswith("goatdna's, ")
    paper["optim"]["betas"] = [0.9, 0.95]  # genome.py's block with goatdna's AdamW: not its recipe
    assert recipe_of(paper).startswith("goatdna's, 8 x 512")
    assert (
        recipe_of({"model": {"n_layers": 2, "d_model": 64}})
        == "goatdna's, 2 x 64, ? steps of ? x ? bases"
    )
