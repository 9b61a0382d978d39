"""KV cache: prefill + one token at a time equals the full forward, keys at absolute positions."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from goatdna.model import DNADecoder, KVCache, ModelConfig

CONFIG = ModelConfig(
    positional="goat",
    n_layers=2,
    d_model=64,
    n_heads=4,
    mlp_hidden=96,
    train_length=32,
    goat_modes=4,
    attention="sdpa",
)


def make_model(positional: str) -> DNADecoder:
    torch.manual_seed(0)
    model = DNADecoder(replace(CONFIG, positional=positional)).eval()
    with torch.no_grad():
        for block in model.blocks:
            prior = block.attn.prior
            if prior is not None:
                for p in prior.parameters():
                    p.normal_(0, 0.3)
                prior.slope.uniform_(-0.05, 0.05)
    return model


@pytest.mark.parametrize("positional", ["goat", "rope"])
@torch.no_grad()
def test_prefill_then_steps_equals_full_forward(positional):
    model = make_model(positional)
    idx = torch.randint(0, 5, (2, 40))  # runs past train_length (32)
    full = model(idx)
    cache = model.new_cache(batch_size=2, max_length=48)
    assert isinstance(cache, KVCache) and cache.keys.dtype == torch.float32
    pieces = [model.forward_cached(idx[:, :24], cache)]  # prefill
    pieces.append(model.forward_cached(idx[:, 24:30], cache))  # a block at an offset (masked)
    for t in range(30, 40):  # one token at a time (no mask)
        pieces.append(model.forward_cached(idx[:, t : t + 1], cache))
    assert cache.length == 40
    stepped = torch.cat(pieces, dim=1)
    err = (stepped - full).abs().max() / full.abs().max()
    assert float(err) <= 1e-5


@torch.no_grad()
def test_cached_keys_keep_absolute_positions():
    """A key written at position j is what the full forward's layer-0 attention builds for j."""
    model = make_model("goat")
    idx = torch.randint(0, 5, (1, 10))
    cache = model.new_cache(1, 16)
    model.forward_cached(idx[:, :6], cache)
    model.forward_cached(idx[:, 6:10], cache)
    attn = model.blocks[0].attn
    q, k, v = attn._project(model.blocks[0].attn_norm(model.embed(idx)))
    _, k_packed = attn.prior.pack(q, k, range(10), range(10))
    torch.testing.assert_close(cache.keys[0, :, :, :10], k_packed, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(cache.values[0, :, :, :10], v, rtol=1e-6, atol=1e-6)


@torch.no_grad()
def test_cache_overflow_and_batch_mismatch_are_clear_errors():
    model = make_model("rope")
    cache = model.new_cache(1, 8)
    model.forward_cached(torch.zeros(1, 6, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="max_length"):
        model.forward_cached(torch.zeros(1, 3, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="batch size"):
        model.forward_cached(torch.zeros(2, 1, dtype=torch.long), cache)
    cache.reset()
    assert cache.length == 0
    model.forward_cached(torch.zeros(1, 8, dtype=torch.long), cache)


@torch.no_grad()
def test_cache_dtype_and_mixed_precision_read():
    """A float32 cache holding bf16-made keys is read back exactly in the queries' dtype."""
    from goatdna.model.attention import attend

    model = make_model("goat")
    assert model.new_cache(1, 4, dtype=torch.bfloat16).keys.dtype == torch.bfloat16
    q, k, v = torch.randn(3, 1, 4, 5, 32).bfloat16()
    mixed = attend(q[:, :, -1:], k.float(), v.float(), "sdpa")
    same = attend(q[:, :, -1:], k, v, "sdpa")
    assert mixed.dtype == torch.bfloat16
    torch.testing.assert_close(mixed, same, rtol=0, atol=0)


def test_decoding_block_equals_per_position_tables_and_follows_the_parameters() -> None:
    """A decoding step reads GOAT's position slots from a precomputed block of positions."""
    from goatdna.model.goat import DECODE_BLOCK, GoatPrior

    torch.manual_seed(0)
    prior = GoatPrior(4, 32, num_modes=4, train_length=64)
    with torch.no_grad():
        for p in prior.parameters():
            p.normal_(0, 0.3)
        for t in (0, DECODE_BLOCK - 1, DECODE_BLOCK, DECODE_BLOCK + 1, 5 * DECODE_BLOCK + 7):
            pos = range(t, t + 1)
            q_block, k_block = prior._position_tails(pos, pos, torch.float32, torch.device("cpu"))
            q_one, k_one = prior._compute_tails(pos, pos, torch.float32, torch.device("cpu"))
            assert torch.allclose(q_block, q_one, atol=1e-6)
            assert torch.allclose(k_block, k_one, atol=1e-6)
        before = prior._position_tails(pos, pos, torch.float32, torch.device("cpu"))[1].clone()
        prior.slope.add_(1.0)  # a parameter changed in place: the block is rebuilt
        after = prior._position_tails(pos, pos, torch.float32, torch.device("cpu"))[1]
        assert not torch.allclose(before, after)
    # with autograd on, nothing is cached (gradients must reach the prior)
    pos = range(3, 4)
    q_tail, _ = prior._position_tails(pos, pos, torch.float32, torch.device("cpu"))
    assert q_tail.requires_grad
