"""DNADecoder through the whole decoder: backends agree, gradients reach the prior, RoPE, counts."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from goatdna.model import IGNORE_TARGET, DNADecoder, ModelConfig, flops_per_token, next_token_loss
from goatdna.model.attention import resolve_backend
from goatdna.model.rope import RotaryEmbedding

SMALL = ModelConfig(
    positional="goat",
    n_layers=2,
    d_model=64,
    n_heads=4,
    mlp_hidden=96,
    train_length=32,
    goat_modes=4,
    attention="sdpa",
)
PRIOR_PARAMS = ("alpha", "beta", "slope", "sink", "mlp_w1", "mlp_b1", "mlp_w2", "mlp_b2")


def make_model(config: ModelConfig, seed: int = 0) -> DNADecoder:
    """A small model whose priors have every term switched on (nonzero alpha..MLP)."""
    torch.manual_seed(seed)
    model = DNADecoder(config)
    with torch.no_grad():
        for block in model.blocks:
            prior = block.attn.prior
            if prior is None:
                continue
            for name in PRIOR_PARAMS:
                getattr(prior, name).normal_(0, 0.3)
            prior.slope.uniform_(-0.05, 0.05)
    return model


def test_forward_shapes_positions_and_loss():
    model = make_model(SMALL)
    idx = torch.randint(0, 5, (3, 20))
    logits = model(idx)
    assert logits.shape == (3, 20, 5)
    assert model.embed.weight.shape == (8, 64)
    # absolute positions matter for GOAT (the key bias u_h(j) sees j)
    assert not torch.allclose(model(idx, start_pos=100), logits, atol=1e-4)


def test_next_token_loss_ignores_n_targets():
    torch.manual_seed(0)
    logits = torch.randn(2, 7, 5)
    targets = torch.randint(0, 5, (2, 7))
    targets[0, :3] = IGNORE_TARGET
    keep = targets != IGNORE_TARGET
    manual = -torch.log_softmax(logits, -1).gather(-1, targets.clamp(max=3)[..., None])[..., 0]
    torch.testing.assert_close(next_token_loss(logits, targets), manual[keep].mean())
    torch.testing.assert_close(next_token_loss(logits, targets, "sum"), manual[keep].sum())
    per_token = next_token_loss(logits, targets, "none")
    assert per_token.shape == (2, 7) and bool((per_token[~keep] == 0).all())
    all_n = torch.full((2, 7), IGNORE_TARGET)
    assert float(next_token_loss(logits, all_n)) == 0.0
    with pytest.raises(ValueError, match="reduction"):
        next_token_loss(logits, targets, "avg")


@pytest.mark.parametrize("start", [0, 96])  # 96 = 3 x train_length
@pytest.mark.parametrize("positional", ["goat", "rope"])
def test_sdpa_and_explicit_backends_agree_with_gradients(positional, start):
    config = replace(SMALL, positional=positional)
    sdpa = make_model(config)
    explicit = DNADecoder(replace(config, attention="explicit"))
    explicit.load_state_dict(sdpa.state_dict())
    idx = torch.randint(0, 5, (2, 40))
    targets = torch.randint(0, 5, (2, 40))
    out_s = sdpa(idx, start_pos=start)
    out_e = explicit(idx, start_pos=start)
    torch.testing.assert_close(out_s, out_e, rtol=1e-5, atol=1e-5)
    next_token_loss(out_s, targets).backward()
    next_token_loss(out_e, targets).backward()
    grads_e = dict(explicit.named_parameters())
    for name, p in sdpa.named_parameters():
        assert p.grad is not None, name
        torch.testing.assert_close(p.grad, grads_e[name].grad, rtol=1e-4, atol=1e-6, msg=name)
    if positional == "goat":
        for block in sdpa.blocks:
            for name in PRIOR_PARAMS:
                if name == "sink" and start > 0:
                    continue  # the sink bumps position 0 only, which this window does not hold
                grad = getattr(block.attn.prior, name).grad
                assert grad is not None and float(grad.abs().sum()) > 0, name
                assert bool(torch.isfinite(grad).all()), name


def test_each_layer_has_its_own_prior_and_rope_has_none():
    goat = DNADecoder(SMALL)
    priors = [block.attn.prior for block in goat.blocks]
    assert len({id(p) for p in priors}) == SMALL.n_layers
    assert priors[0].alpha.data_ptr() != priors[1].alpha.data_ptr()
    rope = DNADecoder(replace(SMALL, positional="rope"))
    assert all(block.attn.prior is None for block in rope.blocks)


def test_goat_qk_projections_carry_content_dims_only():
    goat, rope = DNADecoder(SMALL), DNADecoder(replace(SMALL, positional="rope"))
    H, dh, dc, d = SMALL.n_heads, SMALL.head_dim, SMALL.content_dim, SMALL.d_model
    for name, rows in (("q_proj", H * dc), ("k_proj", H * dc), ("v_proj", H * dh)):
        assert getattr(goat.blocks[0].attn, name).weight.shape == (rows, d)
        assert getattr(rope.blocks[0].attn, name).weight.shape == (H * dh, d)
    assert goat.blocks[0].attn.o_proj.weight.shape == (d, H * dh)


def test_rope_depends_on_relative_position_only():
    torch.manual_seed(0)
    model = DNADecoder(replace(SMALL, positional="rope"))
    idx = torch.randint(0, 5, (2, 30))
    base = model(idx)
    for shift in (1, 1000, 100_000):
        torch.testing.assert_close(model(idx, start_pos=shift), base, rtol=1e-4, atol=1e-4)
    rope = RotaryEmbedding(16)
    q, k = torch.randn(2, 1, 1, 10, 16).double()
    dots = [
        (rope(q, range(p, p + 10)) @ rope(k, range(p, p + 10)).transpose(-1, -2))
        for p in (0, 7, 12_345)
    ]
    torch.testing.assert_close(dots[1], dots[0], rtol=0, atol=1e-9)
    torch.testing.assert_close(dots[2], dots[0], rtol=0, atol=1e-9)


def test_rope_rotates_by_position_times_theta():
    rope = RotaryEmbedding(4, base=10000.0)
    x = torch.tensor([[[[1.0, 0.0, 0.0, 0.0]]]], dtype=torch.float64)  # (1, 1, 1, 4)
    p = 5
    out = rope(x, range(p, p + 1))[0, 0, 0]
    # pair (x0, x2) rotated by p * theta_0 = p radians, returned pair-interleaved (re, im, ...)
    expected = torch.tensor([math.cos(p), math.sin(p), 0.0, 0.0], dtype=torch.float64)
    torch.testing.assert_close(out, expected)


def _rotate_half_reference(x: torch.Tensor, pos: range, base: float = 10000.0) -> torch.Tensor:
    """The GPT-NeoX / transformers formula ``x*cos + rotate_half(x)*sin`` in float64."""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.arange(pos.start, pos.stop, dtype=torch.float64)[:, None] * theta
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    rotated = torch.cat([-x[..., d // 2 :], x[..., : d // 2]], dim=-1)
    return x.double() * cos + rotated.double() * sin


def test_rope_equals_the_rotate_half_formula_up_to_the_pair_order():
    """The complex rotation returns pair k at dims (2k, 2k + 1); reordered, it is the rotate-half
    formula in float64, and dot products (all attention reads) need no reordering at all."""
    torch.manual_seed(0)
    rope, d = RotaryEmbedding(16), 16
    q, k = torch.randn(2, 2, 3, 40, d, dtype=torch.float64)
    pos = range(7, 47)
    interleave = torch.stack([torch.arange(d // 2), torch.arange(d // 2) + d // 2], -1).flatten()
    torch.testing.assert_close(rope(q, pos), _rotate_half_reference(q, pos)[..., interleave])
    dots = rope(q, pos) @ rope(k, pos).transpose(-1, -2)
    reference = _rotate_half_reference(q, pos) @ _rotate_half_reference(k, pos).transpose(-1, -2)
    torch.testing.assert_close(dots, reference, rtol=1e-12, atol=1e-12)
    # float32 in, float32 out, within float32 rounding of the float64 formula
    out32 = rope(q.float(), pos)
    assert out32.dtype == torch.float32
    torch.testing.assert_close(out32.double(), rope(q, pos), rtol=1e-6, atol=1e-6)
    # bfloat16 (no complex type): rotated in float32, rounded once
    out16 = rope(q.bfloat16(), pos)
    assert out16.dtype == torch.bfloat16
    assert torch.equal(out16, rope(q.bfloat16().float(), pos).bfloat16())


def test_rope_backward_is_the_inverse_rotation():
    """`_Rotate`'s hand-written backward against autograd's numerical Jacobian (float64), for a
    shared position range, per-row positions and a non-contiguous input (a transposed view, as
    the projections hand it over)."""
    torch.manual_seed(0)
    rope = RotaryEmbedding(8, scaling="ntk", train_length=4)
    x = torch.randn(2, 6, 3, 8, dtype=torch.float64).transpose(1, 2).requires_grad_()
    rows = torch.tensor([[0, 1, 2, 3, 4, 5], [3, 4, 5, 6, 7, 9]])
    assert torch.autograd.gradcheck(lambda t: rope(t, range(2, 8)), (x,))
    assert torch.autograd.gradcheck(lambda t: rope(t, rows), (x,))


def test_init_follows_gpt2():
    config = replace(SMALL, n_layers=8, d_model=256, n_heads=4, mlp_hidden=512)
    model = DNADecoder(config)
    std = config.init_std
    residual = std / math.sqrt(2 * config.n_layers)
    block = model.blocks[0]
    for linear in (block.attn.q_proj, block.attn.k_proj, block.attn.v_proj):
        assert abs(float(linear.weight.detach().std()) - std) < 0.1 * std
    for linear in (block.mlp.gate_proj, block.mlp.up_proj):
        assert abs(float(linear.weight.detach().std()) - std) < 0.1 * std
    assert abs(float(block.attn.o_proj.weight.detach().std()) - residual) < 0.1 * residual
    assert abs(float(block.mlp.down_proj.weight.detach().std()) - residual) < 0.1 * residual
    assert torch.equal(block.attn_norm.weight, torch.ones(config.d_model))
    # zero init: the prior contributes nothing yet
    assert torch.equal(block.attn.prior.log_prior(range(8), range(8)), torch.zeros(4, 8, 8))


def test_tied_embeddings_use_the_first_vocab_rows():
    model = DNADecoder(replace(SMALL, tie_embeddings=True))
    assert model.head is None and model.param_breakdown()["head"] == 0
    idx = torch.randint(0, 5, (1, 6))
    assert model(idx).shape == (1, 6, 5)


def test_125m_parameter_counts_and_flops():
    from goatdna.configfile import from_dict, load_yaml

    counts = {}
    for name in ("goat", "rope"):
        config = from_dict(ModelConfig, load_yaml(f"configs/{name}-125m.yaml")["model"], "model")
        assert config.head_dim == 64
        with torch.device("meta"):
            model = DNADecoder(config)
        counts[name] = model.num_params()
        breakdown = model.param_breakdown()
        assert sum(breakdown.values()) == counts[name]
        flops = flops_per_token(config, config.train_length)
        non_embedding = counts[name] - breakdown["embedding"]
        attention = 12 * config.n_layers * config.d_model * config.train_length
        assert flops == 6 * non_embedding + attention
    assert 120e6 <= counts["rope"] <= 130e6
    # GOAT's q/k produce d_c = 46 of 64 dims per head: fewer projection weights, plus the priors
    c = config
    fewer = c.n_layers * c.d_model * c.n_heads * 2 * (c.head_dim - 46)
    goat_config = replace(c, positional="goat")
    with torch.device("meta"):
        prior_params = DNADecoder(goat_config).param_breakdown()["prior"]
    assert counts["goat"] == counts["rope"] - fewer + prior_params


def test_backend_resolution_and_errors():
    assert resolve_backend("auto") in ("sdpa", "flash")
    assert resolve_backend("explicit") == "explicit"
    try:
        import flash_attn  # noqa: F401
    except ImportError:
        assert resolve_backend("auto") == "sdpa"
        with pytest.warns(UserWarning, match="flash-attn"):
            model = DNADecoder(replace(SMALL, attention="flash"))
        assert model.blocks[0].attn.backend == "sdpa"
    with pytest.raises(ValueError, match="backend"):
        resolve_backend("fast")
    with pytest.raises(ValueError, match="content_dim"):
        ModelConfig(d_model=64, n_heads=4, goat_modes=7)


def test_packed_attention_equals_direct_sdpa_on_packed_tensors():
    """The model's attention really goes through GoatPrior.pack and one SDPA call."""
    model = make_model(SMALL)
    attn = model.blocks[0].attn
    x = torch.randn(2, 12, SMALL.d_model)
    q, k, v = attn._project(x)
    q2, k2 = attn.prior.pack(q, k, range(12), range(12))
    y = F.scaled_dot_product_attention(q2, k2, v, is_causal=True)
    expected = attn.o_proj(y.transpose(1, 2).reshape(2, 12, SMALL.d_model))
    torch.testing.assert_close(attn(x), expected, rtol=0, atol=0)


@pytest.mark.parametrize("positional", ["goat", "rope"])
def test_position_caches_filled_in_inference_mode_serve_training(positional):
    """Evaluation under inference_mode first, then a training step at the same length."""
    config = replace(SMALL, positional=positional, train_length=24)
    model = DNADecoder(config)
    idx = torch.randint(0, 5, (1, 23))  # a length no other test uses: the cache starts empty
    with torch.inference_mode():
        model(idx, start_pos=7)
    next_token_loss(model(idx, start_pos=7), idx).backward()
    assert model.blocks[0].attn.q_proj.weight.grad is not None


def _fused_state_dict(model: DNADecoder) -> dict[str, torch.Tensor]:
    """The model's weights in the fused layout of checkpoints before issue 31."""
    fused = {}
    for key, value in model.state_dict().items():
        block, _, name = key.rpartition(".attn.")
        if name in ("k_proj.weight", "v_proj.weight"):
            continue
        if name == "q_proj.weight":
            parts = [f"{block}.attn.{p}_proj.weight" for p in "qkv"]
            fused[f"{block}.attn.qkv.weight"] = torch.cat([model.state_dict()[p] for p in parts])
            continue
        key = key.replace(".attn.o_proj.", ".attn.out.").replace(".mlp.down_proj.", ".mlp.down.")
        if ".mlp.up_proj." in key:
            continue
        if ".mlp.gate_proj." in key:
            up = model.state_dict()[key.replace("gate_proj", "up_proj")]
            fused[key.replace("gate_proj", "gate_up")] = torch.cat([value, up])
            continue
        fused[key] = value
    return fused


@pytest.mark.parametrize("positional", ["goat", "rope"])
def test_fused_layout_checkpoints_load_into_separate_projections(positional):
    """An old state dict (fused qkv / gate_up, `out`, `down`) loads strictly, also under a
    wrapper prefix, and the loaded model computes what the saved one did."""
    config = replace(SMALL, positional=positional)
    torch.manual_seed(3)
    saved = DNADecoder(config)
    fused = _fused_state_dict(saved)
    assert "blocks.0.attn.qkv.weight" in fused and "blocks.1.mlp.gate_up.weight" in fused
    assert not any("_proj." in key for key in fused)
    loaded = DNADecoder(config)
    loaded.load_state_dict(fused, strict=True)
    idx = torch.randint(0, 5, (2, 16))
    torch.testing.assert_close(loaded(idx), saved(idx), rtol=0, atol=0)
    wrapper = torch.nn.ModuleDict({"model": DNADecoder(config)})
    wrapper.load_state_dict({f"model.{k}": v for k, v in fused.items()}, strict=True)
    torch.testing.assert_close(wrapper["model"](idx), saved(idx), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_shared_position_tails_equal_each_layers_own(monkeypatch, dtype):
    """Training computes every layer's GOAT slots in one stacked pass (`goat.shared_tails`): the
    same logits and gradients as each layer computing its own, in one `_compute_tails` call."""
    from goatdna.model.goat import GoatPrior

    config = replace(SMALL, n_layers=3)
    shared, own = make_model(config).to(dtype), make_model(config).to(dtype)
    idx = torch.randint(0, 5, (2, 40))
    calls = []
    compute = GoatPrior._compute_tails
    monkeypatch.setattr(
        GoatPrior, "_compute_tails", lambda self, *a: calls.append(a) or compute(self, *a)
    )
    out_shared = shared(idx, start_pos=7)
    assert len(calls) == 1 and calls[0][-1].alpha.shape[0] == 3 * config.n_heads
    monkeypatch.setattr(DNADecoder, "_shared_tails", lambda self, *a: None)
    out_own = own(idx, start_pos=7)
    assert len(calls) == 1 + config.n_layers
    torch.testing.assert_close(
        out_shared, out_own, rtol=0, atol=1e-12 if dtype == torch.float64 else 1e-6
    )
    next_token_loss(out_shared, idx).backward()
    next_token_loss(out_own, idx).backward()
    grads_own = dict(own.named_parameters())
    for name, p in shared.named_parameters():
        assert p.grad is not None, name
        tol = 1e-12 if dtype == torch.float64 else 1e-6
        torch.testing.assert_close(p.grad, grads_own[name].grad, rtol=1e-5, atol=tol, msg=name)
    with torch.no_grad():  # inference keeps each prior's own cached slots
        assert shared._shared_tails(shared.embed(idx), 3, range(40), None, None, None) is None


def test_shared_position_tails_pass_through_a_reentrant_checkpoint():
    """Blocks under a reentrant activation checkpoint (transformers' use_reentrant=True) get the
    shared GOAT slots as tensor arguments: the same gradients as without the checkpoint."""
    from torch.utils.checkpoint import checkpoint

    from goatdna.model.transformer import Block

    class ReentrantBlock(Block):
        def __call__(self, *args: object) -> torch.Tensor:
            return checkpoint(super().__call__, *args, use_reentrant=True)

    config = replace(SMALL, n_layers=3)
    plain = make_model(config)
    wrapped = DNADecoder(config, block_class=ReentrantBlock)
    wrapped.load_state_dict(plain.state_dict())
    idx = torch.randint(0, 5, (2, 24))
    next_token_loss(plain(idx), idx).backward()
    next_token_loss(wrapped(idx), idx).backward()
    grads = dict(plain.named_parameters())
    for name, p in wrapped.named_parameters():
        assert p.grad is not None, name
        torch.testing.assert_close(p.grad, grads[name].grad, rtol=1e-5, atol=1e-7, msg=name)
