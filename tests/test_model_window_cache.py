"""GOAT's inference cache of q'/k' position slots (`goatdna.model.goat.WindowTails`).

Every cached path must give what the uncached computation gives, and a parameter changed in
any way (in place, by an optimizer step, by ``load_state_dict``) must never be served stale.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from goatdna.model import DNADecoder, ModelConfig
from goatdna.model.goat import WINDOW_CACHE_ENTRIES, GoatPrior

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
CPU = torch.device("cpu")


def _model(seed: int = 0) -> DNADecoder:
    torch.manual_seed(seed)
    model = DNADecoder(CONFIG).eval()
    with torch.no_grad():  # a prior with every term switched on
        for layer in range(model.n_layers):
            prior = model.prior(layer)
            assert prior is not None
            for p in prior.parameters():
                p.normal_(0, 0.3)
    return model


def _prior(seed: int = 0) -> GoatPrior:
    torch.manual_seed(seed)
    prior = GoatPrior(4, 32, num_modes=4, train_length=64)
    with torch.no_grad():
        for p in prior.parameters():
            p.normal_(0, 0.3)
    return prior


def _uncached_logits(model: DNADecoder, idx: torch.Tensor, start: int = 0) -> torch.Tensor:
    """Autograd on: nothing is cached, every slot is computed afresh."""
    with torch.enable_grad():
        return model(idx, start).detach()


def test_cached_slots_equal_the_computed_ones_for_any_ranges() -> None:
    prior = _prior()
    with torch.no_grad():
        for pos_q, pos_k in [
            (range(0, 40), range(0, 40)),
            (range(17, 30), range(17, 30)),
            (range(100, 300), range(100, 300)),
            (range(5, 9), range(0, 9)),  # a query block over a longer key range
        ]:
            for _ in range(2):  # the second call is served from the cache
                q_tail, k_tail = prior._position_tails(pos_q, pos_k, torch.float32, CPU)
                q_ref, k_ref = prior._compute_tails(pos_q, pos_k, torch.float32, CPU)
                torch.testing.assert_close(q_tail, q_ref, rtol=0, atol=0)
                torch.testing.assert_close(k_tail, k_ref, rtol=0, atol=0)
    assert len(prior._window_tails) == WINDOW_CACHE_ENTRIES


def test_model_outputs_with_the_cache_equal_the_uncached_forward() -> None:
    model = _model()
    idx = torch.randint(0, 5, (3, 48))
    reference = _uncached_logits(model, idx)
    with torch.inference_mode():
        first = model(idx)
        again = model(idx)  # cache hit in every layer
    with torch.no_grad():  # outside inference mode, reusing what inference mode cached
        plain = model(idx)
    for out in (first, again, plain):
        torch.testing.assert_close(out, reference, rtol=1e-6, atol=1e-6)
    assert all(len(model.prior(i)._window_tails) == 1 for i in range(model.n_layers))  # type: ignore[union-attr]


def test_a_weight_changed_in_place_changes_the_output() -> None:
    model = _model()
    idx = torch.randint(0, 5, (2, 40))
    with torch.inference_mode():
        before = model(idx)
    prior = model.prior(0)
    assert prior is not None
    with torch.no_grad():
        prior.mlp_w2.add_(0.5)  # g_h changes: u_h(j) of every position moves
    with torch.inference_mode():
        after = model(idx)
    assert not torch.allclose(before, after, atol=1e-4)
    torch.testing.assert_close(after, _uncached_logits(model, idx), rtol=1e-6, atol=1e-6)


def test_optimizer_steps_and_load_state_dict_invalidate() -> None:
    model = _model()
    idx = torch.randint(0, 5, (2, 33))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    with torch.no_grad():
        model(idx)  # fills the cache
    model.train()
    loss = model(idx).logsumexp(-1).mean()
    loss.backward()  # autograd on: gradients reached the prior (nothing cached served)
    prior = model.prior(1)
    assert prior is not None and prior.slope.grad is not None and prior.slope.grad.abs().sum() > 0
    optimizer.step()
    model.eval()
    with torch.no_grad():
        stepped = model(idx)
    torch.testing.assert_close(stepped, _uncached_logits(model, idx), rtol=1e-6, atol=1e-6)
    other = _model(seed=1)
    model.load_state_dict(other.state_dict())
    with torch.no_grad():
        loaded = model(idx)
    torch.testing.assert_close(loaded, _uncached_logits(other, idx), rtol=1e-6, atol=1e-6)


def test_kv_cached_suffix_equals_the_full_forward() -> None:
    """score-variants' shared prefix: a block of queries at shifted positions, from the cache."""
    model = _model()
    idx = torch.randint(0, 4, (2, 50))
    full = _uncached_logits(model, idx)
    with torch.inference_mode():
        for _ in range(2):
            cache = model.new_cache(2, 50)
            head = model.forward_cached(idx[:, :20], cache)
            tail = model.forward_cached(idx[:, 20:], cache)
            torch.testing.assert_close(torch.cat([head, tail], 1), full, rtol=1e-5, atol=1e-5)


def test_rope_models_are_untouched() -> None:
    torch.manual_seed(0)
    model = DNADecoder(replace(CONFIG, positional="rope")).eval()
    idx = torch.randint(0, 5, (2, 20))
    with torch.inference_mode():
        torch.testing.assert_close(model(idx), _uncached_logits(model, idx), rtol=0, atol=0)


def test_the_cache_keeps_to_its_byte_budget() -> None:
    prior = _prior()
    one = sum(t.numel() * 4 for t in prior._compute_tails(range(64), range(64), torch.float32, CPU))
    prior._window_tails.max_bytes = 2 * one  # room for two 64-position entries
    with torch.no_grad():
        for start in (0, 64, 128):
            prior._position_tails(range(start, start + 64), range(start, start + 64),
                                  torch.float32, CPU)  # fmt: skip
        assert len(prior._window_tails) == 2 and prior._window_tails.nbytes <= 2 * one
        prior._position_tails(range(1000), range(1000), torch.float32, CPU)  # over the budget
    assert len(prior._window_tails) == 2  # not kept, nothing evicted for it
