"""`goatdna demo` in a reduced size: the whole pipeline, then a re-run that reuses every stage."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from helpers import invoke, printed

REDUCED = [
    "--steps", "3", "--genome-length", "120000", "--prompts", "3", "--max-eval-tokens", "256",
    "--threads", "1",
    "--context-lengths", "32,64",
    "--set", "model.n_layers=1", "--set", "model.d_model=32", "--set", "model.n_heads=2",
    "--set", "model.mlp_hidden=64", "--set", "model.goat_modes=2",
    "--set", "model.train_length=32", "--set", "data.seq_len=32",
    "--set", "data.micro_batch_size=4", "--set", "data.val_max_windows=4",
    "--set", "optim.warmup_steps=1", "--set", "trainer.eval_every=3", "--set", "trainer.ckpt_every=3",
]  # fmt: skip


@pytest.mark.slow
def test_reduced_demo_runs_end_to_end_and_reuses_finished_stages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import goatdna.progress

    monkeypatch.setattr(goatdna.progress, "INTERVAL_S", 0.0)  # a line at every update
    out = tmp_path / "demo"
    first = invoke(["demo", "--out", str(out), *REDUCED])
    assert first.exit_code == 0, first.output
    # not a terminal: every step of the demo says its progress and time left in plain lines
    log = first.stderr
    assert "torch CPU threads: 1 (--threads)" in log
    for stage in ("contig(s)", "train: 3/3 steps", "goat val L=32", "goat validation",
                  "GC study goat", "recall rope"):  # fmt: skip
        assert any(stage in line and "elapsed" in line for line in log.splitlines()), (stage, log)
    unfinished = [
        line for line in log.splitlines()
        if "elapsed" in line and (m := re.search(r"([\d,]+)/([\d,]+) ", line))
        and 0 < int(m[1].replace(",", ""))
        < int(m[2].replace(",", ""))
    ]  # fmt: skip
    assert any(line.startswith("train: 1/3 steps") for line in unfinished), log
    assert all("/s" in line and "left" in line for line in unfinished), [
        line for line in unfinished if not ("/s" in line and "left" in line)
    ]
    report = out / "report"
    for name in ("report.html", "report.md", "summary.csv", "gc_continuations.csv",
                 "nll_vs_context.png", "training_curves.png", "gc_trajectories.png",
                 "prior_curves_goat_layer0.png", "prior_heatmap_goat_layer0.png", "recall.png",
                 "recall_trials.csv", "recall_summary.csv"):  # fmt: skip
        assert (report / name).is_file(), name
    summary = pd.read_csv(report / "summary.csv")
    assert summary["model"].tolist() == ["goat", "rope"]
    for name in ("goat", "rope"):
        run_summary = json.loads((out / "runs" / name / "summary.json").read_text())
        assert run_summary["steps"] == 3 and run_summary["positional"] == name
    html = (report / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 6  # with the recall probe's plot

    ckpt = out / "runs" / "goat" / "checkpoints" / "best.ckpt"
    before = (ckpt.stat().st_mtime_ns, (report / "report.html").stat().st_mtime_ns)
    again = invoke(["demo", "--out", str(out), *REDUCED])
    assert again.exit_code == 0, again.output
    assert again.stderr.count("kept") == 3  # both runs and the report
    assert (ckpt.stat().st_mtime_ns, (report / "report.html").stat().st_mtime_ns) == before

    # A different genome in the same directory is refused, not silently mixed.
    other = invoke(["demo", "--out", str(out), *REDUCED[:2], "--genome-length", "100000"])
    assert other.exit_code == 2 and "--force" in other.stderr


@pytest.mark.slow
def test_demo_is_the_library_stages_joined(tmp_path: Path) -> None:
    """`goatdna demo` only joins `training.demo.demo_stages` (threads, configs, shards, runs)
    and `analysis.report.demo_report` (the report, kept when current): the same calls on
    another folder write the command's report tables byte for byte and say what it said, and
    on the command's folder they keep every stage."""
    from goatdna.analysis.report import ReportOptions, demo_report
    from goatdna.training.demo import DemoRequest, demo_stages

    cli_out, lib_out = tmp_path / "cli", tmp_path / "lib"
    res = invoke(["demo", "--out", cli_out, *REDUCED])
    assert res.exit_code == 0, res.output
    overrides = tuple(REDUCED[i + 1] for i, arg in enumerate(REDUCED) if arg == "--set")

    def join(out: Path, said: list[str]) -> object:
        request = DemoRequest(out, 3, 120_000, overrides=overrides, threads=1)
        with demo_stages(request, said.append) as demo:
            genome, runs = demo.prepare_and_train()
            options = ReportOptions(
                runs=runs, data_dir=genome.root, out_dir=out / "report",
                context_lengths=[32, 64], max_eval_tokens=256, n_prompts=3,
            )  # fmt: skip
            result = demo_report(options, False, said.append)
            said.append(demo.done(out / "report" / "report.html"))
        return result

    said: list[str] = []
    assert join(lib_out, said) is not None
    for name in ("evaluation.csv", "gc_continuations.csv", "recall_trials.csv"):
        assert (lib_out / "report" / name).read_bytes() == (cli_out / "report" / name).read_bytes()
    timed = ("tokens/s", "done in")  # the lines that carry a speed or a duration
    for line in (line for line in said if not any(word in line for word in timed)):
        assert printed(line).replace(str(lib_out), str(cli_out)) in res.stderr, line
    kept: list[str] = []
    assert join(cli_out, kept) is None  # the command's own folder: every stage is kept
    assert "  report is up to date with the checkpoints; kept" in kept
