"""DDP with two CPU processes (gloo): the run completes and both replicas hold the same weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
OVERRIDES = [
    "model.n_layers=1",
    "model.d_model=64",
    "model.n_heads=2",
    "model.mlp_hidden=96",
    "model.goat_modes=4",
    "model.train_length=64",
    "data.seq_len=64",
    "data.micro_batch_size=4",
    "data.val_max_windows=9",  # odd: one rank gets a weight-0 padding window
    "trainer.eval_every=2",
    "trainer.ckpt_every=2",
    "trainer.log_every=1",
    "trainer.progress_bar=false",
    "trainer.tensorboard=false",
]


def test_ddp_two_cpu_processes_agree_on_weights(tmp_path: Path, synthetic_shards: Path) -> None:
    run = tmp_path / "ddp"
    sets = [x for item in OVERRIDES for x in ("--set", item)]
    cmd = [sys.executable, "-m", "goatdna.cli.app", "train",
           "--config", str(REPO / "configs" / "goat-tiny.yaml"),
           "--data", str(synthetic_shards), "--out", str(run), *sets,
           "--max-steps", "3", "--accelerator", "cpu", "--devices", "2", "--strategy", "ddp"]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1")  # one thread per rank: two ranks, two cores
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["steps"] == 3
    assert summary["tokens_seen"] == 3 * 2 * 4 * 64  # steps x ranks x micro-batch x seq_len
    prints = summary["param_fingerprints"]
    assert len(prints) == 2 and prints[0] == prints[1]  # bitwise-identical replicas
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert ckpt["global_step"] == 3
    params = [v.double() for v in ckpt["state_dict"].values()]
    assert sum(float(p.sum()) for p in params) == pytest.approx(prints[0][0], rel=1e-9)
