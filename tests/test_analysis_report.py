"""`goatdna report` end to end on two tiny trained runs, and the notebook on its outputs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from Bio.SeqUtils import gc_fraction as bio_gc_fraction
from typer.testing import CliRunner

from goatdna.analysis.gc_study import GC_COLUMNS
from goatdna.analysis.report import SUMMARY_COLUMNS
from goatdna.cli.app import app

REPO_ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO_ROOT / "notebooks" / "goat_prior_and_gc.ipynb"
CONTEXTS = "128,256"
EVAL_TOKENS = "4096"
PROMPTS = 6

runner = CliRunner()


@pytest.fixture(scope="module")
def tiny_report(tiny_runs: dict[str, Path], synthetic_shards: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report"
    res = runner.invoke(
        app,
        [
            "report", "--run", str(tiny_runs["goat"]), "--run", str(tiny_runs["rope"]),
            "--data", str(synthetic_shards), "--out", str(out), "--context-lengths", CONTEXTS,
            "--max-eval-tokens", EVAL_TOKENS, "--prompts", str(PROMPTS), "--num-samples", "2",
            "--threads", "1",
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    return out


def test_report_files_tables_and_numbers(
    tiny_report: Path, tiny_runs: dict[str, Path], synthetic_shards: Path, tmp_path: Path
) -> None:
    for name in (
        "summary.csv", "report.md", "report.html", "evaluation.csv", "evaluation.json",
        "gc_continuations.csv", "gc_summary.csv", "nll_vs_context.png", "training_curves.png",
        "gc_trajectories.png", "prior_curves_goat_layer1.png", "prior_heatmap_goat_layer1.png",
    ):  # fmt: skip
        assert (tiny_report / name).is_file() and (tiny_report / name).stat().st_size > 0, name

    summary = pd.read_csv(tiny_report / "summary.csv")
    assert list(summary.columns) == SUMMARY_COLUMNS
    assert summary["model"].tolist() == ["goat", "rope"]
    assert summary["positional"].tolist() == ["goat", "rope"]
    numbers = summary.drop(columns=["model", "positional"]).to_numpy(dtype=float)
    assert np.isfinite(numbers).all()
    np.testing.assert_allclose(
        summary["bits_per_base"], summary["val_nll"] / math.log(2), rtol=1e-12
    )

    evaluation = pd.read_csv(tiny_report / "evaluation.csv")
    assert np.isfinite(evaluation[["nll", "bits_per_base", "perplexity"]].to_numpy()).all()
    assert sorted(set(evaluation["context_length"])) == [128, 256]

    for row in summary.itertuples():
        run_summary = json.loads((tiny_runs[row.model] / "summary.json").read_text())
        assert row.tokens_per_s == pytest.approx(run_summary["tokens_per_s"])
        assert row.peak_memory_gb == pytest.approx(run_summary["peak_memory_bytes"] / 1e9)
        assert row.params == run_summary["params"]
        # summary.csv equals what `goatdna evaluate` reports for the same checkpoint and split.
        out = tmp_path / row.model
        res = runner.invoke(
            app,
            [
                "evaluate", "--checkpoint", str(tiny_runs[row.model] / "checkpoints" / "best.ckpt"),
                "--data", str(synthetic_shards), "--split", "val", "--context-lengths", CONTEXTS,
                "--max-eval-tokens", EVAL_TOKENS, "--out", str(out),
            ],
        )  # fmt: skip
        assert res.exit_code == 0, res.output
        alone = pd.read_csv(out / "evaluation.csv")
        # val_nll: the run's validation windows, so summary.json's number for best.ckpt.
        assert row.val_nll == pytest.approx(run_summary["best_val_loss"], abs=1e-5)
        mine = evaluation[evaluation["model"] == row.model].reset_index(drop=True)
        np.testing.assert_allclose(mine["nll"], alone["nll"], rtol=1e-12)

    # Trained models beat the unigram-ish 2 bits/base of random DNA on this genome.
    assert (summary["bits_per_base"] < 2.0).all()


def test_gc_continuations_table(tiny_report: Path) -> None:
    rows = pd.read_csv(tiny_report / "gc_continuations.csv", keep_default_na=False)
    assert list(rows.columns) == GC_COLUMNS
    assert len(rows) == 2 * PROMPTS * 2  # two models x prompts x 2 samples
    for name, part in rows.groupby("model"):
        assert part["sample"].tolist() == list(range(2 * PROMPTS)), name
    goat, rope = (rows[rows["model"] == m].reset_index(drop=True) for m in ("goat", "rope"))
    assert goat["region"].tolist() == rope["region"].tolist()  # same prompts for both models
    assert goat["reference"].tolist() == rope["reference"].tolist()
    for r in rows.itertuples():
        assert len(r.prompt) == 200 and len(r.reference) == 200 and len(r.continuation) == 200
        assert set(r.prompt + r.reference) <= set("ACGT")
        assert set(r.continuation) <= set("ACGT")
        assert r.gc_reference == pytest.approx(bio_gc_fraction(r.reference), abs=1e-12)
        assert r.gc_continuation == pytest.approx(bio_gc_fraction(r.continuation), abs=1e-12)
        assert 0.0 <= r.base_accuracy <= 1.0
        assert r.gc_traj_pearson == "" or -1.0 <= float(r.gc_traj_pearson) <= 1.0


def test_report_documents(tiny_report: Path) -> None:
    md = (tiny_report / "report.md").read_text()
    for needle in ("| model | positional | params", "1.2054", "1.1294", "1.739", "1.629",
                   "139,886", "138,171", "2.86", "1.83", "extrapolation", "![", "GOAT prior",
                   "Long-range recall"):  # fmt: skip
        assert needle in md, needle
    html = (tiny_report / "report.html").read_text()
    pngs = sorted(p.name for p in tiny_report.glob("*.png"))
    assert html.count('src="data:image/png;base64,') == len(pngs) == 6
    assert 'src="http' not in html and '.png"' not in html  # self-contained
    assert html.count("<table>") >= 5


def test_report_recall_probe_equals_probe_recall(
    tiny_report: Path, tiny_runs: dict[str, Path], synthetic_shards: Path, tmp_path: Path
) -> None:
    from goatdna.analysis.recall import probe_recall

    trials = pd.read_csv(tiny_report / "recall_trials.csv")
    keys = ["trial", "distance", "segment_start", "filler_start"]
    goat, rope = (trials[trials["model"] == m].reset_index(drop=True) for m in ("goat", "rope"))
    assert len(goat) == 16 * 3 and goat[keys].equals(rope[keys])  # the same trials for both
    assert sorted(set(goat["distance"])) == [7, 29, 512]  # 2 x 50 + 29 - 1 = 128; 4 x 128
    in_report = pd.read_csv(tiny_report / "recall_summary.csv")
    alone = probe_recall(
        tiny_runs["goat"] / "checkpoints" / "best.ckpt", synthetic_shards, tmp_path,
        [7, 29, 512], 50, 16,
    )  # fmt: skip
    mine = in_report[in_report["model"] == "goat"].reset_index(drop=True)
    np.testing.assert_allclose(mine["recall_gain"], alone["recall_gain"], rtol=1e-9)
    assert mine["extrapolation"].tolist() == [False, False, True]


def test_report_bad_input(
    tiny_runs: dict[str, Path], synthetic_shards: Path, tmp_path: Path
) -> None:
    res = runner.invoke(
        app, ["report", "--run", str(tmp_path / "nope"), "--data", str(synthetic_shards),
              "--out", str(tmp_path / "r")],
    )  # fmt: skip
    assert res.exit_code == 2 and "run directory not found" in res.stderr
    res = runner.invoke(
        app,
        ["report", "--run", str(tiny_runs["goat"]), "--data", str(synthetic_shards),
         "--out", str(tmp_path / "r"), "--prior-layer", "7", "--prompts", "2",
         "--max-eval-tokens", "512", "--context-lengths", "128"],
    )  # fmt: skip
    assert res.exit_code == 2 and "--prior-layer 7" in res.stderr


def test_notebook_runs_on_the_report(
    tiny_report: Path, tiny_runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("GOATDNA_REPORT_DIR", str(tiny_report))
    monkeypatch.setenv("GOATDNA_CHECKPOINT", str(tiny_runs["goat"] / "checkpoints" / "best.ckpt"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, kernel_name="python3", timeout=120, resources={
        "metadata": {"path": str(REPO_ROOT)}}).execute()  # fmt: skip
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert sum(1 for o in outputs if "image/png" in o.get("data", {})) >= 3
    text = "".join(o.get("text", "") for o in outputs)
    assert "GC summary recomputed from gc_continuations.csv matches summary.csv" in text


def test_recall_probe_too_long_for_the_split_fails_before_any_work(
    tiny_runs: dict[str, Path], synthetic_shards: Path, tmp_path: Path, monkeypatch
) -> None:
    import goatdna.analysis.report as report_module

    def no_work(*args, **kwargs):
        raise AssertionError("evaluation started before the recall probe was checked")

    monkeypatch.setattr(report_module, "evaluate_model", no_work)
    out = tmp_path / "report"
    res = runner.invoke(
        app,
        ["report", "--run", str(tiny_runs["goat"]), "--data", str(synthetic_shards),
         "--out", str(out), "--recall-distances", "100000000"],
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "no record of at least" in res.output
    assert not out.exists()
