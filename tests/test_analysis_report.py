"""`goatdna report` end to end on two tiny trained runs, and the notebook on its outputs."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from Bio.SeqUtils import gc_fraction as bio_gc_fraction
from helpers import assert_one_error_line, invoke

from goatdna.analysis.gc_study import GC_COLUMNS
from goatdna.analysis.report import SUMMARY_COLUMNS
from goatdna.checkpoint import best_checkpoint
from goatdna.data_prep import ShardedGenome

REPO_ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO_ROOT / "notebooks" / "goat_prior_and_gc.ipynb"
CONTEXTS = "128,256"
EVAL_TOKENS = "4096"
PROMPTS = 6


@pytest.fixture(scope="module")
def tiny_report(tiny_runs: dict[str, Path], synthetic_shards: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report"
    res = invoke(
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

    inputs = json.loads((tiny_report / "inputs.json").read_text())  # what it was built from
    assert inputs["manifest_sha256"] == ShardedGenome(synthetic_shards).manifest_sha256
    assert [c["path"] for c in inputs["checkpoints"]] == [
        str(best_checkpoint(tiny_runs[name]).resolve()) for name in ("goat", "rope")
    ]
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
        res = invoke(
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
        # the same windows resampled alike: the same intervals, each holding its estimate
        np.testing.assert_allclose(mine[["nll_low", "nll_high"]], alone[["nll_low", "nll_high"]])
        assert (mine["nll_low"] <= mine["nll"]).all() and (mine["nll"] <= mine["nll_high"]).all()
        for column in ("val_nll", "gc_mae", "gc_rmse", "base_accuracy"):
            low, high = getattr(row, f"{column}_low"), getattr(row, f"{column}_high")
            assert low <= getattr(row, column) <= high, column

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
                   "Long-range recall", "ours: process peak RSS on CPU",
                   "not GPU memory as the paper's", "Shown: query and key positions 0-"):  # fmt: skip
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
    res = invoke(
        ["report", "--run", str(tmp_path / "nope"), "--data", str(synthetic_shards),
              "--out", str(tmp_path / "r")],
    )  # fmt: skip
    assert res.exit_code == 2 and "run directory not found" in res.stderr
    res = invoke(
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
    res = invoke(
        ["report", "--run", str(tiny_runs["goat"]), "--data", str(synthetic_shards),
         "--out", str(out), "--recall-distances", "100000000"],
    )  # fmt: skip
    line = assert_one_error_line(res, "no record of at least", "--recall-distances")
    assert re.search(r"(?<!recall)--distances", line) is None, line  # probe-recall's flag
    assert not out.exists()


def test_bad_recall_distances_name_reports_own_flag(
    tiny_runs: dict[str, Path], synthetic_shards: Path, tmp_path: Path
) -> None:
    """`report --recall-distances x` names --recall-distances (it once said --distances, the
    flag of probe-recall, which shares the parser)."""
    out = tmp_path / "report"
    res = invoke(
        ["report", "--run", str(tiny_runs["goat"]), "--data", str(synthetic_shards),
         "--out", str(out), "--recall-distances", "x"],
    )  # fmt: skip
    line = assert_one_error_line(res, "--recall-distances 'x'")
    assert re.search(r"(?<!recall)--distances", line) is None, line
    assert not out.exists()


SECTIONS_TWO_RUNS = [
    "Summary",
    "The paper's DNA numbers beside ours",
    "NLL vs context length (extrapolation)",
    "Repeats vs unique sequence",
    "Training curves",
    "GC% of continuations",
    "Long-range recall (DNA passkey probe)",
    "GOAT prior of goat, layer 1",
    "Masked, normalised prior of goat, layer 1",
]


def _headings(md: str, html_text: str) -> list[str]:
    """The ## headings of report.md, checked to be the <h2>s of report.html in the same order."""
    import html as html_lib
    import re

    in_md = re.findall(r"^## (.*)$", md, flags=re.M)
    in_html = [html_lib.unescape(h) for h in re.findall(r"<h2>(.*?)</h2>", html_text)]
    assert in_html == in_md
    return in_md


def test_each_section_once(tiny_report: Path) -> None:
    md = (tiny_report / "report.md").read_text()
    headings = _headings(md, (tiny_report / "report.html").read_text())
    assert headings == SECTIONS_TWO_RUNS
    assert md.count("# goatdna report: goat vs rope\n") == 1
    assert md.count("| model | distance | nll_first |") == 1  # the recall table once
    # the paper table names the recipe behind each column (tiny_runs: goat-tiny shrunk)
    recipe = "goatdna's, 2 x 64, 100 steps of 16 x 128 bases"
    paper = "the paper's (~125M, hg38, bf16)"
    assert md.count(f"| recipe | {paper} | {paper} |  | {recipe} | {recipe} |  |") == 1


def _fake_run(source: Path, dest: Path, **model_changes) -> Path:
    """A copy of a trained run whose checkpoint says ``model_changes`` (weights re-initialised
    when the positional scheme changes), recorded as trained on other shards."""
    import copy
    import shutil

    import torch

    from goatdna.checkpoint import load_checkpoint, save_checkpoint
    from goatdna.configfile import from_dict
    from goatdna.model import DNADecoder, ModelConfig

    shutil.copytree(source, dest)
    loaded = load_checkpoint(source / "checkpoints" / "best.ckpt")
    model, config = loaded.model, copy.deepcopy(dict(loaded.run_config))
    config["model"].update(model_changes)
    fresh = DNADecoder(from_dict(ModelConfig, dict(config["model"]), "model"))
    if "positional" in model_changes:
        torch.manual_seed(0)
        model = fresh
    else:
        fresh.load_state_dict(model.state_dict())
        model = fresh
    summary = json.loads((dest / "summary.json").read_text())
    summary["params"] = model.num_params()
    if "positional" in model_changes:
        config["data_manifest_sha256"] = summary["data_manifest_sha256"] = "f" * 64
    (dest / "summary.json").write_text(json.dumps(summary))
    save_checkpoint(dest / "checkpoints" / "best.ckpt", model, config)
    (dest / "checkpoints" / "last.ckpt").unlink(missing_ok=True)
    return dest


MANY = ["goat", "rope", "alibi", "rope-ntk"]


@pytest.fixture(scope="module")
def many_runs_report(
    tiny_runs: dict[str, Path], synthetic_shards: Path, tmp_path_factory
) -> tuple[Path, dict[str, set[str]]]:
    """A report over four runs (GOAT, RoPE, an ALiBi run and RoPE with NTK extension) and the
    legend entries of each figure it drew."""
    import goatdna.analysis.plots as plots

    root = tmp_path_factory.mktemp("many")
    runs = {
        "goat": tiny_runs["goat"],
        "rope": tiny_runs["rope"],
        "alibi": _fake_run(tiny_runs["rope"], root / "alibi", positional="alibi"),
        "rope-ntk": _fake_run(tiny_runs["rope"], root / "ntk", rope_extension="ntk"),
    }
    legends: dict[str, set[str]] = {}

    def legend_only(fig, path):  # what each figure shows, without rendering PNGs
        legends[Path(path).stem] = {
            t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()
        }
        Path(path).write_bytes(b"\x89PNG\r\n\x1a\n")
        return Path(path)

    out = root / "report"
    args = ["report", "--data", str(synthetic_shards), "--out", str(out), "--context-lengths",
            CONTEXTS, "--max-eval-tokens", "2048", "--prompts", "2", "--recall-trials", "4"]  # fmt: skip
    for name in MANY:
        args += ["--run", str(runs[name]), "--name", name]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plots, "_save", legend_only)
        res = invoke(args)
    assert res.exit_code == 0, res.output
    return out, legends


def test_report_shows_every_run(many_runs_report: tuple[Path, dict[str, set[str]]]) -> None:
    out, legends = many_runs_report
    summary = pd.read_csv(out / "summary.csv")
    assert summary["model"].tolist() == MANY
    assert summary["positional"].tolist() == ["goat", "rope", "alibi", "rope"]
    evaluation = pd.read_csv(out / "evaluation.csv")
    assert sorted(set(evaluation["model"])) == sorted(MANY)
    nll = evaluation.set_index(["model", "context_length"])["nll"]
    # NTK-aware extension changes nothing within the training length, and acts beyond it.
    assert nll["rope-ntk", 128] == pytest.approx(nll["rope", 128], rel=1e-6)
    assert nll["rope-ntk", 256] != pytest.approx(nll["rope", 256], rel=1e-6)
    for table in ("gc_continuations.csv", "gc_summary.csv", "recall_summary.csv",
                  "recall_trials.csv"):  # fmt: skip
        assert sorted(set(pd.read_csv(out / table)["model"])) == sorted(MANY), table

    md = (out / "report.md").read_text()
    headings = _headings(md, (out / "report.html").read_text())
    assert len(headings) == len(set(headings))
    assert headings[0] == "Warnings" and "run alibi was trained on shards" in md
    assert "Ours: `rope` (RoPE) -> `goat` (GOAT)" in md  # the paper table: plain RoPE vs GOAT
    assert "`rope-ntk` = rope+ntk" in md
    columns = " | ".join(f"{name} nll | {name} nll 95% CI | {name} bits/base" for name in MANY)
    assert md.count(f"| context_length | x_train_length | {columns} |") == 1
    for name in MANY:
        assert md.count(f"\n| {name} | {name.split('-')[0]} | ") == 1, name  # summary row
        assert md.count(f"\n| {name} | 128 |") == 1, name  # repeat-table row
        assert md.count(f"\n| {name} | 2 |") == 1, name  # GC-table row (2 samples)
        for distance in (7, 29, 512):  # recall-table rows
            assert md.count(f"\n| {name} | {distance} |") == 1, (name, distance)
    for figure in ("nll_vs_context", "training_curves", "gc_trajectories", "recall"):
        for name in MANY:
            assert any(label.startswith(name) for label in legends[figure]), (figure, name)
    assert [p for p in legends if p.startswith("prior")] == [
        "prior_curves_goat_layer1", "prior_heatmap_goat_layer1"
    ]  # fmt: skip


def test_report_markdown_reads_literally_in_html(tmp_path: Path) -> None:
    """Names full of Markdown and HTML syntax come out of report.html as written."""
    from goatdna.analysis.report_render import code, html_document, markdown_table

    name = "*bold* <b>x</b> | _y_ [z](w) \\"
    md = "\n\n".join([
        markdown_table([["model", "x_train_length"], [name, "1x"]]),
        "Run " + code("a `b` c") + ".",
        "![plot](<figure.png>)",
    ]) + "\n"  # fmt: skip
    (tmp_path / "figure.png").write_bytes(b"\x89PNG fake")
    page = html_document(md, "title <t>", tmp_path)
    assert "<td>*bold* &lt;b&gt;x&lt;/b&gt; | _y_ [z](w) \\</td>" in page
    assert "<th>x_train_length</th>" in page
    assert "<code>a `b` c</code>" in page
    assert "<title>title &lt;t&gt;</title>" in page
    assert 'src="data:image/png;base64,iVBORyBmYWtl"' in page  # b64 of the file's bytes
    with pytest.raises(ValueError, match="not a file name"):
        html_document("![x](<../figure.png>)\n", "t", tmp_path)


def test_report_is_current_compares_what_the_report_was_built_from(
    tiny_runs: dict[str, Path], synthetic_shards: Path, tmp_path: Path
) -> None:
    """`report_is_current` (what `goatdna demo` keeps a report by): the report.html there and an
    inputs.json equal to `report_inputs` now; a damaged inputs.json is said, never trusted."""
    from goatdna.analysis.report import INPUTS_FILE, ReportOptions, report_inputs
    from goatdna.analysis.report import report_is_current as current

    runs = [tiny_runs["goat"], tiny_runs["rope"]]
    options = ReportOptions(runs=runs, data_dir=synthetic_shards, out_dir=tmp_path / "r")
    said: list[str] = []
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / INPUTS_FILE).write_text(json.dumps(report_inputs(options)))
    assert not current(options, said.append)  # no report.html: nothing to keep
    (tmp_path / "r" / "report.html").write_text("<html></html>")
    assert current(options, said.append)
    other = ReportOptions(runs=runs, data_dir=synthetic_shards, out_dir=tmp_path / "r", seed=1)
    assert not current(other, said.append)
    assert said == []
    (tmp_path / "r" / INPUTS_FILE).write_text("{")
    assert not current(options, said.append)
    assert said == [f"  {tmp_path / 'r' / INPUTS_FILE}: damaged; building the report again"]


def _report_files(out: Path) -> dict[str, bytes]:
    """Each file of a report, with the minute it was generated and its folder's name blanked."""
    import re

    files = {}
    for path in sorted(out.iterdir()):
        data = path.read_bytes().replace(str(out).encode(), b"OUT")
        files[path.name] = re.sub(rb"Generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", b"", data)
    return files


def test_report_is_one_library_call_writing_the_commands_bytes(
    tiny_runs: dict[str, Path], synthetic_shards: Path, tmp_path: Path
) -> None:
    """`goatdna report` only builds a `ReportRequest`: `report_run.report_from_request` checks
    it (context lengths, recall distances, device, sampling) and builds the report, whose files
    are the command's (but for the minute they were generated)."""
    from goatdna.analysis.report_run import ReportRequest, report_from_request
    from goatdna.errors import GoatDNAError

    cli_out, lib_out = tmp_path / "cli", tmp_path / "lib"
    args = ["report", "--run", tiny_runs["goat"], "--data", synthetic_shards, "--name", "g",
            "--context-lengths", "128", "--max-eval-tokens", "1024", "--prompts", "1",
            "--recall-trials", "2", "--recall-distances", "16", "--threads", "1"]  # fmt: skip
    res = invoke([*args, "--out", cli_out])
    assert res.exit_code == 0, res.output
    request = ReportRequest(
        (tiny_runs["goat"],), synthetic_shards, lib_out, names=("g",), context_lengths="128",
        max_eval_tokens=1024, prompts=1, recall_trials=2, recall_distances="16", threads=1,
    )  # fmt: skip
    said: list[str] = []
    result = report_from_request(request, log=said.append)
    assert _report_files(lib_out) == _report_files(cli_out)
    assert said and all(f"report: {line}" in res.stderr for line in said)
    assert f"and {len(result.files) - 1} other files in {cli_out}" in res.stderr
    for bad, message in (({"recall_distances": "x"}, "comma-separated integers"),
                         ({"context_lengths": "a,b"}, "--context-lengths"),
                         ({"devices": "3"}, "--devices")):  # fmt: skip
        with pytest.raises(GoatDNAError, match=message):
            report_from_request(ReportRequest(**{**request.__dict__, "out": tmp_path / "x", **bad}))
        assert not (tmp_path / "x").exists()
