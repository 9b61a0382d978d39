"""The GOAT ablation switches (docs/ablations.md): each removes exactly its term and its parameters."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
from helpers import randomized_decoder

from goatdna.model import DNADecoder, ModelConfig

TINY = {"n_layers": 2, "d_model": 64, "n_heads": 4, "mlp_hidden": 96, "train_length": 16,
        "goat_modes": 2, "attention": "sdpa"}  # fmt: skip

# switch -> (its config value, the prior tensors it removes, how the full model reproduces it)
SWITCHES = {
    "goat_directional": (False, ("beta",)),
    "goat_sink": (False, ("sink",)),
    "goat_key_mlp": ("none", ("mlp_w1", "mlp_b1", "mlp_w2", "mlp_b2")),
}


def test_defaults_keep_every_term_as_a_parameter() -> None:
    """Off by default: today's model, every prior tensor learned and in the state dict."""
    config = ModelConfig(**TINY)
    assert config.goat_directional and config.goat_sink and not config.goat_equal_content
    model = DNADecoder(config)
    keys = set(model.state_dict())
    for name in ("alpha", "beta", "slope", "sink", "mlp_w1", "mlp_b1", "mlp_w2", "mlp_b2"):
        assert f"blocks.0.attn.prior.{name}" in keys
    assert model.blocks[0].attn.prior.removed_terms() == ()
    assert config.head_dim == 16 and config.content_dim == 16 - 6


@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_each_switch_removes_exactly_its_term(switch: str) -> None:
    """The ablated model equals the full model with that term's parameters zeroed (prior maps
    and logits, inference and training paths), lacks exactly those parameters, and differs
    from the full model with the term on."""
    value, removed = SWITCHES[switch]
    full = randomized_decoder(ModelConfig(**TINY))
    ablated = DNADecoder(ModelConfig(**TINY, **{switch: value})).eval()
    state = {k: v for k, v in full.state_dict().items() if k.rsplit(".", 1)[-1] not in removed}
    ablated.load_state_dict(state, strict=True)  # exactly the removed tensors are missing
    gone = set(full.state_dict()) - set(ablated.state_dict())
    assert gone == {f"blocks.{i}.attn.prior.{n}" for i in range(2) for n in removed}
    assert set(ablated.blocks[0].attn.prior.removed_terms()) == set(removed)
    assert not any(n.rsplit(".", 1)[-1] in removed for n, _ in ablated.named_parameters())
    idx = torch.randint(0, 5, (2, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        on = full(idx)
    zeroed = randomized_decoder(ModelConfig(**TINY))
    with torch.no_grad():
        for n, p in zeroed.named_parameters():
            if n.rsplit(".", 1)[-1] in removed:
                p.zero_()
    pos = range(0, 40)
    for layer in range(2):
        torch.testing.assert_close(
            ablated.blocks[layer].attn.prior.log_prior(pos, pos),
            zeroed.blocks[layer].attn.prior.log_prior(pos, pos),
            atol=0,
            rtol=0,
        )
    with torch.no_grad():
        expected = zeroed(idx)
        torch.testing.assert_close(ablated(idx), expected, atol=1e-6, rtol=0)
    assert (on - expected).abs().max() > 1e-3  # the term was live in the full model
    train_out = ablated.train()(idx)  # shared_tails: every layer's slots at once, with autograd
    torch.testing.assert_close(train_out.detach(), zeroed.train()(idx).detach(), atol=1e-6, rtol=0)
    train_out.float().pow(2).mean().backward()  # the zero buffers take no gradient, nothing breaks


def test_switches_with_the_authors_options() -> None:
    """The switches combine with goat-attention's options (shared MLP excluded for key_mlp none)."""
    authors = {"goat_slope": "softplus", "goat_init": "seeded", "goat_features": "float32",
               "goat_alignment_slot": False, "goat_split_key_bias": False}  # fmt: skip
    config = ModelConfig(**TINY, **authors, goat_directional=False, goat_sink=False)
    model = DNADecoder(config)
    assert set(model.blocks[0].attn.prior.removed_terms()) == {"beta", "sink"}
    model(torch.zeros(1, 20, dtype=torch.long))


def test_equal_content_grows_the_head_by_d_p() -> None:
    """goat_equal_content: content dims equal RoPE's head dim; values and output grow too;
    the packed SDPA path equals the explicit reference."""
    config = ModelConfig(**TINY, goat_equal_content=True)
    rope = ModelConfig(**{**TINY, "positional": "rope"}, goat_equal_content=True)
    assert config.content_dim == rope.head_dim == 16 and config.head_dim == 16 + 6
    assert rope.content_dim == 16  # no effect on other schemes
    model = randomized_decoder(config)
    attn = model.blocks[0].attn
    assert attn.q_proj.weight.shape == (4 * 16, 64) and attn.v_proj.weight.shape == (4 * 22, 64)
    explicit = randomized_decoder(
        ModelConfig(**{**TINY, "attention": "explicit"}, goat_equal_content=True)
    )
    idx = torch.randint(0, 5, (2, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(model(idx), explicit(idx), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("switch", "value", "why"),
    [
        ("goat_directional", False, "lambda_asym is always a trained parameter"),
        ("goat_sink", False, "sink_bump is always a trained parameter"),
        ("goat_key_mlp", "none", "enable_key_bias=False, also removes the slope"),
        ("goat_equal_content", True, "always embed_dim / num_heads wide"),
    ],
)
def test_ablated_config_has_no_goat_attention_kwargs(switch: str, value: object, why: str) -> None:
    """goat-attention 0.1.1 has no switch for any ablation (exporting the term as zeros would be
    the same function but a model that trains it): both ways out, the kwargs and a layer's state
    dict, are refused in one line that names the switch and why (the state dict's once raised
    AttributeError for a removed b_r or sink, and exported an equal-content layer's wrong
    shapes)."""
    from goatdna.model.attention import CausalSelfAttention
    from goatdna.model.goat_attention import (
        GoatAttentionConversionError,
        goat_attention_kwargs,
        goat_attention_state_dict,
    )

    authors = {"goat_key_mlp": "shared", "goat_slope": "softplus", "goat_abs_modes": 2,
               "goat_alignment_slot": False, "goat_split_key_bias": False,
               "goat_init": "seeded", "goat_mlp_hidden": None}  # fmt: skip
    goat_attention_kwargs(ModelConfig(**TINY, **authors))
    goat_attention_state_dict(CausalSelfAttention(ModelConfig(**TINY, **authors)))
    ablated = ModelConfig(**TINY, **{**authors, switch: value})
    for what, convert in (
        ("goat_attention_kwargs", lambda: goat_attention_kwargs(ablated)),
        (
            "goat_attention_state_dict",
            lambda: goat_attention_state_dict(CausalSelfAttention(ablated)),
        ),
    ):
        with pytest.raises(GoatAttentionConversionError) as info:
            convert()
        message = str(info.value)
        assert message.startswith(f"{what}: model.{switch} is {value!r}") and why in message
        assert "\n" not in message


def _study():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "ablation_study.py"
    spec = importlib.util.spec_from_file_location("ablation_study", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


def test_study_arms_are_valid_and_equal_parameters_is_matched() -> None:
    """Every arm of the study builds; the equal-parameter arm has RoPE's parameter count to
    within one hidden unit of the MLP per layer (3 d_model weights each)."""
    study = _study()
    counts = {}
    for arm in study.ARMS:
        config = study.model_config(arm)
        counts[arm.name] = sum(p.numel() for p in DNADecoder(config).parameters())
    rope = counts["rope"]
    base = study.model_config(study.ARMS[0])
    assert counts["goat"] < rope  # d_p of every q/k head comes from the prior, not a projection
    assert abs(counts["goat equal params"] - rope) <= 3 * base.d_model * base.n_layers
    assert counts["goat equal content"] > rope
