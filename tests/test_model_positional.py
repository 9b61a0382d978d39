"""The paper's other baselines in the same decoder: ALiBi, NoPE, and RoPE scaled beyond its length."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from goatdna.model import DNADecoder, ModelConfig
from goatdna.model.alibi import AlibiPrior
from goatdna.model.goat import GoatPrior, alibi_slopes

REPO_ROOT = Path(__file__).resolve().parents[1]


def _model(positional: str, **extra) -> DNADecoder:
    torch.manual_seed(0)
    config = ModelConfig(
        positional=positional, n_layers=2, d_model=32, n_heads=4, mlp_hidden=64,
        goat_modes=2, train_length=32, **extra,
    )  # fmt: skip
    return DNADecoder(config).eval()


def test_alibi_is_goat_with_only_the_slope_term() -> None:
    heads, head_dim, pos = 4, 16, range(0, 40)
    alibi = AlibiPrior(heads, head_dim)
    goat = GoatPrior(heads, head_dim, num_modes=2, train_length=32, init="alibi")
    # at init="alibi" GOAT's relative modes, MLP and sink are zero: only slope_h j remains
    with torch.no_grad():
        assert torch.equal(goat.slope, alibi_slopes(heads).float())
        assert torch.equal(alibi.log_prior(pos, pos), goat.log_prior(pos, pos))
    # ... which is ALiBi's -m_h (i - j) up to a per-query constant that softmax ignores
    i = torch.arange(40.0)[:, None]
    j = torch.arange(40.0)[None, :]
    causal = j <= i
    textbook = -alibi_slopes(heads).float()[:, None, None] * (i - j)
    with torch.no_grad():
        ours = alibi.log_prior(pos, pos)
    for a, b in ((ours, textbook),):
        pa = torch.softmax(a.masked_fill(~causal, -math.inf), -1)
        pb = torch.softmax(b.masked_fill(~causal, -math.inf), -1)
        assert torch.allclose(pa, pb, atol=1e-6)


@pytest.mark.parametrize("heads", [1, 2, 3, 4, 6, 8, 12, 16])
def test_slopes_built_on_device_equal_alibis_list(heads: int) -> None:
    from goatdna.model.alibi import slopes_on

    assert torch.allclose(slopes_on(heads, torch.device("cpu")), alibi_slopes(heads), rtol=1e-15)


def test_alibi_packed_sdpa_equals_float64_explicit_attention() -> None:
    model = _model("alibi")
    attn = model.blocks[0].attn
    x = torch.randn(2, 24, 32)
    with torch.no_grad():
        packed = attn(x, start_pos=100)
        q, k, v = attn._project(x)
        q, k, v = q.double(), k.double(), v.double()
        pos = torch.arange(100, 124, dtype=torch.float64)
        slopes = alibi_slopes(4)[None, :, None, None]
        logits = q @ k.transpose(-1, -2) / math.sqrt(attn.qk_dim)
        logits = logits - slopes * (pos[:, None] - pos[None, :])
        mask = torch.ones(24, 24, dtype=torch.bool).tril()
        probs = torch.softmax(logits.masked_fill(~mask, -math.inf), -1)
        y = (probs @ v).transpose(1, 2).reshape(2, 24, 32)
        expected = attn.o_proj(y.float())
    assert attn.qk_dim == 6  # head_dim 8 - 2 position dims
    assert torch.allclose(packed, expected, atol=1e-5)


def test_nope_has_no_positional_parameters_or_signal() -> None:
    model = _model("nope")
    for block in model.blocks:
        assert block.attn.prior is None and block.attn.rope is None
    names = [n for n, _ in model.named_parameters()]
    assert not any("prior" in n or "rope" in n for n in names)
    goat = _model("goat")
    assert model.num_params() > goat.num_params() - goat.param_breakdown()["prior"]  # full q/k
    idx = torch.randint(0, 4, (2, 20))
    with torch.no_grad():  # only the causal mask orders tokens: absolute offsets change nothing
        assert torch.equal(model(idx, 0), model(idx, 5000))


@pytest.mark.parametrize("scaling", ["linear", "ntk"])
def test_rope_extension_changes_nothing_within_the_training_length(scaling: str) -> None:
    plain, scaled = _model("rope"), _model("rope", rope_extension=scaling)
    scaled.load_state_dict(plain.state_dict())
    inside = torch.randint(0, 4, (2, 32))  # = train_length
    beyond = torch.randint(0, 4, (2, 96))
    with torch.no_grad():
        assert torch.equal(plain(inside), scaled(inside))
        assert not torch.allclose(plain(beyond), scaled(beyond))


def test_linear_scaling_is_position_interpolation() -> None:
    rope = _model("rope", rope_extension="linear").blocks[0].attn.rope
    plain = _model("rope").blocks[0].attn.rope
    scaled, _ = rope.rotations(range(0, 64), torch.device("cpu"), torch.float64)  # s = 64 / 32 = 2
    unscaled, _ = plain.rotations(range(0, 64), torch.device("cpu"), torch.float64)
    theta = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    angles = (torch.arange(64, dtype=torch.float64) / 2)[:, None] * theta[None, :]
    assert torch.allclose(scaled.real, torch.cos(angles)) and torch.allclose(
        scaled.imag, torch.sin(angles)
    )
    assert not torch.allclose(scaled, unscaled)


@pytest.mark.parametrize("positional", ["alibi", "nope"])
def test_cached_decoding_equals_the_full_forward(positional: str) -> None:
    model = _model(positional)
    idx = torch.randint(0, 4, (2, 30))
    with torch.no_grad():
        full = model(idx)
        cache = model.new_cache(batch_size=2, max_length=30)
        steps = [model.forward_cached(idx[:, :20], cache)]
        steps += [model.forward_cached(idx[:, t : t + 1], cache) for t in range(20, 30)]
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)


@pytest.mark.parametrize("scheme", ["alibi", "nope"])
@pytest.mark.parametrize("size", ["tiny", "125m"])
def test_configs_load_and_differ_from_goat_only_in_the_scheme(scheme: str, size: str) -> None:
    from goatdna.configfile import to_dict
    from goatdna.training import load_run_config

    config = load_run_config(REPO_ROOT / "configs" / f"{scheme}-{size}.yaml", [])
    goat = load_run_config(REPO_ROOT / "configs" / f"goat-{size}.yaml", [])
    assert config.model.positional == scheme
    mine, theirs = to_dict(config), to_dict(goat)
    mine["model"].pop("positional"), theirs["model"].pop("positional")
    assert mine == theirs


def test_alibi_decoding_block_equals_per_position_slots_across_block_edges() -> None:
    from goatdna.model.goat import DECODE_BLOCK

    prior = AlibiPrior(4, 16)
    with torch.no_grad():
        for t in (0, DECODE_BLOCK - 1, DECODE_BLOCK, 3 * DECODE_BLOCK + 5):
            pos = range(t, t + 1)
            block = prior._key_tail(pos, torch.float32, torch.device("cpu"))
            alone = prior._compute_key_tail(pos, torch.float32, torch.device("cpu"))
            assert torch.equal(block, alone)
