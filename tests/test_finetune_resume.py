"""`goatdna finetune` SIGKILLed right after a checkpoint and resumed equals an uninterrupted run;
a run whose export-folder backbone was moved resumes with ``--checkpoint``."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import assert_one_error_line, invoke, tiny_config

from goatdna import faults
from goatdna.adapters import backbone_sha256
from goatdna.checkpoint import save_checkpoint
from goatdna.configfile import to_dict
from goatdna.model import DNADecoder

pytestmark = pytest.mark.slow
KILL_STEP = 8  # end of epoch 2 of 3 (128 rows / batch 32 = 4 steps per epoch)


def rows(run: Path) -> list[dict[str, str]]:
    with (run / "metrics.csv").open() as fh:
        return list(csv.DictReader(fh))


def test_sigkill_then_resume_matches_uninterrupted(
    synthetic_shards: Path, tmp_path: Path, one_thread: None
) -> None:
    task = tmp_path / "task"
    result = invoke(["make-task", "--data", str(synthetic_shards), "--out", str(task),
                                 "--label", "gc", "--max-train", "128", "--max-eval", "48"])  # fmt: skip
    assert result.exit_code == 0, result.output
    config = tiny_config(train_length=64)
    torch.manual_seed(0)
    backbone = save_checkpoint(tmp_path / "lm.ckpt", DNADecoder(config), {"model": to_dict(config)})
    args = ["finetune", "--checkpoint", str(backbone), "--train", str(task / "train.csv"),
            "--val", str(task / "val.csv"), "--test", str(task / "test.csv"), "--mode", "full",
            "--epochs", "3", "--batch-size", "32", "--rc-augment", "--rc-average",
            "--no-progress", "--set", "trainer.log_every=2"]  # fmt: skip

    # one thread here, like the subprocess (OMP_NUM_THREADS=1)
    straight = tmp_path / "straight"
    result = invoke([*args, "--out", str(straight)])
    assert result.exit_code == 0, (result.output, result.exception)

    crashed = tmp_path / "crashed"
    env = dict(os.environ, OMP_NUM_THREADS="1", **faults.arm("train.checkpoint_saved", KILL_STEP))
    cmd = [sys.executable, "-m", "goatdna.cli.app", *args, "--out", str(crashed)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert not (crashed / "summary.json").exists()
    ckpt = torch.load(crashed / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] == KILL_STEP

    # resume with only --out: everything else comes from the run's config.yaml
    result = invoke(["finetune", "--out", str(crashed), "--resume"])
    assert result.exit_code == 0, (result.output, result.exception)

    a = json.loads((straight / "summary.json").read_text())
    b = json.loads((crashed / "summary.json").read_text())
    assert a["steps"] == b["steps"] == 12 and a["best_step"] == b["best_step"]
    for split in ("val", "test"):
        for key, value in a[split].items():
            assert b[split][key] == pytest.approx(value, abs=1e-6), (split, key)
    ra, rb = rows(straight), rows(crashed)
    assert [r["step"] for r in ra] == [r["step"] for r in rb]
    for x, y in zip(ra, rb, strict=True):
        for key in ("train_loss", "val_loss", "val_mcc", "lr_head", "lr_backbone"):
            assert (x[key] == "") == (y[key] == "")
            if x[key]:
                assert float(x[key]) == pytest.approx(float(y[key]), abs=1e-6), (x["step"], key)
    final_a = torch.load(straight / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    final_b = torch.load(crashed / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    for key, value in final_a.items():
        torch.testing.assert_close(final_b[key], value, atol=1e-6, rtol=1e-5)


def test_sigterm_checkpoints_the_step_and_resume_matches(
    synthetic_shards: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fine-tuning loop shares pretraining's stop: SIGTERM mid-epoch finishes the step,
    writes last.ckpt, exits 143 with the resume command; the resumed run equals a straight one."""
    from goatdna.training.finetune import SequenceTaskModule

    task = tmp_path / "task"
    result = invoke(["make-task", "--data", str(synthetic_shards), "--out", str(task),
                                 "--label", "gc", "--max-train", "64", "--max-eval", "32"])  # fmt: skip
    assert result.exit_code == 0, result.output
    config = tiny_config(train_length=64)
    torch.manual_seed(0)
    backbone = save_checkpoint(tmp_path / "lm.ckpt", DNADecoder(config), {"model": to_dict(config)})
    args = ["finetune", "--checkpoint", str(backbone), "--train", str(task / "train.csv"),
            "--val", str(task / "val.csv"), "--mode", "probe", "--epochs", "2",
            "--batch-size", "16", "--no-progress"]  # fmt: skip
    straight = invoke([*args, "--out", str(tmp_path / "straight")])
    assert straight.exit_code == 0, (straight.output, straight.exception)

    real_forward = SequenceTaskModule.forward
    calls: list[int] = []

    def forward_then_signal(self, batch):
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGTERM)  # arrives mid-step 3 of 8
        return real_forward(self, batch)

    monkeypatch.setattr(SequenceTaskModule, "forward", forward_then_signal)
    run = tmp_path / "stopped"
    stopped = invoke([*args, "--out", str(run)])
    assert stopped.exit_code == 143, (stopped.output, stopped.exception)
    line = [x for x in stopped.stderr.splitlines() if x.startswith("interrupted: ")][0]
    assert "SIGTERM" in line and "holds step 3 (stopped after writing it)" in line
    assert f"goatdna finetune --out {run} --resume" in line
    monkeypatch.setattr(SequenceTaskModule, "forward", real_forward)
    resumed = invoke(["finetune", "--out", str(run), "--resume"])
    assert resumed.exit_code == 0, (resumed.output, resumed.exception)
    a = json.loads((tmp_path / "straight" / "summary.json").read_text())
    b = json.loads((run / "summary.json").read_text())
    assert a["steps"] == b["steps"] == 8 and a["best_step"] == b["best_step"]
    assert b["val"] == pytest.approx(a["val"], abs=1e-6)


def _exported_backbone(folder: Path, seed: int) -> Path:
    """A tiny random-init language model written as a .ckpt and exported: (export folder)."""
    config = tiny_config()
    torch.manual_seed(seed)
    ckpt = save_checkpoint(folder / "lm.ckpt", DNADecoder(config), {"model": to_dict(config)})
    result = invoke(["export", "--checkpoint", str(ckpt), "--out", str(folder / "export")])
    assert result.exit_code == 0, (result.output, result.exception)
    return folder / "export"


def test_backbone_digest_is_the_content_of_a_folder_and_the_bytes_of_a_ckpt(
    tmp_path: Path,
) -> None:
    """An export folder's digest covers config.json and model.safetensors, not where the folder
    lies: a copy has it, an edited config.json does not; a .ckpt's is its file's sha256."""
    pytest.importorskip("transformers")
    folder = _exported_backbone(tmp_path / "a", seed=0)
    ckpt = tmp_path / "a" / "lm.ckpt"
    assert backbone_sha256(ckpt) == hashlib.sha256(ckpt.read_bytes()).hexdigest()
    digest = backbone_sha256(folder)
    assert len(digest) == 64 and str(folder) not in digest
    copy = shutil.copytree(folder, tmp_path / "b" / "copy")
    (copy / "README.md").write_text("another model card\n")  # not part of the model
    assert backbone_sha256(copy) == digest
    config = json.loads((copy / "config.json").read_text())
    config["train_length"] = 2 * config["train_length"]
    (copy / "config.json").write_text(json.dumps(config))
    assert backbone_sha256(copy) != digest


def test_a_run_whose_export_folder_backbone_moved_resumes_with_checkpoint(
    synthetic_shards: Path, tmp_path: Path, one_thread: None
) -> None:
    """``inputs.backbone_sha256`` of an export-folder backbone is a digest of its files, not its
    path: after the folder moves, ``--resume --checkpoint NEW_PLACE`` goes on; another export
    folder there is refused in one line naming the digest."""
    pytest.importorskip("transformers")
    task = tmp_path / "task"
    result = invoke(["make-task", "--data", str(synthetic_shards), "--out", str(task),
                     "--label", "gc", "--max-train", "64", "--max-eval", "32"])  # fmt: skip
    assert result.exit_code == 0, result.output
    backbone = _exported_backbone(tmp_path / "lm", seed=0)
    run = tmp_path / "run"
    result = invoke(["finetune", "--checkpoint", str(backbone), "--train", str(task / "train.csv"),
                     "--val", str(task / "val.csv"), "--mode", "full", "--epochs", "1",
                     "--batch-size", "16", "--no-progress", "--out", str(run)])  # fmt: skip
    assert result.exit_code == 0, (result.output, result.exception)
    assert f"backbone_sha256: {backbone_sha256(backbone)}" in (run / "config.yaml").read_text()

    moved = tmp_path / "moved" / "export"
    moved.parent.mkdir()
    shutil.move(backbone, moved)
    resumed = ["finetune", "--out", str(run), "--resume"]
    assert_one_error_line(invoke(resumed), str(backbone), "--checkpoint")
    other = _exported_backbone(tmp_path / "other", seed=1)
    assert_one_error_line(invoke([*resumed, "--checkpoint", str(other)]), "backbone_sha256")
    result = invoke([*resumed, "--checkpoint", str(moved)])
    assert result.exit_code == 0, (result.output, result.exception)
    assert '"steps": 4' in result.output, result.output
