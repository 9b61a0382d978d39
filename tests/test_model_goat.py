"""GoatPrior: pack + SDPA against an independent float64 formula, the prior's structure, bf16."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from helpers import randomized_decoder

from goatdna.model import GoatPrior
from goatdna.model.attention import attend
from goatdna.model.goat import alibi_slopes


def randomized_prior(
    heads: int = 4,
    head_dim: int = 32,
    modes: int = 4,
    train_length: int = 64,
    seed: int = 0,
    **kwargs,
) -> GoatPrior:
    """A prior with every term switched on: nonzero alpha, beta, slope, sink and MLP weights."""
    torch.manual_seed(seed)
    prior = GoatPrior(heads, head_dim, modes, train_length, **kwargs)
    with torch.no_grad():
        prior.alpha.normal_(0, 0.5)
        prior.beta.normal_(0, 0.5)
        prior.slope.uniform_(-0.05, 0.05)
        prior.sink.normal_(0, 1.0)
        prior.mlp_w1.normal_(0, 0.5)
        prior.mlp_b1.normal_(0, 0.5)
        prior.mlp_w2.normal_(0, 0.5)
        prior.mlp_b2.normal_(0, 0.5)
    return prior


def reference_key_bias(prior: GoatPrior, pos_k: torch.Tensor) -> torch.Tensor:
    """u_h(j) = slope j + g_h(phi(j)) + sink 1{j=0}, written out in float64 -> (H, Lk)."""
    R = prior.num_modes
    w = prior.freq_base ** (-torch.arange(R, dtype=torch.float64) / (R - 1))
    j = pos_k.double()
    L = prior.train_length
    phi = torch.cat(
        [
            torch.cos(j[:, None] * w),
            torch.sin(j[:, None] * w),
            (j / L)[:, None],
            (torch.log1p(j) / math.log1p(L))[:, None],
        ],
        dim=-1,
    )  # (Lk, 2R+2)
    w1, b1 = prior.mlp_w1.double(), prior.mlp_b1.double()
    w2, b2 = prior.mlp_w2.double(), prior.mlp_b2.double()
    g = torch.stack(
        [F.silu(phi @ w1[h] + b1[h]) @ w2[h] + b2[h] for h in range(prior.num_heads)]
    )  # (H, Lk)
    slope, sink = prior.slope.double(), prior.sink.double()
    return slope[:, None] * j + g + sink[:, None] * (j == 0).double()


def reference_log_prior(prior: GoatPrior, pos_q: torch.Tensor, pos_k: torch.Tensor) -> torch.Tensor:
    """K_ij = sum_r a_r cos(w_r (i-j)) + b_r sin(w_r (i-j)) + u_h(j) from differences -> (H, Lq, Lk)."""
    R = prior.num_modes
    w = prior.freq_base ** (-torch.arange(R, dtype=torch.float64) / (R - 1))
    t = pos_q.double()[:, None] - pos_k.double()[None, :]  # (Lq, Lk)
    phase = t[..., None] * w  # (Lq, Lk, R)
    a, b = prior.alpha.double(), prior.beta.double()
    k_rel = torch.einsum("hr,qkr->hqk", a, torch.cos(phase)) + torch.einsum(
        "hr,qkr->hqk", b, torch.sin(phase)
    )
    return k_rel + reference_key_bias(prior, pos_k)[:, None, :]


def reference_attention(prior, q_c, k_c, v, pos_q, pos_k, causal: bool) -> torch.Tensor:
    """softmax(q_c k_c^T / sqrt(d_c) + K) v in float64, causal on absolute positions."""
    logits = q_c.double() @ k_c.double().transpose(-1, -2) / math.sqrt(prior.content_dim)
    logits = logits + reference_log_prior(prior, pos_q, pos_k)
    if causal:
        allowed = pos_k[None, :] <= pos_q[:, None]
        logits = logits.masked_fill(~allowed, float("-inf"))
    return torch.softmax(logits, dim=-1) @ v.double()


def rel_error(x: torch.Tensor, ref: torch.Tensor) -> float:
    ref = ref.detach()
    return float((x.detach().double() - ref).abs().max() / ref.abs().max())


@pytest.mark.parametrize(
    ("q_start", "q_len", "k_len", "causal"),
    [
        (0, 48, 48, True),  # full sequence
        (0, 48, 48, False),
        (40, 8, 48, True),  # query block at an offset (KV-cache shape), bottom-aligned mask
        (47, 1, 48, True),  # one-token decoding step
        (8 * 64, 40, 40, True),  # all positions 8x beyond train_length
    ],
)
def test_pack_plus_sdpa_equals_float64_formula(q_start, q_len, k_len, causal):
    prior = randomized_prior(train_length=64, seed=q_start + q_len)
    B, H, dc, dh = 2, prior.num_heads, prior.content_dim, prior.head_dim
    k_start = q_start + q_len - k_len
    pos_q = range(q_start, q_start + q_len)
    pos_k = range(k_start, k_start + k_len)
    q_c = torch.randn(B, H, q_len, dc)
    k_c = torch.randn(B, H, k_len, dc)
    v = torch.randn(B, H, k_len, dh)
    q, k = prior.pack(q_c, k_c, pos_q, pos_k)
    assert q.shape == (B, H, q_len, dh) and k.shape == (B, H, k_len, dh)
    out = attend(q, k, v, "sdpa") if causal else F.scaled_dot_product_attention(q, k, v)
    ref = reference_attention(
        prior, q_c, k_c, v, torch.tensor(list(pos_q)), torch.tensor(list(pos_k)), causal
    )
    assert rel_error(out, ref) <= 1e-5


def test_pack_accepts_arbitrary_position_tensors():
    """Non-contiguous LongTensor positions (no cache) give the same exact attention."""
    prior = randomized_prior(seed=3)
    pos_q = torch.tensor([5, 300, 77, 1000])
    pos_k = torch.randint(0, 2000, (30,))
    q_c = torch.randn(1, prior.num_heads, 4, prior.content_dim)
    k_c = torch.randn(1, prior.num_heads, 30, prior.content_dim)
    v = torch.randn(1, prior.num_heads, 30, prior.head_dim)
    q, k = prior.pack(q_c, k_c, pos_q, pos_k)
    out = F.scaled_dot_product_attention(q, k, v)
    ref = reference_attention(prior, q_c, k_c, v, pos_q, pos_k, causal=False)
    assert rel_error(out, ref) <= 1e-5


def test_log_prior_matches_formula_and_is_relative_after_key_bias():
    prior = randomized_prior(seed=1).double()
    pos_q = torch.arange(100, 164)
    pos_k = torch.arange(0, 200)
    K = prior.log_prior(pos_q, pos_k)  # (H, Lq, Lk)
    assert K.shape == (prior.num_heads, 64, 200)
    torch.testing.assert_close(K, reference_log_prior(prior, pos_q, pos_k), rtol=0, atol=1e-10)
    torch.testing.assert_close(
        prior.key_bias(pos_k), reference_key_bias(prior, pos_k), rtol=0, atol=1e-10
    )
    rel = K - prior.key_bias(pos_k)[:, None, :]
    # depends on i - j only: equal along every diagonal i - j = const
    t = (pos_q[:, None] - pos_k[None, :]).expand_as(rel[0])
    for diff in (-50, 0, 17, 150):
        values = rel[:, t == diff]  # (H, n)
        assert values.shape[1] > 1
        torch.testing.assert_close(values, values[:, :1].expand_as(values), rtol=0, atol=1e-10)
        w = prior.freq_base ** (
            -torch.arange(prior.num_modes, dtype=torch.float64) / (prior.num_modes - 1)
        )
        expected = (prior.alpha * torch.cos(w * diff) + prior.beta * torch.sin(w * diff)).sum(-1)
        torch.testing.assert_close(values[:, 0], expected, rtol=0, atol=1e-10)
    # ranges and tensors give the same result
    torch.testing.assert_close(prior.log_prior(range(100, 164), range(200)), K)


def test_frequencies_and_content_dim():
    prior = GoatPrior(12, 64, 8, 1024)
    assert prior.content_dim == 46 and prior.position_dim == 18
    expected = 10000.0 ** (-torch.arange(8, dtype=torch.float64) / 7)
    torch.testing.assert_close(prior.freqs.double(), expected, rtol=1e-7, atol=0)
    assert prior.alpha.shape == prior.beta.shape == (12, 8)
    assert prior.slope.shape == prior.sink.shape == (12,)


@pytest.mark.parametrize(("head_dim", "modes"), [(16, 7), (18, 8), (10, 8)])
def test_nonpositive_content_dim_is_a_clear_error(head_dim, modes):
    with pytest.raises(ValueError, match="content_dim"):
        GoatPrior(2, head_dim, modes, 64)


def test_zero_init_is_exactly_standard_attention():
    torch.manual_seed(0)
    prior = GoatPrior(4, 32, 4, 64)  # init="zero" is the default
    pos = range(0, 50)
    assert torch.equal(prior.log_prior(pos, pos), torch.zeros(4, 50, 50))
    assert torch.equal(prior.key_bias(range(0, 5000)), torch.zeros(4, 5000))
    q_c, k_c = torch.randn(2, 2, 4, 50, prior.content_dim)
    v = torch.randn(2, 4, 50, 32)
    q, k = prior.pack(q_c, k_c, pos, pos)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    standard = F.scaled_dot_product_attention(q_c, k_c, v, is_causal=True)
    torch.testing.assert_close(out, standard, rtol=1e-6, atol=1e-6)


@torch.no_grad()
def test_alibi_init_gives_alibi_probabilities():
    torch.manual_seed(0)
    H, L = 8, 40
    prior = GoatPrior(H, 32, 4, 64, init="alibi")
    m = alibi_slopes(H)
    assert torch.allclose(prior.slope.double(), m) and bool((m > 0).all())
    pos = torch.arange(L)
    q_c, k_c = torch.randn(2, H, L, prior.content_dim).double()
    content = q_c @ k_c.transpose(-1, -2) / math.sqrt(prior.content_dim)
    causal = pos[None, :] <= pos[:, None]
    goat = content + prior.double().log_prior(pos, pos)
    alibi = content - m[:, None, None] * (pos[:, None] - pos[None, :]).double()  # -m (i - j)
    p_goat = torch.softmax(goat.masked_fill(~causal, float("-inf")), -1)
    p_alibi = torch.softmax(alibi.masked_fill(~causal, float("-inf")), -1)
    torch.testing.assert_close(p_goat, p_alibi, rtol=0, atol=1e-12)
    # the logits themselves differ by a per-query constant (m i), not by zero
    assert float((goat - alibi)[:, -1, :].std(-1).max()) < 1e-9
    assert float((goat - alibi).abs().max()) > 1.0


@torch.no_grad()
def bf16_logit_errors(split: bool, slope: float = 0.5, mlp: bool = False) -> tuple[float, float]:
    """Max |packed bf16 logits - float64 reference|, per-query constant removed, over keys
    0..16,383 and over keys 0..65,535."""
    torch.manual_seed(0)
    prior = GoatPrior(4, 64, 8, 1024, split_key_bias=split)
    prior.alpha.normal_(0, 0.1)
    prior.beta.normal_(0, 0.1)
    prior.slope.fill_(slope)
    prior.sink.normal_(0, 1.0)
    if mlp:  # otherwise the MLP stays at its init
        prior.mlp_w2.normal_(0, 0.3)
        prior.mlp_b1.normal_(0, 0.3)
    H, dc, n = prior.num_heads, prior.content_dim, 65_536
    pos_q = torch.tensor([0, 1000, 8191, 16_383, 40_000, n - 1])
    q_c = torch.randn(1, H, len(pos_q), dc).bfloat16()
    k_c = torch.randn(1, H, n, dc).bfloat16()
    q, k = prior.pack(q_c, k_c, pos_q, range(n))
    assert q.dtype == k.dtype == torch.bfloat16
    logits = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(
        prior.head_dim
    )  # fp32 accumulate
    ref = q_c.double() @ k_c.double().transpose(-1, -2) / math.sqrt(dc)
    ref = ref + prior.double().log_prior(pos_q, torch.arange(n))
    errors = []
    for num_keys in (16_384, n):
        err = logits.double()[..., :num_keys] - ref[..., :num_keys]
        err = err - err.mean(dim=-1, keepdim=True)  # softmax ignores a per-query constant
        errors.append(float(err.abs().max()))
    return errors[0], errors[1]


def test_bf16_split_key_bias_keeps_logits_exact():
    """u = 0.5 j reaches 32768 where bf16's spacing is 256: the hi/lo split is what saves it."""
    err_16k, err_64k = bf16_logit_errors(split=True)
    assert err_16k <= 0.05 and err_64k <= 0.2
    # the naive packing (u in one bf16 slot, alignment slot 0) fails the same bounds by far
    naive_16k, naive_64k = bf16_logit_errors(split=False)
    assert naive_16k > 1.0 and naive_64k > 10.0  # measured: about 16 and 64


def test_bf16_split_error_is_about_u_times_2_pow_minus_17():
    """A slope whose multiples are not bf16-friendly and an active MLP: error stays ~|u| 2^-17."""
    err_16k, err_64k = bf16_logit_errors(split=True, slope=0.5 + 1 / (1000 * math.pi), mlp=True)
    # measured: ~0.04 and ~0.13 (slope 0.5 alone is easier: u - hi is then exact in bf16)
    assert err_16k <= 0.05 and err_64k <= 0.2


@torch.no_grad()
def test_constant_slot_gain_for_non_square_head_dim_in_bf16():
    """d_h = 32: bf16(sqrt 32) * fp32(1/sqrt 32) != 1, and u is rescaled so logits stay exact."""
    torch.manual_seed(0)
    prior = GoatPrior(2, 32, 4, 256)
    with torch.no_grad():
        prior.slope.fill_(0.5)
    q_c = torch.zeros(1, 2, 1, prior.content_dim).bfloat16()
    k_c = torch.zeros(1, 2, 4096, prior.content_dim).bfloat16()
    q, k = prior.pack(q_c, k_c, torch.tensor([4095]), range(4096))
    logits = (q.float() @ k.float().transpose(-1, -2)) * float(torch.tensor(1 / math.sqrt(32)))
    ref = prior.double().log_prior(torch.tensor([4095]), torch.arange(4096))
    err = logits.double() - ref
    assert float((err - err.mean(-1, keepdim=True)).abs().max()) < 0.02


def test_learnable_frequencies_get_gradients():
    prior = randomized_prior(learn_freqs=True, seed=5)
    assert isinstance(prior.freqs, torch.nn.Parameter)
    q_c = torch.randn(1, prior.num_heads, 10, prior.content_dim)
    k_c = torch.randn(1, prior.num_heads, 10, prior.content_dim)
    v = torch.randn(1, prior.num_heads, 10, prior.head_dim)
    q, k = prior.pack(q_c, k_c, range(10), range(10))
    F.scaled_dot_product_attention(q, k, v, is_causal=True).square().sum().backward()
    assert prior.freqs.grad is not None and float(prior.freqs.grad.abs().sum()) > 0
    ref = reference_attention(prior, q_c, k_c, v, torch.arange(10), torch.arange(10), True)
    out = F.scaled_dot_product_attention(
        *prior.pack(q_c, k_c, range(10), range(10)), v, is_causal=True
    )
    assert rel_error(out.detach(), ref.detach()) <= 1e-5


def test_prior_is_independent_of_its_copy():
    """Deep copies (used for float64 references) do not share cached state with the original."""
    prior = randomized_prior(seed=7)
    clone = copy.deepcopy(prior).double()
    torch.testing.assert_close(
        clone.log_prior(range(20), range(20)).float(), prior.log_prior(range(20), range(20))
    )


def test_pack_is_unchanged_by_bf16_autocast():
    """Under autocast (Lightning's bf16-mixed) the prior's small terms still round only once."""
    prior = randomized_prior(heads=4, head_dim=64, modes=8, train_length=1024, seed=11)
    q_c, k_c = torch.randn(2, 1, 4, 10, prior.content_dim).bfloat16()
    plain = prior.pack(q_c, k_c, range(100, 110), range(100, 110))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = prior.pack(q_c, k_c, range(100, 110), range(100, 110))
        log_prior = prior.log_prior(range(5), range(5))
    for a, b in zip(plain, mixed, strict=True):
        assert a.dtype == b.dtype == torch.bfloat16 and torch.equal(a, b)
    assert log_prior.dtype == torch.float32
    torch.testing.assert_close(log_prior, prior.log_prior(range(5), range(5)))


AUTHORS_OPTIONS = {
    "n_kv_heads": 2,
    "attention_bias": True,
    "goat_modes": 2,
    "goat_abs_modes": 3,
    "goat_abs_freq_base": 500.0,
    "goat_key_mlp": "shared",
    "goat_mlp_hidden": None,
    "goat_slope": "softplus",
    "goat_init": "seeded",
    "goat_split_key_bias": False,
    "goat_alignment_slot": False,
    "goat_features": "float32",
    "goat_prior_gate": "query_norm",
}
"""goat-attention's parameterisation as ModelConfig options (tests/test_model_goat_conformance.py
checks them against the package itself)."""


def authors_decoder(attention: str = "sdpa", **overrides):
    from goatdna.model import ModelConfig

    options = {**AUTHORS_OPTIONS, **overrides}
    config = ModelConfig(
        n_layers=2, d_model=64, n_heads=4, mlp_hidden=96, train_length=16, attention=attention,
        **options,
    )  # fmt: skip
    return randomized_decoder(config)


def test_authors_options_shapes_and_hidden_size_rule():
    """d_p = 2R + 1 without the alignment slot; kv projections have the kv heads; the shared MLP
    has goat-attention's hidden size min(2F, 4) and a per-kv-head gain."""
    model = authors_decoder()
    attn = model.blocks[0].attn
    prior = attn.prior
    assert model.config.position_dim == 5 and model.config.content_dim == 11
    assert attn.q_proj.weight.shape == (4 * 11, 64) and attn.k_proj.weight.shape == (2 * 11, 64)
    assert attn.v_proj.weight.shape == (2 * 16, 64) and attn.q_proj.bias is not None
    assert prior.key_mlp.fc1.weight.shape == (4, 2 * 3 + 2)
    assert prior.gain.shape == (2,) and prior.alpha.shape == (2, 2)
    assert prior.gate_scale.shape == (4,)
    assert model.new_cache(1, 8).keys.shape[2] == 2


def test_authors_options_explicit_equals_packed_and_cache_equals_full():
    """The explicit reference (materialised prior, the gate applied per query) equals the packed
    SDPA path; cached decoding from an offset equals one full forward."""
    idx = torch.randint(0, 5, (2, 40), generator=torch.Generator().manual_seed(0))
    packed = authors_decoder("sdpa")
    explicit = authors_decoder("explicit")
    with torch.no_grad():
        full = packed(idx)
        torch.testing.assert_close(explicit(idx), full, atol=1e-5, rtol=1e-5)
        cache = packed.new_cache(2, 40)
        steps = [packed.forward_cached(idx[:, :25], cache)]
        steps += [packed.forward_cached(idx[:, t : t + 1], cache) for t in range(25, 40)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "option",
    ["goat_prior_gate", "goat_slope", "goat_key_mlp", "goat_abs_modes", "goat_features"],
)
def test_each_authors_option_changes_the_function(option):
    """Each option is live: switching it back to goatdna's default changes the logits (the
    weights kept where they exist)."""
    defaults = {"goat_prior_gate": "none", "goat_slope": "linear", "goat_key_mlp": "per_head",
                "goat_abs_modes": None, "goat_features": "float64"}  # fmt: skip
    idx = torch.randint(0, 5, (1, 64), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a = authors_decoder()(idx)
        b = authors_decoder(**{option: defaults[option]})(idx)
    if option == "goat_features":  # float64 vs float32 phases: ~1e-6 within 4x the length
        assert 0 < (a - b).abs().max() < 1e-4
    else:
        assert (a - b).abs().max() > 1e-3


def test_authors_options_attention_terms_reproduce_the_layer():
    """attention_terms (analysis: explicit content + prior, softmax, values) with grouped kv
    heads and the query-norm gate gives the layer's own output (the gate makes the prior map per
    row: (B, H, L, L))."""
    from goatdna.model.attention_maps import attention_terms

    model = authors_decoder()
    idx = torch.randint(0, 5, (2, 30), generator=torch.Generator().manual_seed(2))
    block = model.blocks[0]
    with torch.no_grad():
        (terms,) = attention_terms(model, idx, [0])
        x = block.attn_norm(model.embed(idx))
        expected = block.attn(x)
        output = block.attn.o_proj(terms.output.transpose(1, 2).reshape(2, 30, -1))
    assert terms.prior.shape == (2, 4, 30, 30) and terms.weights.shape == (2, 4, 30, 30)
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
