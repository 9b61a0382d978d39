"""``output_attentions=True`` on the exported classes, checked against independent computations.

The weights transformers returns are recomputed beside the fused SDPA call from the packed q'/k'
(`goatdna.model.attention_maps.layer_weights`); they must equal the paper's explicit
``softmax(content + prior)`` built from the materialised prior (`attention_terms`, Eqs. (4)-(10)),
and ``weights @ V`` must equal what the fused kernel handed to the output projection in a plain
forward pass: for GOAT, RoPE, ALiBi and NoPE, to 1e-5. Rows sum to 1, causal and padded keys
carry exact zeros, a padded row's weights are its sequence's alone, and a cached decoding step
sees what the full pass saw.
"""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from goatdna.hf import (  # noqa: E402  (after the importorskip)
    GoatDNAConfig,
    GoatDNAForCausalLM,
    GoatDNAForSequenceClassification,
    GoatDNAModel,
)
from goatdna.hf.modeling_goatdna import _CACHE_FIELD  # noqa: E402
from goatdna.model.attention_maps import attention_terms  # noqa: E402

SCHEMES = ("goat", "rope", "alibi", "nope")


def _model(positional: str, cls: type = GoatDNAForCausalLM) -> torch.nn.Module:
    """A tiny model whose every weight (GOAT's prior too) is far from its init."""
    config = GoatDNAConfig(
        positional=positional, n_layers=2, d_model=48, n_heads=2, mlp_hidden=64,
        goat_modes=4, goat_mlp_hidden=8, goat_init="alibi", train_length=16,
    )  # fmt: skip
    torch.manual_seed(0)
    model = cls(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    return model


def _fused_outputs(model: torch.nn.Module, ids: torch.Tensor) -> list[torch.Tensor]:
    """What each block's fused attention handed to its output projection, (B, L, H * d_h), in a
    plain forward pass (no output_attentions)."""
    seen: list[torch.Tensor] = []
    hooks = [
        block.attn.o_proj.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
        for block in model.model.blocks
    ]
    try:
        with torch.no_grad():
            model(ids)
    finally:
        for hook in hooks:
            hook.remove()
    return seen


@pytest.mark.parametrize("scheme", SCHEMES)
def test_weights_equal_the_explicit_terms_and_times_v_the_fused_output(scheme: str) -> None:
    lm = _model(scheme)
    ids = torch.randint(0, 5, (2, 21), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        out = lm(ids, output_attentions=True)
        terms = attention_terms(lm.model, ids, range(lm.model.n_layers))
        plain = lm(ids).logits
    torch.testing.assert_close(out.logits, plain, atol=1e-5, rtol=0)  # explicit = fused
    assert len(out.attentions) == lm.model.n_layers
    fused = _fused_outputs(lm, ids)
    for layer, (weights, term) in enumerate(zip(out.attentions, terms, strict=True)):
        assert weights.shape == (2, 2, 21, 21)
        torch.testing.assert_close(weights, term.weights, atol=1e-5, rtol=0)
        if scheme in ("goat", "alibi"):
            assert term.prior is not None and term.prior.shape == (2, 21, 21)
            # the prior really acts: without it the weights differ
            bare = torch.softmax(term.content.masked_fill(weights == 0, float("-inf")), dim=-1)
            assert (bare - weights).abs().max() > 1e-3
        else:
            assert term.prior is None
        B, H, L, d = term.output.shape
        torch.testing.assert_close(
            term.output.transpose(1, 2).reshape(B, L, H * d), fused[layer], atol=1e-5, rtol=0
        )
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 21), atol=1e-5, rtol=0)
        assert torch.all(weights.triu(1) == 0)  # causal: no later key gets anything


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_padded_row_has_its_sequence_alone_weights(scheme: str, side: str) -> None:
    lm = _model(scheme)
    gen = torch.Generator().manual_seed(4)
    rows = [torch.randint(0, 5, (n,), generator=gen) for n in (19, 8)]
    width = 19
    ids = torch.full((2, width), 5)
    mask = torch.zeros(2, width, dtype=torch.long)
    for b, row in enumerate(rows):
        cols = slice(width - len(row), width) if side == "left" else slice(0, len(row))
        ids[b, cols], mask[b, cols] = row, 1
    trunk_model = _model(scheme, GoatDNAModel)
    trunk_model.model.load_state_dict(lm.model.state_dict(), strict=False)  # the LM head aside
    with torch.no_grad():
        padded = lm(ids, attention_mask=mask, output_attentions=True).attentions
        trunk = trunk_model(ids, attention_mask=mask, output_attentions=True)
    for b, row in enumerate(rows):
        real = mask[b].bool()
        with torch.no_grad():
            alone = lm(row[None], output_attentions=True).attentions
        for layer in range(2):
            weights = padded[layer][b]  # (H, L, L)
            torch.testing.assert_close(
                weights[:, real][:, :, real], alone[layer][0], atol=1e-5, rtol=0
            )
            assert torch.all(weights[:, real][:, :, ~real] == 0)  # padded keys carry 0
            torch.testing.assert_close(weights.sum(-1), torch.ones(2, width), atol=1e-5, rtol=0)
            torch.testing.assert_close(trunk.attentions[layer][b], weights, atol=0, rtol=0)


@pytest.mark.parametrize("scheme", ["goat", "rope"])
def test_a_cached_step_sees_what_the_full_pass_saw(scheme: str) -> None:
    lm = _model(scheme)
    ids = torch.randint(0, 4, (2, 12), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        full = lm(ids, output_attentions=True).attentions
        prefix = lm(ids[:, :-1], use_cache=True)
        cache = getattr(prefix, "cache", None) or prefix.past_key_values
        cached = {_CACHE_FIELD: cache}  # `cache` where transformers has renamed past_key_values
        step = lm(ids[:, -1:], **cached, use_cache=True, output_attentions=True)
    for layer in range(2):
        assert step.attentions[layer].shape == (2, 2, 1, 12)
        torch.testing.assert_close(
            step.attentions[layer], full[layer][:, :, -1:], atol=1e-5, rtol=0
        )


def test_the_classifier_returns_its_forward_strands_weights() -> None:
    lm = _model("goat")
    classifier = _model("goat", GoatDNAForSequenceClassification)
    classifier.model.load_state_dict(lm.model.state_dict(), strict=False)
    ids = torch.randint(0, 4, (2, 10), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        got = classifier(ids, output_attentions=True)
        # the classifier keeps no KV cache; the LM's default one computes the same weights
        # through other kernels (~1e-7 apart on some CPUs), so compare like with like
        want = lm(ids, output_attentions=True, use_cache=False).attentions
    assert got.hidden_states is None and len(got.attentions) == 2
    for layer in range(2):
        torch.testing.assert_close(got.attentions[layer], want[layer], atol=0, rtol=0)


@pytest.mark.parametrize("cache", [None, "static"])
def test_generate_returns_the_weights_and_the_same_tokens(cache: str | None) -> None:
    """``generate(output_attentions=True)`` (dynamic and static cache, a left-padded row) picks
    the tokens plain ``generate`` picks; every step's rows sum to 1 and padded keys carry 0 for
    every real query (a padding query sees its own column, so its row is never empty)."""
    lm = _model("goat")
    ids = torch.randint(0, 4, (2, 6), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    extra = {} if cache is None else {"cache_implementation": cache}
    args = dict(attention_mask=mask, max_new_tokens=3, do_sample=False, **extra)
    out = lm.generate(ids, output_attentions=True, return_dict_in_generate=True, **args)
    assert torch.equal(out.sequences, lm.generate(ids, **args))
    assert len(out.attentions) == 3  # one tuple of layers per step
    for step in out.attentions:
        for weights in step:
            torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
            assert torch.all(weights[1, :, -4:, :2] == 0)  # real queries: the last 4 of the prompt
