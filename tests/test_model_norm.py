"""goatdna.model.norm.RMSNorm: nn.RMSNorm's outputs, closed-form gradients exact against fp64."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from goatdna.model import DNADecoder, ModelConfig
from goatdna.model.norm import RMSNorm, _RMSNormFunction


def _pair(d: int = 48, eps: float | None = 1e-5, dtype: torch.dtype = torch.float32):
    """Ours and torch's, with the same random (non-unit) weight."""
    torch.manual_seed(0)
    ours, ref = RMSNorm(d, eps=eps, dtype=dtype), nn.RMSNorm(d, eps=eps, dtype=dtype)
    with torch.no_grad():
        ours.weight.uniform_(0.5, 1.5)
    ref.load_state_dict(ours.state_dict())
    return ours, ref


def _grads(norm: nn.Module, x: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, ...]:
    x = x.detach().clone().requires_grad_(True)
    out = norm(x)
    gx, gw = torch.autograd.grad(out, (x, norm.weight), g)
    return out.detach(), gx, gw


def test_forward_bit_identical_to_nn_rmsnorm_and_uses_the_closed_form() -> None:
    ours, ref = _pair()
    x = torch.randn(3, 17, 48, requires_grad=True)
    out = ours(x)
    assert type(out.grad_fn).__name__ == "_RMSNormFunctionBackward"
    assert torch.equal(out, ref(x))


@pytest.mark.parametrize("eps", [1e-5, None])
def test_gradients_match_float64_autograd(eps: float | None) -> None:
    """fp32 closed form vs autograd through nn.RMSNorm in fp64: as close as fp32 rounding allows,
    and no further from the fp64 truth than autograd's own fp32 gradients are."""
    ours, ref = _pair(eps=eps)
    ref64 = nn.RMSNorm(48, eps=eps if eps is not None else torch.finfo(torch.float32).eps)
    ref64 = ref64.double()
    ref64.load_state_dict({"weight": ours.weight.detach().double()})
    torch.manual_seed(1)
    x = torch.randn(4, 33, 48) * 3.0
    g = torch.randn(4, 33, 48)
    _, gx, gw = _grads(ours, x, g)
    _, gx_ref, gw_ref = _grads(ref, x, g)
    _, gx64, gw64 = _grads(ref64, x.double(), g.double())
    for got, fp32_autograd, truth in ((gx, gx_ref, gx64), (gw, gw_ref, gw64)):
        err = (got.double() - truth).abs().max().item()
        ref_err = (fp32_autograd.double() - truth).abs().max().item()
        scale = truth.abs().max().item()
        assert err <= 1e-5 * scale
        assert err <= 4 * ref_err + 1e-7 * scale


def test_gradcheck_and_gradgradcheck_float64() -> None:
    torch.manual_seed(2)
    x = torch.randn(2, 5, 7, dtype=torch.float64, requires_grad=True)
    w = torch.rand(7, dtype=torch.float64, requires_grad=True) + 0.5

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = _RMSNormFunction.apply(a, b, 1e-6)
        return out

    assert torch.autograd.gradcheck(fn, (x, w))
    assert torch.autograd.gradgradcheck(fn, (x, w))


def test_only_one_input_needing_a_gradient() -> None:
    ours, ref = _pair()
    x = torch.randn(5, 48, requires_grad=True)
    ours.weight.requires_grad_(False)
    ref.weight.requires_grad_(False)
    (gx,) = torch.autograd.grad(ours(x).square().sum(), x)
    (gx_ref,) = torch.autograd.grad(ref(x).square().sum(), x)
    torch.testing.assert_close(gx, gx_ref)
    ours.weight.requires_grad_(True)
    ref.weight.requires_grad_(True)
    frozen = torch.randn(5, 48)  # an embedding output under a frozen embedding, say
    (gw,) = torch.autograd.grad(ours(frozen).square().sum(), ours.weight)
    (gw_ref,) = torch.autograd.grad(ref(frozen).square().sum(), ref.weight)
    torch.testing.assert_close(gw, gw_ref)


def test_falls_back_to_nn_rmsnorm_where_the_closed_form_does_not_apply() -> None:
    ours, ref = _pair()
    x = torch.randn(2, 9, 48, requires_grad=True)
    with torch.no_grad():
        assert torch.equal(ours(x), ref(x))
    with torch.inference_mode():  # records nothing, even under enable_grad
        xi = x.detach().clone()
        with torch.enable_grad():
            assert torch.equal(ours(xi), ref(xi))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = ours(x)
        assert type(out.grad_fn).__name__ != "_RMSNormFunctionBackward"
        assert torch.equal(out, ref(x))
    half, half_ref = ours.to(torch.bfloat16), ref.to(torch.bfloat16)
    xb = x.detach().to(torch.bfloat16).requires_grad_(True)
    out = half(xb)
    assert type(out.grad_fn).__name__ != "_RMSNormFunctionBackward"
    assert torch.equal(out, half_ref(xb))


def test_same_state_dict_as_nn_rmsnorm() -> None:
    ours, ref = _pair()
    assert list(ours.state_dict()) == list(ref.state_dict()) == ["weight"]
    assert isinstance(ours, nn.RMSNorm)  # init code that matches nn.RMSNorm still finds it


def test_decoder_training_gradients_match_nn_rmsnorm_decoder() -> None:
    """A whole decoder's gradients with the closed form vs with torch's nn.RMSNorm swapped in."""
    config = ModelConfig(
        d_model=64, n_layers=2, n_heads=2, mlp_hidden=96, train_length=64, positional="goat"
    )
    torch.manual_seed(3)
    model = DNADecoder(config)
    plain = DNADecoder(config)
    plain.load_state_dict(model.state_dict())
    for name, module in list(plain.named_modules()):
        if isinstance(module, RMSNorm):
            swap = nn.RMSNorm(config.d_model, eps=config.norm_eps)
            swap.load_state_dict(module.state_dict())
            parent, _, attr = name.rpartition(".")
            setattr(plain.get_submodule(parent) if parent else plain, attr, swap)
    assert not any(isinstance(m, RMSNorm) for m in plain.modules())
    idx = torch.randint(0, 4, (2, 40))
    for m in (model, plain):
        m(idx).logsumexp(-1).mean().backward()
    for (name, p), q in zip(model.named_parameters(), plain.parameters(), strict=True):
        assert p.grad is not None and q.grad is not None, name
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6, msg=name)
