"""The decoder under ``torch.compile(fullgraph=True)`` on CPU: one graph, the eager numbers.

``backend="aot_eager"`` traces with Dynamo and AOTAutograd but runs the traced ops eagerly (no
Inductor code generation, no C++ compiler), so the test is fast and exercises exactly what
``trainer.compile`` depends on: the ``torch.compiler.is_compiling()`` branches in goatdna/model
(GOAT's and RoPE's feature tables bypass their lru caches, the GOAT/ALiBi decoding-block caches
are skipped) and a graph without breaks (``fullgraph=True`` fails on any break).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from goatdna.model import DNADecoder, ModelConfig

CONFIG = ModelConfig(
    positional="goat",
    n_layers=1,
    d_model=32,
    n_heads=2,
    mlp_hidden=48,
    train_length=16,
    goat_modes=2,
    goat_mlp_hidden=8,
    attention="sdpa",
)


def _model(positional: str) -> DNADecoder:
    torch.manual_seed(0)
    model = DNADecoder(replace(CONFIG, positional=positional)).eval()
    with torch.no_grad():  # a non-trivial prior (the zero init is exactly standard attention)
        for block in model.blocks:
            prior = block.attn.prior
            if prior is not None:
                for p in prior.parameters():
                    p.normal_(0, 0.3)
    return model


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("positional", ["goat", "rope", "alibi", "nope"])
def test_compiled_forward_and_backward_equal_eager(positional: str) -> None:
    model = _model(positional)
    idx = torch.randint(0, 5, (2, 24))  # from position 5 to 28: past train_length (16) too
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    # one graph for forward and backward, as training compiles it
    eager = model(idx, 5)
    eager.logsumexp(-1).mean().backward()
    eager_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    traced = compiled(idx, 5)
    torch.testing.assert_close(traced, eager, atol=1e-5, rtol=1e-5)
    traced.logsumexp(-1).mean().backward()
    assert eager_grads.keys() == {n for n, p in model.named_parameters() if p.grad is not None}
    for name, grad in eager_grads.items():
        torch.testing.assert_close(model.get_parameter(name).grad, grad, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("positional", ["goat", "rope", "alibi"])
@torch.no_grad()
def test_compiled_decoding_step_equals_eager(positional: str) -> None:
    model = _model(positional)
    prompt = torch.randint(0, 4, (2, 6))
    step = torch.compile(model.forward_cached, backend="aot_eager", fullgraph=True)

    eager_cache = model.new_cache(2, 12)
    compiled_cache = model.new_cache(2, 12)
    torch.testing.assert_close(
        step(prompt, compiled_cache), model.forward_cached(prompt, eager_cache), atol=1e-5, rtol=0
    )
    token = prompt[:, -1:]
    for _ in range(3):
        eager = model.forward_cached(token, eager_cache)
        traced = step(token, compiled_cache)
        torch.testing.assert_close(traced, eager, atol=1e-5, rtol=0)
        token = eager[:, -1, :4].argmax(-1, keepdim=True)
    assert compiled_cache.length == eager_cache.length == 9
