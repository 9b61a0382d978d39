"""`goatdna.training.demo`: which finished demo run is kept (the run directory's own reuse rule).

The end-to-end demo (tests/test_analysis_demo.py) is slow; here a run directory is written by
hand (config.yaml as `RunDir.write_config` writes it, a summary.json) and nothing trains.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goatdna.data_prep import ShardedGenome
from goatdna.training import RunConfig, load_run_config
from goatdna.training.demo import finished_summary, train_or_keep
from goatdna.training.run import RunDir, resolved_config

REPO_ROOT = Path(__file__).resolve().parents[1]


def _config(*overrides: str) -> RunConfig:
    return load_run_config(
        REPO_ROOT / "configs" / "goat-tiny.yaml", ["trainer.max_steps=3", *overrides]
    )


def _finished_run(
    run_dir: Path, config: RunConfig, genome: ShardedGenome, steps: int = 3, data: str = ""
) -> None:
    run = RunDir(run_dir)
    run.write_config(resolved_config(config, genome.manifest_sha256))
    manifest = data or genome.manifest_sha256
    summary = {"steps": steps, "data_manifest_sha256": manifest, "val_loss": 1.25}
    run.summary_json.write_text(json.dumps(summary))


def test_a_finished_run_of_the_same_config_is_kept_without_training(
    synthetic_shards: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import goatdna.training.trainer

    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("a finished run of the same config was trained again")

    monkeypatch.setattr(goatdna.training.trainer, "train", no_training)
    genome, config = ShardedGenome(synthetic_shards), _config()
    _finished_run(tmp_path / "goat", config, genome)
    said: list[str] = []
    train_or_keep("goat", config, genome, tmp_path / "goat", False, said.append)
    assert said == [f"  goat: finished run found in {tmp_path / 'goat'} (val loss 1.2500); kept"]


def test_a_run_of_another_config_steps_or_data_is_not_kept(
    synthetic_shards: Path, tmp_path: Path
) -> None:
    genome, config = ShardedGenome(synthetic_shards), _config()
    _finished_run(tmp_path / "same", config, genome)
    assert finished_summary(config, genome, tmp_path / "same") is not None
    # provenance aside (cpu_threads, version, manifest hash in config.yaml), one key is enough
    assert finished_summary(_config("optim.lr=0.01"), genome, tmp_path / "same") is None
    _finished_run(tmp_path / "short", config, genome, steps=2)  # stopped early
    assert finished_summary(config, genome, tmp_path / "short") is None
    _finished_run(tmp_path / "other", config, genome, data="0" * 64)  # trained on other shards
    assert finished_summary(config, genome, tmp_path / "other") is None
    assert not (tmp_path / "none").exists()
    assert finished_summary(config, genome, tmp_path / "none") is None
    (tmp_path / "same" / "config.yaml").write_text("model: [unclosed\n")  # damaged: trained again
    assert finished_summary(config, genome, tmp_path / "same") is None
