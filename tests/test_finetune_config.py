"""`goatdna.training.finetune_config`: the flags of `goatdna finetune` are declared once, next to
the config (`FINETUNE_FLAGS`), with bounds on the fields; the command's options are built from
them and `load_finetune_config` is their one merge (issue 42.3)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from helpers import assert_one_error_line, invoke

from goatdna.cli.app import app
from goatdna.configfile import bounds_of, field_owner, field_type, to_dict
from goatdna.errors import GoatDNAError
from goatdna.training.finetune_config import (
    FINETUNE_FLAGS,
    FinetuneConfig,
    finetune_runtime,
    load_finetune_config,
)

COMMAND = typer.main.get_command(app).commands["finetune"]  # type: ignore[attr-defined]


def test_every_flag_is_an_option_with_the_fields_type_and_bounds() -> None:
    options = {p.name: p for p in COMMAND.params}
    for flag in FINETUNE_FLAGS:
        param = options[flag.name]
        assert param.default is None, flag  # not given: the config's value stays
        hint = field_type(FinetuneConfig, flag.key)
        if hint in (int, float):
            bounds = bounds_of(*field_owner(FinetuneConfig, flag.key))
            assert bounds is not None and param.help.endswith(f"[{bounds.describe()}]"), flag
    own = {"out", "overrides", "resume", "force"}
    assert set(options) == own | {flag.name for flag in FINETUNE_FLAGS}


def test_each_flag_sets_its_config_key(tmp_path: Path) -> None:
    """Every flag of the table lands on its key (the old hand-written map had 33 entries)."""
    values = {"checkpoint": "b.ckpt", "train": "t.csv", "val": "v.csv", "test": "s.csv",
              "fasta": "r.fa", "bed_label_column": 5, "sequence_column": "seq",
              "label_column": "y", "task": "regression", "mode": "lora", "lora_rank": 4,
              "lora_alpha": 8, "lora_dropout": 0.2, "lora_targets": "q_proj", "layer": "final",
              "pool": "last", "rc_augment": True, "rc_average": True, "epochs": 2, "lr": 0.5,
              "backbone_lr": 0.25, "batch_size": 3, "max_length": 9, "val_fraction": 0.3,
              "seed": 7, "devices": "2", "accelerator": "cpu", "strategy": "ddp",
              "num_nodes": 2, "precision": "32-true", "progress": False}  # fmt: skip
    assert set(values) == {flag.name for flag in FINETUNE_FLAGS}
    config = to_dict(load_finetune_config(tmp_path, resume=False, overrides=[], flags=values))
    for flag in FINETUNE_FLAGS:
        node = config
        for part in flag.key.split("."):
            node = node[part]
        expected = 2 if flag.name == "devices" else values[flag.name]  # a count stays a number
        assert node == expected, flag


def test_a_flag_wins_over_a_set_of_its_key_and_a_resume_reads_the_runs_config(
    tmp_path: Path,
) -> None:
    flags = {"train": "t.csv", "max_length": 9}
    config = load_finetune_config(
        tmp_path, resume=False, overrides=["task.max_length=7"], flags=flags
    )
    assert config.task.max_length == 9
    saved = to_dict(FinetuneConfig())
    saved["task"]["max_length"] = 5
    saved["model"] = {"resolved": "from the inputs"}  # dropped: only the config's sections
    import yaml

    (tmp_path / "config.yaml").write_text(yaml.safe_dump(saved))
    resumed = load_finetune_config(tmp_path, resume=True, overrides=[], flags={"train": "t.csv"})
    assert resumed.task.max_length == 5
    fresh = load_finetune_config(tmp_path, resume=False, overrides=[], flags={"train": "t.csv"})
    assert fresh.task.max_length == FinetuneConfig().task.max_length


def test_a_wrong_flag_value_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(GoatDNAError, match=r"^--task 'bogus': config key 'task.task' must be"):
        load_finetune_config(tmp_path, resume=False, overrides=[],
                             flags={"train": "t.csv", "task": "bogus"})  # fmt: skip
    for typed, says in (("abc", "expected a count"), ("0", "must be >= 1")):
        flags = {"train": "t.csv", "devices": typed}
        config = load_finetune_config(tmp_path, resume=False, overrides=[], flags=flags)
        with pytest.raises(GoatDNAError, match=rf"^--devices '{typed}': {says}"):
            finetune_runtime(config, flags)  # the flag as typed, parsed once
    with pytest.raises(GoatDNAError, match=r"^--train is required"):
        load_finetune_config(tmp_path, resume=False, overrides=[], flags={})


@pytest.mark.parametrize(
    ("flag", "value", "bounds"),
    [("--val-fraction", "0", "> 0 and < 1"), ("--backbone-lr", "0", "> 0")],
)
def test_the_cli_range_is_the_configs_own(
    tmp_path: Path, flag: str, value: str, bounds: str
) -> None:
    """--val-fraction 0 and --backbone-lr 0 passed the CLI's range ([>= 0 ...], declared apart
    in cli/common.py) and were refused later by the config's own check; the range is now the
    field's, so the command line refuses them at once, in the house's words."""
    result = invoke(["finetune", "--out", tmp_path / "run", "--train", "t.csv", flag, value])
    assert_one_error_line(result, f"{flag} {float(value)}: must be {bounds}")
    assert not (tmp_path / "run").exists()


def test_a_finetune_run_parses_its_devices_once(
    backbone: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`trainer.devices` is parsed once per run, into the run's `Runtime` (`finetune_runtime`):
    the command's early check and the run's Fabric each parsed it (two parses of one value)."""
    from helpers import assert_ok, random_sequences

    import goatdna.runtime

    parsed: list[object] = []
    real = goatdna.runtime.parse_devices

    def counting(value: int | str, option: str = "--devices") -> int | str | list[int]:
        parsed.append(value)
        return real(value, option)

    monkeypatch.setattr(goatdna.runtime, "parse_devices", counting)
    train = tmp_path / "train.csv"
    rows = [f"{s},{i % 2}" for i, s in enumerate(random_sequences(8))]
    train.write_text("sequence,label\n" + "\n".join(rows) + "\n")
    inputs = ["--checkpoint", backbone, "--train", train, "--out", tmp_path / "run"]
    flags = ["--no-progress", "--epochs", "1", "--accelerator", "cpu", "--devices", "1"]
    assert_ok(invoke(["finetune", *inputs, *flags]))
    assert parsed == ["1"], parsed
