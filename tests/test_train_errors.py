"""Bad input to `goatdna train`: one clear line, exit code 2, nothing overwritten."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from helpers import assert_one_error_line, invoke

from goatdna.configfile import to_dict
from goatdna.training import load_run_config
from goatdna.training.run import RunDir, resolved_config

REPO = Path(__file__).resolve().parents[1]
TINY = str(REPO / "configs" / "goat-tiny.yaml")
# Small and quick: every case fails before or within a few steps.
SMALL = [
    "model.n_layers=1",
    "model.d_model=64",
    "model.n_heads=2",
    "model.mlp_hidden=64",
    "model.goat_modes=4",
    "model.train_length=64",
    "data.seq_len=64",
    "data.micro_batch_size=4",
    "data.val_max_windows=8",
    "trainer.progress_bar=false",
    "trainer.tensorboard=false",
]


def run_train(*args: str):
    sets = [x for item in SMALL for x in ("--set", item)]
    return invoke(["train", "--config", TINY, *sets, *args])


@pytest.mark.parametrize(
    ("override", "fragments"),
    [
        ("optim.lrr=1e-3", ["'optim.lrr'", "unknown"]),
        ("trainer.maxsteps=3", ["'trainer.maxsteps'"]),
        ("data.seq_len=long", ["'data.seq_len'", "integer"]),
        ("optim.lr=fast", ["'optim.lr'", "number"]),
        ("trainer.precision=fp8", ["'trainer.precision'"]),
        ("model.goat_modes=16", ["content_dim", "model"]),
        ("data.seq_len=128", ["train_length", "data.seq_len"]),
    ],
)
def test_bad_config_names_the_key(tmp_path: Path, override: str, fragments: list[str]) -> None:
    result = run_train("--data", str(tmp_path), "--out", str(tmp_path / "run"), "--set", override)
    assert_one_error_line(result, *fragments)
    assert not (tmp_path / "run").exists()


def test_data_dir_without_manifest(tmp_path: Path) -> None:
    result = run_train("--data", str(tmp_path), "--out", str(tmp_path / "run"))
    assert_one_error_line(result, "manifest")
    assert not (tmp_path / "run").exists()


def test_data_dir_with_failed_checksum(tmp_path: Path, synthetic_shards: Path) -> None:
    data = tmp_path / "shards"
    shutil.copytree(synthetic_shards, data, ignore=shutil.ignore_patterns("*.fa", "*.fai"))
    blob = bytearray((data / "train.bin").read_bytes())
    blob[1000] = (blob[1000] + 1) % 4
    (data / "train.bin").write_bytes(bytes(blob))
    result = run_train("--data", str(data), "--out", str(tmp_path / "run"))
    assert_one_error_line(result, "train")
    assert not (tmp_path / "run").exists()


def test_seq_len_longer_than_every_record(tmp_path: Path, synthetic_shards: Path) -> None:
    n = 400_000  # the synthetic contigs are 375 kbp: their 90% train parts are shorter still
    result = run_train(
        "--data", str(synthetic_shards), "--out", str(tmp_path / "run"),
        "--set", f"data.seq_len={n}", "--set", f"model.train_length={n}",
    )  # fmt: skip
    assert_one_error_line(result, "seq_len + 1", "longest train record")
    assert not (tmp_path / "run").exists()


def _occupied_run_dir(tmp_path: Path, synthetic_shards: Path) -> RunDir:
    """A run directory whose config.yaml is the SMALL config with lr 1e-3."""
    from goatdna.data_prep import ShardedGenome

    config = load_run_config(TINY, [*SMALL, "optim.lr=1e-3"])
    run = RunDir(tmp_path / "run")
    run.write_config(resolved_config(config, ShardedGenome(synthetic_shards).manifest_sha256))
    return run


def test_run_dir_with_a_different_config(tmp_path: Path, synthetic_shards: Path) -> None:
    run = _occupied_run_dir(tmp_path, synthetic_shards)
    before = run.config_yaml.read_bytes()
    result = run_train(
        "--data", str(synthetic_shards), "--out", str(run.root), "--set", "optim.lr=2e-3"
    )
    assert_one_error_line(result, "different config", "optim.lr", "--force")
    assert run.config_yaml.read_bytes() == before
    # the same config without --resume is refused too, and says how to continue
    result = run_train(
        "--data", str(synthetic_shards), "--out", str(run.root), "--set", "optim.lr=1e-3"
    )
    assert_one_error_line(result, "already holds a run", "--resume")
    assert run.config_yaml.read_bytes() == before


def test_resume_without_checkpoint(tmp_path: Path, synthetic_shards: Path) -> None:
    result = run_train("--data", str(synthetic_shards), "--out", str(tmp_path / "run"), "--resume")
    assert_one_error_line(result, "--resume", "no checkpoint")
    run = _occupied_run_dir(tmp_path, synthetic_shards)  # config but no checkpoint
    result = run_train("--data", str(synthetic_shards), "--out", str(run.root), "--resume")
    assert_one_error_line(result, "no checkpoint")


def test_resume_with_a_changed_learning_setting(tmp_path: Path, synthetic_shards: Path) -> None:
    run = _occupied_run_dir(tmp_path, synthetic_shards)
    run.checkpoints.mkdir()
    run.last_ckpt.write_bytes(b"placeholder: the config check comes first")
    result = run_train(
        "--data", str(synthetic_shards), "--out", str(run.root), "--resume",
        "--set", "optim.lr=2e-3",
    )  # fmt: skip
    assert_one_error_line(result, "--resume", "optim.lr")


@pytest.mark.slow
def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(
    tmp_path: Path, synthetic_shards: Path
) -> None:
    run = tmp_path / "run"
    result = run_train(
        "--data", str(synthetic_shards), "--out", str(run), "--max-steps", "20",
        "--set", "optim.lr=1e30", "--set", "optim.warmup_steps=0", "--set", "optim.grad_clip=0",
        "--set", "trainer.ckpt_every=1", "--set", "trainer.eval_every=100",
    )  # fmt: skip
    line = assert_one_error_line(result, "became", "last good checkpoint")
    assert not (run / "summary.json").exists()
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert 1 <= ckpt["global_step"] < 20
    assert f"at step {ckpt['global_step'] + 1}" in line  # the first bad step, never written
    assert all(torch.isfinite(v).all() for v in ckpt["state_dict"].values())
    assert (
        to_dict(load_run_config(TINY, SMALL).model) == ckpt["hyper_parameters"]["config"]["model"]
    )
