"""Bad inputs that used to end in a traceback or a misleading line: damaged manifests, wrong
output paths, absurd lengths, and evaluate's footnotes on data without soft-masking."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_one_error_line, invoke

REPO = Path(__file__).resolve().parents[1]


def _cli(*args):
    return invoke(args)


def _edit_splits_missing(m):
    del m["splits"]


def _edit_length_string(m):
    m["records"][0]["length"] = str(m["records"][0]["length"])


def _edit_length_null(m):
    m["records"][0]["length"] = None


def _edit_records_empty(m):
    m["records"] = {}


def _edit_split_bogus(m):
    m["records"][1]["split"] = "bogus"


def _edit_split_total(m):
    m["splits"]["val"]["length"] += 1


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (_edit_splits_missing, "field splits "),
        (_edit_length_string, "field records[0].length"),
        (_edit_length_null, "field records[0].length"),
        (_edit_records_empty, "field records "),
        (_edit_split_bogus, "field records[1].split"),
        (_edit_split_total, "field splits.val "),
    ],
)
def test_damaged_manifest_is_one_line_naming_the_field(synthetic_shards, tmp_path, edit, field):
    data = tmp_path / "shards"
    shutil.copytree(synthetic_shards, data, ignore=shutil.ignore_patterns("*.fa", "*.fai"))
    manifest = json.loads((data / "manifest.json").read_text())
    edit(manifest)
    (data / "manifest.json").write_text(json.dumps(manifest))
    for args in (["info", data], ["info", data, "--verify"]):
        result = _cli(*args)
        assert field in assert_one_error_line(result)
        assert "verified" not in result.output
    train = _cli(
        "train", "--config", REPO / "configs" / "goat-tiny.yaml", "--data", data,
        "--out", tmp_path / "run",
    )  # fmt: skip
    assert field in assert_one_error_line(train)
    assert not (tmp_path / "run").exists()


def test_generate_refuses_an_absurd_length_before_loading(tiny_runs):
    ckpt = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    line = assert_one_error_line(
        _cli("generate", "--checkpoint", ckpt, "--prompt", "ACGT", "--max-new-tokens", 10**9)
    )
    assert "--max-new-tokens 1,000,000,000" in line and "100,000" in line


def test_generate_and_evaluate_check_their_out_paths_first(tiny_runs, synthetic_shards, tmp_path):
    ckpt = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    folder = tmp_path / "samples.fa"
    folder.mkdir()
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    gen = ["generate", "--checkpoint", ckpt, "--prompt", "ACGT", "--max-new-tokens", "5"]
    assert "is a folder, not a file" in assert_one_error_line(_cli(*gen, "--out", folder))
    assert "is a file" in assert_one_error_line(_cli(*gen, "--out", blocker / "x.fa"))
    if Path("/sys").is_dir():
        assert "cannot write" in assert_one_error_line(_cli(*gen, "--out", "/sys/goatdna.fa"))
    ev = ["evaluate", "--checkpoint", ckpt, "--data", synthetic_shards, "--max-eval-tokens", "256"]
    assert "is a file, not a folder" in assert_one_error_line(_cli(*ev, "--out", blocker))
    assert "is a file" in assert_one_error_line(_cli(*ev, "--out", blocker / "eval"))


@pytest.mark.parametrize(
    "args",
    [
        ["model-info", REPO / "configs" / "goat-tiny.yaml", "--seq-len", "0"],
        ["model-info", REPO / "configs" / "goat-tiny.yaml", "--seq-len", "-5"],
    ],
)
def test_zero_lengths_are_rejected_not_taken_as_unset(args):
    line = assert_one_error_line(_cli(*args))
    assert "--seq-len" in line and "must be >= 1" in line


def test_evaluate_footnotes_on_data_without_soft_masking(tiny_runs, tmp_path):
    rng = np.random.default_rng(0)
    seq = "".join(rng.choice(list("ACGT"), size=40_000))
    fasta = tmp_path / "upper.fa"
    fasta.write_text(">chrU\n" + "\n".join(seq[i : i + 80] for i in range(0, len(seq), 80)) + "\n")
    assert _cli("prepare", fasta, "--out", tmp_path / "shards", "--workers", "1").exit_code == 0
    ckpt = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    result = _cli(
        "evaluate", "--checkpoint", ckpt, "--data", tmp_path / "shards",
        "--context-lengths", "128", "--max-eval-tokens", "1024",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "extrapolation" not in result.output  # no row is starred
    assert "no soft-masked bases" in result.output
    assert "nan" not in result.output


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
    line = assert_one_error_line(_cli("generate", "--checkpoint", ckpt, "--prompt", "ACGT", *flags))
    assert named in line.replace("'", "")
