"""`goatdna generate`: an absurd length refused before loading, its --out (and evaluate's)
checked first, progress on long decodes, unusable devices as one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import assert_one_error_line, invoke

REPO = Path(__file__).resolve().parents[1]


def test_generate_refuses_an_absurd_length_before_loading(tiny_runs):
    ckpt = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    line = assert_one_error_line(
        invoke(["generate", "--checkpoint", ckpt, "--prompt", "ACGT", "--max-new-tokens", 10**9])
    )
    assert "--max-new-tokens 1,000,000,000" in line and "100,000" in line


def test_generate_and_evaluate_check_their_out_paths_first(tiny_runs, synthetic_shards, tmp_path):
    ckpt = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    folder = tmp_path / "samples.fa"
    folder.mkdir()
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    gen = ["generate", "--checkpoint", ckpt, "--prompt", "ACGT", "--max-new-tokens", "5"]
    assert "is a folder, not a file" in assert_one_error_line(invoke([*gen, "--out", folder]))
    assert "is a file" in assert_one_error_line(invoke([*gen, "--out", blocker / "x.fa"]))
    if Path("/sys").is_dir():
        assert "cannot write" in assert_one_error_line(invoke([*gen, "--out", "/sys/goatdna.fa"]))
    ev = ["evaluate", "--checkpoint", ckpt, "--data", synthetic_shards, "--max-eval-tokens", "256"]
    assert "is a file, not a folder" in assert_one_error_line(invoke([*ev, "--out", blocker]))
    assert "is a file" in assert_one_error_line(invoke([*ev, "--out", blocker / "eval"]))


def test_long_generation_reports_progress(tiny_runs, monkeypatch, capsys):
    import goatdna.progress
    from goatdna.analysis.generate import SamplingOptions, generate_continuations
    from goatdna.analysis.generate_run import LONG_JOB_STEPS, decoding_progress
    from goatdna.checkpoint import load_checkpoint

    model = load_checkpoint(tiny_runs["goat"] / "checkpoints" / "best.ckpt").model
    calls: list[int] = []
    options = SamplingOptions(max_new_tokens=7, num_samples=3, batch_size=2)
    generate_continuations(model, ["ACGTAC"], options, calls.append)
    assert calls.count(0) == 2 and sum(calls) == 2 * 7  # two batches: prefill, then 7 bases
    with decoding_progress(10, 10) as on_step:
        assert on_step is None  # short jobs stay quiet
    monkeypatch.setattr(goatdna.progress, "INTERVAL_S", 0.0)
    capsys.readouterr()
    with decoding_progress(LONG_JOB_STEPS, 3) as on_step:
        on_step(0), on_step(1)
    # stderr is no terminal here: timed lines with the rate and the time left, as in a log
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("generate after a 20,000-base prompt: 0/3 bases (0%)")
    assert lines[1].startswith("generate after a 20,000-base prompt: 1/3 bases (33%), ")
    assert "bases/s" in lines[1] and "left" in lines[1]


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (("--accelerator", "cuda", "--devices", "7,"), "--accelerator cuda"),
        (("--accelerator", "bogus"), "--accelerator bogus"),
        (("--devices", "2"), "--devices 2"),
        (("--accelerator", "cpu", "--devices", "3,"), "--devices 3,"),
    ],
)
def test_unusable_device_is_one_line(tiny_runs, flags, named):
    import torch

    if torch.cuda.is_available() and flags[1] == "cuda":
        pytest.skip("a GPU is visible here")
    ckpt = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    line = assert_one_error_line(
        invoke(["generate", "--checkpoint", ckpt, "--prompt", "ACGT", *flags])
    )
    assert named in line.replace("'", "")
