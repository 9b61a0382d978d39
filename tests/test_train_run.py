"""End-to-end training on the synthetic genome: learning, run directory, checkpoint contract.

The two runs come from the session fixture `tiny_runs` (tests/conftest.py), which the analysis
tests reuse, so the suite trains each tiny model once.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from goatdna.configfile import to_dict
from goatdna.data_prep import ShardedGenome
from goatdna.data_prep.heldout import heldout_window_starts
from goatdna.model import DNADecoder, ModelConfig, next_token_loss
from goatdna.training.run import SUMMARY_KEYS
from goatdna.training.windows import read_windows

pytestmark = pytest.mark.slow


def unigram_entropy(shards: Path) -> float:
    """Entropy (nats) of the base composition of the train split, N excluded."""
    tokens = np.asarray(ShardedGenome(shards).tokens("train")) & 0x7F
    counts = np.bincount(tokens, minlength=5)[:4].astype(np.float64)
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum())


@pytest.mark.parametrize("scheme", ["goat", "rope"])
def test_tiny_model_learns_below_unigram_entropy(
    tiny_runs: dict[str, Path], synthetic_shards: Path, scheme: str
) -> None:
    summary = json.loads((tiny_runs[scheme] / "summary.json").read_text())
    entropy = unigram_entropy(synthetic_shards)
    assert 1.3 < entropy < 1.39
    assert summary["positional"] == scheme
    # ~100 steps of a 0.1M-parameter model get within ~0.02 nats of this genome's short-range
    # (6-mer Markov) floor, ~1.24 nats/base: measured GOAT 1.252, RoPE 1.245 against a unigram
    # entropy of 1.360 (margins 0.11, 0.12); learning the repeat families takes far longer.
    assert summary["val_loss"] < entropy - 0.06, (summary["val_loss"], entropy)
    rows = list(csv.DictReader((tiny_runs[scheme] / "metrics.csv").open()))
    first_val = next(float(r["val_loss"]) for r in rows if r["val_loss"])
    assert summary["val_loss"] < first_val  # it kept improving after the first validation


@pytest.mark.parametrize("scheme", ["goat", "rope"])
def test_summary_holds_every_key_with_finite_values(tiny_runs: dict[str, Path], scheme: str):
    summary = json.loads((tiny_runs[scheme] / "summary.json").read_text())
    for key in SUMMARY_KEYS:
        assert key in summary, key
        value = summary[key]
        if isinstance(value, (int, float)):
            assert math.isfinite(value), (key, value)
    config = yaml.safe_load((tiny_runs[scheme] / "config.yaml").read_text())
    assert summary["steps"] == config["trainer"]["max_steps"]
    tokens_per_step = config["data"]["micro_batch_size"] * config["data"]["seq_len"]
    assert summary["tokens_seen"] == summary["steps"] * tokens_per_step
    assert summary["val_bits_per_base"] == pytest.approx(summary["val_loss"] / math.log(2))
    assert summary["tokens_per_s"] > 0
    # MFU is a fraction of the peak, or null with the reason where a busy machine measured a
    # peak below what training achieved (tests/test_train_throughput.py)
    if summary["mfu"] is None:
        assert summary["mfu_note"].startswith("MFU not reported: the achieved ")
    else:
        assert 0 < summary["mfu"] <= 1 and summary["mfu_note"] is None
    assert summary["peak_memory_bytes"] > 10_000_000
    assert summary["device"] == "cpu" and summary["precision"] == "32-true"
    assert summary["wall_seconds"] > 0 and summary["params"] > 0


def test_run_directory_layout_and_metrics(tiny_runs: dict[str, Path], synthetic_shards: Path):
    run = tiny_runs["goat"]
    assert (run / "checkpoints" / "last.ckpt").is_file()
    assert (run / "checkpoints" / "best.ckpt").is_file()
    assert not list(run.glob("**/.*.tmp"))
    # TensorBoard events exactly when the package is installed (the dev extra installs it)
    has_tensorboard = importlib.util.find_spec("tensorboard") is not None
    assert bool(list((run / "tensorboard").glob("events.out.tfevents.*"))) == has_tensorboard
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["data_manifest_sha256"] == ShardedGenome(synthetic_shards).manifest_sha256
    assert config["goatdna_version"]
    assert config["model"]["train_length"] == config["data"]["seq_len"]
    with (run / "metrics.csv").open() as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
    assert reader.fieldnames[:5] == ["step", "train_loss", "val_loss", "lr", "tokens_per_s"]
    steps = [int(r["step"]) for r in rows]
    assert steps == sorted(set(steps)) and steps[-1] == config["trainer"]["max_steps"]
    every = config["trainer"]["log_every"]
    assert all(r["train_loss"] for r in rows if int(r["step"]) % every == 0)
    assert [int(r["step"]) for r in rows if r["val_loss"]][-1] == steps[-1]
    assert any(not r["val_loss"] for r in rows)  # empty where validation did not run


def test_checkpoint_contract(tiny_runs: dict[str, Path], synthetic_shards: Path) -> None:
    """What the analysis code relies on, read without importing goatdna.training."""
    run = tiny_runs["rope"]
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    config = ckpt["hyper_parameters"]["config"]
    assert type(config) is dict and set(config) == {"model", "data", "optim", "trainer", "seed"}
    stored = yaml.safe_load((run / "config.yaml").read_text())
    assert config == {k: v for k, v in stored.items() if k in config}
    assert ckpt["hyper_parameters"]["data_manifest_sha256"] == stored["data_manifest_sha256"]
    assert ckpt["hyper_parameters"]["goatdna_version"] == stored["goatdna_version"]
    assert {"optimizer", "scheduler", "loop"} <= set(ckpt)  # what --resume restores
    model = DNADecoder(ModelConfig(**config["model"]))
    prefix = "model."
    assert all(k.startswith(prefix) for k in ckpt["state_dict"])
    state = {k[len(prefix) :]: v for k, v in ckpt["state_dict"].items()}
    model.load_state_dict(state)  # strict: every key present, nothing extra
    # The loaded weights reproduce the run's final validation loss on the held-out windows.
    seq_len = config["data"]["seq_len"]
    genome = ShardedGenome(synthetic_shards)
    records = [(r.offset, r.length) for r in genome.records("val")]
    starts = heldout_window_starts(records, seq_len, config["data"]["val_max_windows"])
    ids, _ = read_windows(genome.tokens("val"), starts, seq_len + 1)
    tokens = torch.from_numpy(ids).long()
    with torch.no_grad():
        loss = next_token_loss(model(tokens[:, :-1]), tokens[:, 1:]).item()
    summary = json.loads((run / "summary.json").read_text())
    assert loss == pytest.approx(summary["val_loss"], abs=1e-4)
    assert ckpt["global_step"] == summary["steps"]
    assert to_dict(ModelConfig(**config["model"])) == config["model"]


def test_training_checkpoint_restores_the_loop_state_in_place(tmp_path: Path) -> None:
    """The loop keeps its own `TrainState` object across a resume: loading a training checkpoint
    fills that object (Fabric alone would load a rebuilt copy of the dataclass)."""
    from lightning_fabric import Fabric

    from goatdna.training.checkpoints import (
        TrainState,
        load_training_checkpoint,
        save_training_checkpoint,
        training_checkpoint_problem,
        training_checkpoint_step,
    )

    fabric = Fabric(accelerator="cpu", devices=1)
    module = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(module.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    saved = TrainState(best_value=0.5, best_step=8, last_train_loss=0.7,
                       last_val={"loss": 0.6, "mcc": 0.5}, elapsed_seconds=3.0)  # fmt: skip
    objects = {"state_dict": module, "optimizer": optimizer, "scheduler": scheduler}
    path = tmp_path / "last.ckpt"
    save_training_checkpoint(fabric, path, 8, {**objects, "loop": saved}, {"config": {}})
    assert training_checkpoint_problem(path) is None and training_checkpoint_step(path) == 8
    restored = TrainState()
    assert load_training_checkpoint(fabric, path, {**objects, "loop": restored}) == 8
    assert restored == saved


def test_a_train_run_parses_its_devices_once(
    tmp_path: Path, synthetic_shards: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`trainer.devices` is parsed once per run into the run's `Runtime` (the preflight check,
    the world-size check and Fabric each parsed it again: three parses of one value)."""
    from helpers import invoke

    import goatdna.runtime

    parsed: list[object] = []
    real = goatdna.runtime.parse_devices

    def counting(value: int | str, option: str = "--devices") -> int | str | list[int]:
        parsed.append(value)
        return real(value, option)

    monkeypatch.setattr(goatdna.runtime, "parse_devices", counting)
    config = Path(__file__).resolve().parents[1] / "configs" / "goat-tiny.yaml"
    sets = ["model.n_layers=1", "model.d_model=32", "model.n_heads=2", "model.mlp_hidden=64",
            "model.goat_modes=2", "data.seq_len=32", "data.micro_batch_size=4",
            "data.val_max_windows=4", "data.num_workers=0", "optim.warmup_steps=0",
            "trainer.eval_every=2", "trainer.ckpt_every=2", "trainer.progress_bar=false",
            "trainer.tensorboard=false"]  # fmt: skip
    result = invoke(["train", "--config", config, "--data", synthetic_shards,
                     "--out", tmp_path / "run", "--max-steps", "2", "--accelerator", "cpu",
                     "--devices", "1", *(a for s in sets for a in ("--set", s))])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert parsed == [1], parsed
