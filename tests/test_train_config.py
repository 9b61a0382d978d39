"""The shipped configs and RunConfig loading (no torch training here)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from goatdna.configfile import to_dict
from goatdna.errors import GoatDNAError
from goatdna.training import RunConfig, load_run_config
from goatdna.training.run import RunDir, config_differences, resolved_config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.mark.parametrize("size", ["125m", "tiny"])
def test_goat_and_rope_configs_differ_only_in_the_positional_scheme(size: str) -> None:
    goat = load_run_config(CONFIGS / f"goat-{size}.yaml")
    rope = load_run_config(CONFIGS / f"rope-{size}.yaml")
    diffs = config_differences(to_dict(goat), to_dict(rope))
    assert [d[0] for d in diffs] == ["model.positional"]
    assert goat.model.train_length == goat.data.seq_len


def test_125m_configs_carry_the_gpu_settings() -> None:
    config = load_run_config(CONFIGS / "goat-125m.yaml")
    assert config.trainer.precision == "auto"  # bf16-mixed on a GPU, see resolve_precision
    assert config.data.seq_len == 1024
    global_batch = config.data.micro_batch_size * config.trainer.accumulate * config.data.seq_len
    assert 450_000 <= global_batch <= 600_000
    assert config.optim.lr == pytest.approx(6e-4) and config.optim.warmup_steps > 0
    assert config.optim.betas == (0.9, 0.95) and config.optim.weight_decay == pytest.approx(0.1)
    assert config.optim.grad_clip == pytest.approx(1.0)
    assert 0 < config.optim.min_lr_ratio < 1  # cosine to a floor


def test_tiny_configs_train_on_cpu_in_fp32() -> None:
    from goatdna.runtime import resolve_precision

    config = load_run_config(CONFIGS / "goat-tiny.yaml", ["trainer.accelerator=cpu"])
    assert resolve_precision(config.trainer.precision, config.trainer.accelerator) == "32-true"
    assert config.data.num_workers == 0


def test_overrides_reach_every_section() -> None:
    config = load_run_config(
        CONFIGS / "rope-tiny.yaml",
        ["optim.lr=1e-3", "trainer.devices=2", "trainer.peak_flops=1e12", "seed=7",
         "data.rc_prob=0", "trainer.devices=auto"],
    )  # fmt: skip
    assert config.optim.lr == 1e-3 and config.seed == 7 and config.data.rc_prob == 0.0
    assert config.trainer.devices == "auto" and config.trainer.peak_flops == 1e12


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("data.max_n_fraction=1.5", "max_n_fraction"),
        ("trainer.max_steps=0", "max_steps"),
        ("optim.betas=[0.9]", "betas"),
        ("trainer.strategy=horovod", "trainer.strategy"),
        ("seed=one", "'seed'"),
    ],
)
def test_invalid_values_are_named(override: str, fragment: str) -> None:
    with pytest.raises(GoatDNAError, match=fragment):
        load_run_config(CONFIGS / "goat-tiny.yaml", [override])


def test_run_config_yaml_round_trips(tmp_path: Path) -> None:
    """A run's config.yaml (with provenance keys) loads back to the same RunConfig."""
    config = load_run_config(CONFIGS / "goat-125m.yaml", ["optim.lr=3e-4"])
    run = RunDir(tmp_path / "run")
    run.write_config(resolved_config(config, "ab" * 32))
    again = load_run_config(run.config_yaml)
    assert isinstance(again, RunConfig) and again == config
    assert not config_differences(to_dict(config), to_dict(again))


def test_data_seq_len_sets_the_models_train_length() -> None:
    """One source: data.seq_len; a YAML (or --set) that sets model.train_length apart from it is
    one line naming both keys."""
    config = load_run_config(CONFIGS / "goat-tiny.yaml", ["data.seq_len=64"])
    assert config.model.train_length == config.data.seq_len == 64
    same = load_run_config(CONFIGS / "goat-tiny.yaml", ["data.seq_len=64", "model.train_length=64"])
    assert same == config
    with pytest.raises(
        GoatDNAError, match=r"model\.train_length \(128\) differs from data\.seq_len \(256\)"
    ):
        load_run_config(CONFIGS / "goat-tiny.yaml", ["model.train_length=128"])


def test_train_flags_win_over_set_and_a_wrong_one_is_named(tmp_path: Path) -> None:
    """`goatdna train`'s flags go through the one merge (`config_with_flags`): a flag beats a
    --set of its key, and a wrong value names the flag the user typed (--precision fp8 was
    reported as --set 'trainer.precision=fp8', an argument nobody passed)."""
    tiny = CONFIGS / "goat-tiny.yaml"
    config = load_run_config(tiny, ["trainer.max_steps=7"], {"max_steps": 3, "devices": "2"})
    assert config.trainer.max_steps == 3 and config.trainer.devices == 2
    with pytest.raises(GoatDNAError, match=r"^--precision 'fp8': config key 'trainer.precision'"):
        load_run_config(tiny, [], {"precision": "fp8"})
    with pytest.raises(GoatDNAError, match=r"^--set 'trainer.devices=0': config 'trainer': dev"):
        load_run_config(tiny, ["trainer.devices=0", "trainer.accelerator=cpu"])


def test_train_config_resumes_from_the_run_directory(tmp_path: Path) -> None:
    from goatdna.training.config import resumed_config, train_config

    with pytest.raises(GoatDNAError, match="--config is required"):
        train_config(None, tmp_path, resume=False, overrides=[], flags={})
    with pytest.raises(GoatDNAError, match="--resume: .*config.yaml not found"):
        train_config(None, tmp_path, resume="auto", overrides=[], flags={})
    assert resumed_config(tmp_path, True) is None
    (tmp_path / "config.yaml").write_text((CONFIGS / "goat-tiny.yaml").read_text())
    assert resumed_config(tmp_path, True) == tmp_path / "config.yaml"
    assert resumed_config(tmp_path, False) is None  # a new run never reads a stored config
    config = train_config(None, tmp_path, resume=True, overrides=[], flags={"max_steps": 5})
    assert config.trainer.max_steps == 5


@pytest.mark.parametrize(
    ("override", "key", "message"),
    [
        ("optim.grad_clip=-1", "optim.grad_clip", "grad_clip must be >= 0, got -1.0"),
        ("optim.lr=.nan", "optim.lr", "lr must be > 0, got nan"),
        ("optim.min_lr_ratio=2", "optim.min_lr_ratio", "min_lr_ratio must be >= 0 and <= 1"),
        ("data.rc_prob=-0.5", "data.rc_prob", "rc_prob must be >= 0 and <= 1, got -0.5"),
        ("data.num_workers=-1", "data.num_workers", "num_workers must be >= 0, got -1"),
        ("data.seq_len=0", "data.seq_len", "seq_len must be > 0, got 0"),
    ],
)
def test_data_and_optim_bounds_are_declared_on_their_fields(
    override: str, key: str, message: str
) -> None:
    """DataConfig and OptimConfig check their numbers with `check_bounds` (the bounds are the
    fields'): one message form, and the error's key is the field, so `--set` is named. A NaN
    learning rate passed `lr <= 0` and reached the optimizer; grad_clip shared one message with
    two other fields and its key was the section."""
    from goatdna.configfile import ConfigKeyError, bounds_of, from_dict
    from goatdna.training.config import DataConfig, OptimConfig, RunConfig

    section = key.split(".")[0]
    expected = f"--set '{override}': config '{section}': {message}"
    with pytest.raises(GoatDNAError, match=f"^{re.escape(expected)}"):
        load_run_config(CONFIGS / "goat-tiny.yaml", [override])
    value = yaml.safe_load(override.split("=")[1])
    with pytest.raises(ConfigKeyError) as err:
        from_dict(RunConfig, {section: {key.split(".")[1]: value}})
    assert err.value.key == key
    numbers = [
        (owner, item.name)
        for owner in (DataConfig, OptimConfig)
        for item in dataclasses.fields(owner)
        if item.type in ("int", "float")
    ]
    assert len(numbers) == 14 and all(bounds_of(owner, name) for owner, name in numbers)
