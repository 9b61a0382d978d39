"""`goatdna model-info`: counts by component, d_c/d_p per head, FLOPs per token; clear errors."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from helpers import assert_one_error_line, invoke, printed, tiny_config

from goatdna.configfile import from_dict, load_yaml
from goatdna.model import DNADecoder, ModelConfig, flops_per_token


def test_model_info_prints_counts_dims_and_flops():
    path = "configs/goat-125m.yaml"
    result = invoke(["model-info", path], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    config = from_dict(ModelConfig, load_yaml(path)["model"], "model")
    with torch.device("meta"):
        model = DNADecoder(config)
    out = result.output
    assert f"{model.num_params():,}" in out
    for name, count in model.param_breakdown().items():
        assert name in out and f"{count:,}" in out
    assert f"d_c = {config.head_dim - 2 * config.goat_modes - 2}" in out
    assert f"d_p = {2 * config.goat_modes + 2}" in out
    assert f"{flops_per_token(config, config.train_length):.4g}" in out


def test_model_info_rope_and_seq_len(tmp_path):
    result = invoke(
        ["model-info", "configs/rope-tiny.yaml", "--seq-len", "4096"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    config = from_dict(ModelConfig, load_yaml("configs/rope-tiny.yaml")["model"], "model")
    assert f"{flops_per_token(config, 4096):.4g}" in result.output
    assert "d_p = 0" in result.output


def test_model_info_paper_dna_config_names_its_block_and_slots():
    """The genome.py config: GELU (not SwiGLU) hidden, d_p = 2R + 1 without the alignment slot."""
    result = invoke(["model-info", "configs/goat-paper-dna.yaml"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "GELU hidden 2048" in out and "SwiGLU" not in out
    assert "d_c = 59 content dims, d_p = 5 position dims (2 x 2 modes + key bias)" in out


def test_model_info_bad_configs_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  positional: goat\n  d_model: 64\n  n_heads: 4\n  goat_modes: 8\n")
    result = invoke(["model-info", str(bad)])
    assert result.exit_code == 2
    assert "content_dim" in result.output
    typo = tmp_path / "typo.yaml"
    typo.write_text("model:\n  n_layer: 4\n")
    result = invoke(["model-info", str(typo)])
    assert result.exit_code == 2 and "model.n_layer" in result.output
    missing = invoke(["model-info", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2


def test_model_info_describes_a_checkpoint_as_its_config(tmp_path):
    """A `.ckpt` (or export folder) holds its model config: model-info describes that model,
    the same lines as for the config it was built from (it used to end in a UnicodeDecodeError
    traceback, reading the .ckpt as YAML; an export folder was "config file not found")."""
    from goatdna.checkpoint import save_checkpoint
    from goatdna.configfile import to_dict

    config = tiny_config()
    import yaml

    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump({"model": to_dict(config)}))
    ckpt = save_checkpoint(tmp_path / "lm.ckpt", DNADecoder(config), {"model": to_dict(config)})
    from_yaml = invoke(["model-info", tmp_path / "tiny.yaml"], env={"COLUMNS": "200"})
    from_ckpt = invoke(["model-info", ckpt], env={"COLUMNS": "200"})
    assert from_yaml.exit_code == 0 and from_ckpt.exit_code == 0, (from_yaml, from_ckpt.output)
    body = [line.replace(str(ckpt), "X") for line in from_ckpt.output.splitlines()]
    assert body == [line.replace(str(tmp_path / "tiny.yaml"), "X")
                    for line in from_yaml.output.splitlines()]  # fmt: skip
    assert f"{DNADecoder(config).num_params():,}" in from_ckpt.output
    if importlib.util.find_spec("transformers") is not None:  # an export folder: the same
        folder = tmp_path / "exported"
        assert invoke(["export", "-c", ckpt, "--out", folder]).exit_code == 0
        from_folder = invoke(["model-info", folder], env={"COLUMNS": "200"})
        assert from_folder.exit_code == 0, from_folder.output
        assert [line.replace(str(folder), "X") for line in from_folder.output.splitlines()] == body


def test_model_info_names_what_it_was_given(tmp_path):
    """A missing path, a binary file and a folder that is no export: one line naming the path
    and what to pass (a missing path: "config file not found" before, a binary file: a
    UnicodeDecodeError traceback)."""
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)))
    (tmp_path / "folder").mkdir()
    for path in (tmp_path / "gone.ckpt", tmp_path / "blob.bin", tmp_path / "folder"):
        line = assert_one_error_line(invoke(["model-info", path]), str(path))
        assert "config file not found" not in line, line
        assert "YAML" in line or "goatdna export" in line, line


@pytest.mark.parametrize("seq_len", ["0", "-5"])
def test_zero_lengths_are_rejected_not_taken_as_unset(seq_len: str) -> None:
    line = assert_one_error_line(
        invoke(["model-info", "configs/goat-tiny.yaml", "--seq-len", seq_len])
    )
    assert "--seq-len" in line and "must be >= 1" in line


def test_model_info_is_one_library_call_printing_the_commands_bytes(tmp_path):
    """`goatdna model-info` only builds a `ModelInfoRequest`: `describe_model` reads the config
    and checks the request, and its table and lines, printed, are the command's stdout."""
    from pathlib import Path

    from goatdna.errors import GoatDNAError
    from goatdna.model_info import ModelInfoRequest, describe_model

    for path, seq_len in (("configs/goat-tiny.yaml", None), ("configs/rope-tiny.yaml", 4096)):
        extra = [] if seq_len is None else ["--seq-len", str(seq_len)]
        res = invoke(["model-info", path, *extra], env={"COLUMNS": "200"})
        assert res.exit_code == 0, res.output
        info = describe_model(ModelInfoRequest(Path(path), seq_len))
        assert printed(info.table(), *info.lines) == res.stdout
        assert info.config.positional == Path(path).name.split("-")[0]
    with pytest.raises(GoatDNAError, match="no such file or folder"):
        describe_model(ModelInfoRequest(tmp_path / "missing.yaml"))
    with pytest.raises(GoatDNAError, match="--seq-len must be >= 1"):
        describe_model(ModelInfoRequest(Path("configs/goat-tiny.yaml"), 0))
