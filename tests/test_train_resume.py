"""A run SIGKILLed right after a checkpoint and resumed equals the uninterrupted run."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import invoke

from goatdna import faults
from goatdna.training import load_run_config, train

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "rope-tiny.yaml"
OVERRIDES = [
    "model.n_layers=1",
    "model.d_model=64",
    "model.n_heads=2",
    "model.mlp_hidden=96",
    "model.train_length=64",
    "data.seq_len=64",
    "data.micro_batch_size=8",
    "data.val_max_windows=16",
    "optim.warmup_steps=3",
    "trainer.max_steps=12",
    "trainer.accumulate=2",
    "trainer.eval_every=4",
    "trainer.ckpt_every=4",
    "trainer.log_every=2",
    "trainer.progress_bar=false",
    "trainer.tensorboard=false",
]
KILL_STEP = 8


def _rows(run: Path) -> list[dict[str, str]]:
    with (run / "metrics.csv").open() as fh:
        return list(csv.DictReader(fh))


def test_sigkill_then_resume_matches_uninterrupted(
    tmp_path: Path, synthetic_shards: Path, one_thread: None
) -> None:
    config = load_run_config(CONFIG, OVERRIDES)
    straight = tmp_path / "straight"
    expected = train(config, synthetic_shards, straight)
    assert torch.get_num_threads() == 1  # like the killed subprocess (OMP_NUM_THREADS=1)

    crashed = tmp_path / "crashed"
    sets = [x for item in OVERRIDES for x in ("--set", item)]
    cmd = [sys.executable, "-m", "goatdna.cli.app", "train", "--config", str(CONFIG),
           "--data", str(synthetic_shards), "--out", str(crashed), *sets]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1", **faults.arm("train.checkpoint_saved", KILL_STEP))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert not (crashed / "summary.json").exists()
    ckpt = torch.load(crashed / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert ckpt["global_step"] == KILL_STEP

    # resume through the CLI without --config: the run directory's config.yaml is used
    result = invoke(["train", "--data", str(synthetic_shards), "--out", str(crashed), "--resume"])
    assert result.exit_code == 0, (result.output, result.exception)
    resumed = json.loads((crashed / "summary.json").read_text())
    assert resumed["steps"] == expected["steps"] == 12
    assert resumed["tokens_seen"] == expected["tokens_seen"]
    assert abs(resumed["val_loss"] - expected["val_loss"]) < 1e-4
    assert abs(resumed["train_loss"] - expected["train_loss"]) < 1e-4
    assert resumed["best_step"] == expected["best_step"]
    # the same batches in the same order: every logged loss agrees, row for row
    a, b = _rows(straight), _rows(crashed)
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for ra, rb in zip(a, b, strict=True):
        for key in ("train_loss", "val_loss", "lr"):
            assert (ra[key] == "") == (rb[key] == "")
            if ra[key]:
                assert abs(float(ra[key]) - float(rb[key])) < 1e-4, (ra["step"], key)
    final_a = torch.load(straight / "checkpoints" / "last.ckpt", weights_only=True)
    final_b = torch.load(crashed / "checkpoints" / "last.ckpt", weights_only=True)
    for key, value in final_a["state_dict"].items():
        torch.testing.assert_close(final_b["state_dict"][key], value, atol=1e-5, rtol=1e-4)
