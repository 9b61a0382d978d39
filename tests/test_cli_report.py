"""`goatdna report` checks everything before working, writes a staging folder and swaps it in,
holds its output folder's lock, and survives run names full of markup and path characters."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import assert_one_error_line, invoke

from goatdna.locking import folder_lock

SMALL = ["--prompts", "1", "--max-eval-tokens", "256", "--context-lengths", "128", "--threads", "1"]


def _report(runs: dict[str, Path], data: Path, out: Path, *extra: str):
    args = ["report", "--run", str(runs["goat"]), "--run", str(runs["rope"]), "--data", str(data)]
    return invoke([*args, "--out", str(out), *SMALL, *extra])


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


@pytest.fixture
def old_report(tmp_path: Path) -> Path:
    out = tmp_path / "report"
    out.mkdir()
    (out / "summary.csv").write_text("old\n")
    (out / "prior_curves_old_layer0.png").write_bytes(b"old png")
    (out / "inputs.json").write_text("{}")  # what a report was built from belongs to it
    return out


@pytest.fixture
def no_work(monkeypatch):
    """Any evaluation fails the test: the checks must come before the work."""
    import goatdna.analysis.report as report_module

    def forbidden(*args, **kwargs):
        raise AssertionError("evaluation started before the options were checked")

    monkeypatch.setattr(report_module, "evaluate_model", forbidden)


def test_bad_prior_layer_fails_before_any_work_and_keeps_the_old_report(
    tiny_runs, synthetic_shards, old_report, no_work
):
    before = _snapshot(old_report)
    line = assert_one_error_line(
        _report(tiny_runs, synthetic_shards, old_report, "--prior-layer", "99")
    )
    assert "--prior-layer 99" in line and "layers 0..1" in line
    assert _snapshot(old_report) == before


def test_bad_split_fails_before_any_work(tiny_runs, synthetic_shards, tmp_path, no_work):
    line = assert_one_error_line(
        _report(tiny_runs, synthetic_shards, tmp_path / "r", "--split", "bogus")
    )
    assert "--split 'bogus'" in line
    assert not (tmp_path / "r").exists()


def test_out_with_foreign_files_is_refused(tiny_runs, synthetic_shards, tmp_path, no_work):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    line = assert_one_error_line(_report(tiny_runs, synthetic_shards, out))
    assert "thesis.tex" in line and "empty or new folder" in line
    assert (out / "thesis.tex").read_text() == "precious"


def test_out_holding_an_input_or_the_current_folder_is_refused(
    tiny_runs, synthetic_shards, tmp_path, monkeypatch, no_work
):
    """The report replaces its folder whole: one holding a run or the data would take it along."""
    run = next(iter(tiny_runs.values()))
    before = sorted(p.name for p in run.parent.iterdir())
    line = assert_one_error_line(_report(tiny_runs, synthetic_shards, run.parent))
    assert f"holds {run}" in line and "an input of this run" in line
    assert sorted(p.name for p in run.parent.iterdir()) == before
    monkeypatch.chdir(tmp_path)
    assert "is the current folder" in assert_one_error_line(
        _report(tiny_runs, synthetic_shards, Path("."))
    )


def test_wrong_out_paths_are_one_line(tiny_runs, synthetic_shards, tmp_path, no_work):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    assert "is a file, not a folder" in assert_one_error_line(
        _report(tiny_runs, synthetic_shards, blocker)
    )
    assert "is a file" in assert_one_error_line(_report(tiny_runs, synthetic_shards, blocker / "r"))
    if Path("/sys").is_dir():
        line = assert_one_error_line(
            _report(tiny_runs, synthetic_shards, Path("/sys/goatdna-report"))
        )
        assert "cannot write" in line


def test_locked_out_folder_is_refused(tiny_runs, synthetic_shards, tmp_path, no_work):
    out = tmp_path / "r"
    with folder_lock(out, "--out"):
        line = assert_one_error_line(_report(tiny_runs, synthetic_shards, out))
    assert "in use by another goatdna process" in line and f"pid {os.getpid()}" in line


def test_failure_mid_report_keeps_the_old_report_and_no_staging_folder(
    tiny_runs, synthetic_shards, old_report, monkeypatch
):
    import goatdna.analysis.report as report_module

    real_evaluate = report_module.evaluate_model
    calls = []

    def broken_second_time(*args, **kwargs):  # the first model's results are written, then
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("evaluation failed")
        return real_evaluate(*args, **kwargs)

    monkeypatch.setattr(report_module, "evaluate_model", broken_second_time)
    before = _snapshot(old_report)
    result = _report(tiny_runs, synthetic_shards, old_report)
    assert result.exit_code != 0 and isinstance(result.exception, RuntimeError)
    assert _snapshot(old_report) == before
    assert sorted(p.name for p in old_report.parent.iterdir()) == ["report"]


def test_names_with_markup_and_path_characters_replace_the_old_report_whole(
    tiny_runs, synthetic_shards, old_report, monkeypatch
):
    import goatdna.analysis.plots as plots

    def quick_save(fig, path):  # rendering PNGs is what costs time here, and not what is tested
        path.write_bytes(b"\x89PNG\r\n\x1a\n")
        return path

    monkeypatch.setattr(plots, "_save", quick_save)
    result = _report(
        tiny_runs, synthetic_shards, old_report, "--name", "[/]", "--name", "my run (v2) [b]"
    )
    assert result.exit_code == 0, (result.output, result.exception)
    assert old_report.stat().st_mode & 0o777 == 0o777 & ~_umask()
    names = sorted(p.name for p in old_report.iterdir())
    assert "prior_curves_old_layer0.png" not in names  # the old report is not mixed in
    assert (old_report / "summary.csv").read_text() != "old\n"
    assert "prior_curves_model_layer1.png" in names  # "[/]" has no safe character
    assert all("/" not in n and "[" not in n and " " not in n for n in names)
    assert sorted(p.name for p in old_report.parent.iterdir()) == ["report"]
    markdown = (old_report / "report.md").read_text()
    assert "![GOAT prior of \\[/\\], layer 1](<prior_curves_model_layer1.png>)" in markdown
    assert "[/]" in result.stderr  # printed as text, not parsed as console markup
