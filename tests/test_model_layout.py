"""GPU-facing layout of the model, checked on CPU: where position tables are built, the memory
layout of the packed q'/k', and the 8-column output head behind 5-class logits."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from goatdna.model import DNADecoder, GoatPrior, ModelConfig, next_token_loss
from goatdna.model import goat as goat_module
from goatdna.model import rope as rope_module
from goatdna.model.attention import attend

TINY = ModelConfig(
    n_layers=1,
    d_model=64,
    n_heads=2,
    mlp_hidden=96,
    goat_modes=4,
    train_length=64,
    attention="sdpa",
)


class TensorDevices(TorchDispatchMode):
    """Records the device of every tensor any aten op produces while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.made: list[tuple[str, str]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.made.append((str(func), t.device.type))
        return out


@pytest.mark.parametrize("positional", ["goat", "rope", "alibi", "nope"])
def test_position_tables_are_built_on_the_inputs_device(positional):
    """A model and inputs on a non-CPU device (meta stands in for CUDA here): forward, backward,
    prefill and a decoding step create no CPU tensor at all, so no position table is built on
    the host and copied over (a blocking copy per decoding step on a GPU)."""
    goat_module._cached_features.cache_clear()
    rope_module._rotations.cache_clear()
    config = ModelConfig(**{**TINY.__dict__, "positional": positional})
    with torch.device("meta"):
        model = DNADecoder(config)
    idx = torch.zeros(2, 16, dtype=torch.long, device="meta")
    spy = TensorDevices()
    with spy:
        logits = model(idx, start_pos=5)
        logits.sum().backward()
        cache = model.new_cache(2, 32)
        model.forward_cached(idx[:, :4], cache)
        model.forward_cached(idx[:, :1], cache)
    assert logits.shape == (2, 16, 5) and logits.device.type == "meta"
    assert len(spy.made) > 100  # the spy saw the whole model run
    on_host = [op for op, device in spy.made if device != "meta"]
    assert on_host == []


def randomized_prior() -> GoatPrior:
    """4 heads of dim 32, 4 modes, every term of the prior switched on."""
    torch.manual_seed(0)
    prior = GoatPrior(4, 32, 4, 64)
    with torch.no_grad():
        for p in prior.parameters():
            p.normal_(0, 0.5)
        prior.slope.uniform_(-0.05, 0.05)
    return prior


def _packed_reference(prior, q_c, k_c, pos_q, pos_k):
    """Eqs. (23)-(24) (goat.py) written out slot by slot in (B, H, L, d_h) order, from the prior's own terms."""
    B, H, Lq, dc = q_c.shape
    Lk = k_c.shape[2]
    d = prior.head_dim
    R2 = 2 * prior.num_modes
    slot, gain = prior._slot_gain[q_c.dtype]
    q_rel = (prior._k_rel(pos_q, torch.float32) @ (prior._rotation() * math.sqrt(d))).to(q_c.dtype)
    u = prior._key_bias64(pos_k) / gain  # (H, Lk)
    hi = u.to(q_c.dtype)
    lo = (u - hi.double()).to(q_c.dtype)
    q = torch.cat(
        [
            q_c * math.sqrt(d / dc),
            q_rel.expand(B, H, Lq, R2),
            torch.full((B, H, Lq, 2), slot, dtype=q_c.dtype),
        ],
        dim=-1,
    )
    k = torch.cat(
        [
            k_c,
            prior._k_rel(pos_k, q_c.dtype).expand(B, H, Lk, R2),
            hi[..., None].expand(B, H, Lk, 1),
            lo[..., None].expand(B, H, Lk, 1),
        ],
        dim=-1,
    )
    return q, k


def test_packed_qk_are_laid_out_like_the_projection_and_equal_the_formula():
    """q', k' are (B, H, L, d_h) views of (B, L, H, d_h) memory (RoPE's layout, flash-attn's
    input layout) with exactly the values of Eqs. (23)-(24), and attention over them is unchanged by layout."""
    prior = randomized_prior()
    B, H, L, dc = 2, 4, 24, prior.content_dim
    torch.manual_seed(1)
    qkv = torch.randn(B, L, 3, H, dc)  # as the fused projection lays them out
    q_c, k_c = qkv[:, :, 0].transpose(1, 2), qkv[:, :, 1].transpose(1, 2)  # (B, H, L, d_c) views
    v = torch.randn(B, L, H, prior.head_dim).transpose(1, 2)
    q, k = prior.pack(q_c, k_c, range(3, 3 + L), range(3, 3 + L))
    assert q.shape == k.shape == (B, H, L, prior.head_dim)
    assert q.transpose(1, 2).is_contiguous() and k.transpose(1, 2).is_contiguous()
    q_ref, k_ref = _packed_reference(prior, q_c, k_c, range(3, 3 + L), range(3, 3 + L))
    assert q_ref.is_contiguous()  # the old layout
    torch.testing.assert_close(q, q_ref, rtol=0, atol=0)
    torch.testing.assert_close(k, k_ref, rtol=0, atol=0)
    out = attend(q, k, v, "sdpa")
    out_ref = attend(q_ref, k_ref, v, "sdpa")
    torch.testing.assert_close(out, out_ref, rtol=1e-6, atol=1e-6)
    # the attention output feeds the output projection as a view: (B, L, H * d_h) with no copy
    y = out.transpose(1, 2).reshape(B, L, H * prior.head_dim)
    assert y.data_ptr() == out.data_ptr()


@pytest.mark.parametrize("tie", [False, True])
def test_output_head_runs_padded_to_8_columns_and_keeps_5_classes(tie):
    """The head GEMM has 8 output columns; logits, state_dict and gradients keep 5 classes."""
    torch.manual_seed(0)
    model = DNADecoder(ModelConfig(**{**TINY.__dict__, "tie_embeddings": tie}))
    state = model.state_dict()
    if tie:
        assert "head.weight" not in state and state["embed.weight"].shape == (8, 64)
        weight = model.embed.weight[:5]
    else:
        assert state["head.weight"].shape == (5, 64)
        weight = model.head.weight
    x = torch.randn(2, 7, 64)
    spy = TensorDevices()
    with spy:
        logits = model.logits(model.norm(x))
    assert logits.shape == (2, 7, 5)
    assert any("aten.mm" in op or "aten.addmm" in op for op, _ in spy.made)
    expected = F.linear(model.norm(x), weight)
    torch.testing.assert_close(logits, expected, rtol=1e-6, atol=1e-6)
    # the padded columns are sliced off before anything sees them
    idx = torch.randint(0, 4, (2, 9))
    next_token_loss(model(idx[:, :-1]), idx[:, 1:]).backward()
    grad = (model.embed.weight if tie else model.head.weight).grad
    assert grad is not None and grad.shape == (8 if tie else 5, 64)


def test_output_head_gemm_has_8_columns():
    """The matmul behind the logits produces 8 columns (aligned), not 5."""
    model = DNADecoder(TINY)
    shapes = []

    class Shapes(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default):
                shapes.append(tuple(out.shape))
            return out

    x = torch.randn(3, 5, 64)
    with Shapes():
        model.logits(model.norm(x))
    assert shapes == [(15, 8)]
