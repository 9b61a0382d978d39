"""`goatdna model-info`: counts by component, d_c/d_p per head, FLOPs per token; clear errors."""

from __future__ import annotations

import pytest
import torch
from helpers import assert_one_error_line, invoke

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


@pytest.mark.parametrize("seq_len", ["0", "-5"])
def test_zero_lengths_are_rejected_not_taken_as_unset(seq_len: str) -> None:
    line = assert_one_error_line(
        invoke(["model-info", "configs/goat-tiny.yaml", "--seq-len", seq_len])
    )
    assert "--seq-len" in line and "must be >= 1" in line
