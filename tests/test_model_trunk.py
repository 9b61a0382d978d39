"""The decoder's one trunk (`DNADecoder.hidden`): what each ``layers`` value returns, the cache
contract, and that nothing outside goatdna/model/ loops over a decoder's blocks or calls its head
privately."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from goatdna.model import DNADecoder, ModelConfig

ROOT = Path(__file__).resolve().parents[1] / "goatdna"
TINY = ModelConfig(positional="goat", n_layers=3, d_model=32, n_heads=2, mlp_hidden=64,
                   goat_modes=2, train_length=16)  # fmt: skip


def _model(positional: str = "goat") -> DNADecoder:
    torch.manual_seed(0)
    model = DNADecoder(ModelConfig(**{**TINY.__dict__, "positional": positional}))
    with torch.no_grad():  # a nonzero prior, so positions matter
        for layer in range(model.n_layers):
            prior = model.prior(layer)
            if prior is not None:
                for p in prior.parameters():
                    p.normal_(0, 0.3)
    return model.eval()


@pytest.mark.parametrize("positional", ["goat", "rope"])
def test_hidden_layers_are_the_block_outputs_and_none_is_the_normed_stream(positional: str):
    model = _model(positional)
    idx = torch.randint(0, 5, (2, 12))
    seen: list[torch.Tensor] = []
    hooks = [block.register_forward_hook(lambda _m, _a, out: seen.append(out))
             for block in model.blocks]  # fmt: skip
    with torch.no_grad():
        logits = model(idx, 3)
        for h in hooks:
            h.remove()
        assert torch.equal(model.hidden(idx, 3, layers=0), model.embed(idx))
        for k in range(1, model.n_layers + 1):
            assert torch.equal(model.hidden(idx, 3, layers=k), seen[k - 1])  # not normed
        final = model.hidden(idx, 3)
        assert torch.equal(final, model.norm(seen[-1]))
        assert torch.equal(model.logits(final), logits)
        states: list[torch.Tensor] = []
        assert torch.equal(model.hidden(idx, 3, states=states), final)
        assert len(states) == model.n_layers + 1
        assert all(torch.equal(a, b) for a, b in zip(states[1:], seen, strict=True))
    with pytest.raises(ValueError, match="layers must be in 0..3"):
        model.hidden(idx, layers=4)


def test_hidden_with_a_cache_keeps_positions_absolute():
    model = _model()
    idx = torch.randint(0, 5, (1, 10))
    cache = model.new_cache(1, 16)
    with torch.no_grad():
        first = model.hidden(idx[:, :6], 0, cache)
        rest = model.hidden(idx[:, 6:], 6, cache)
        whole = model.hidden(idx)
    assert cache.length == 10
    torch.testing.assert_close(torch.cat([first, rest], 1), whole, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="start_pos 0, but the cache holds 10"):
        model.hidden(idx[:, :1], 0, cache)
    with pytest.raises(ValueError, match="every layer"):
        model.hidden(idx[:, :1], 10, cache, layers=1)


def test_prior_accessor_is_each_layers_own():
    model = _model()
    priors = [model.prior(i) for i in range(model.n_layers)]
    assert all(p is not None for p in priors) and len({id(p) for p in priors}) == 3
    assert _model("rope").prior(0) is None


def decoder_internals_used(source: str, path: str) -> list[str]:
    """``.blocks`` of a model-like object and any ``_logits`` in ``source``, as 'path:line: what'.

    ``blocks`` also names score-track's spool counters; a receiver whose name says spool/run
    (``self.blocks`` in io/bigwig.py, ``spool.blocks``, ``run.blocks``) is not a decoder.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "_logits":
            found.append(f"{path}:{node.lineno}: ._logits")
        elif isinstance(node, ast.Name) and node.id == "_logits":
            found.append(f"{path}:{node.lineno}: _logits")
        elif isinstance(node, ast.Attribute) and node.attr == "blocks":
            receiver = ast.unparse(node.value)
            spool = receiver in ("spool", "run") or (
                receiver == "self" and path.endswith("io/bigwig.py")
            )
            if not spool:
                found.append(f"{path}:{node.lineno}: {receiver}.blocks")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in ("blocks", "_logits")
        ):
            found.append(f"{path}:{node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
    return found


def test_nothing_outside_model_touches_blocks_or_logits():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("model/"):
            continue
        found += decoder_internals_used(path.read_text(), relative)
    assert found == [], "use DNADecoder.hidden / logits / n_layers / prior instead:\n" + "\n".join(
        found
    )


@pytest.mark.parametrize(
    "planted",
    [
        "for block in model.blocks:\n    x = block(x, 0)\n",
        "n = len(self.model.blocks)\n",
        "logits = backbone._logits(x)\n",
        "blocks = getattr(model, 'blocks')\n",
        "prior = run.model.blocks[0].attn.prior\n",
    ],
)
def test_the_check_finds_a_planted_violation(planted: str):
    assert decoder_internals_used(planted, "inference/embed.py")
    assert not decoder_internals_used("n = spool.blocks + run.blocks\n", "inference/tracks.py")
