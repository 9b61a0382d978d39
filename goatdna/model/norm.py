"""RMSNorm with a closed-form backward on the CPU.

torch's ``F.rms_norm`` runs one fused kernel forward, but when gradients are needed on the CPU
it is recorded as its decomposition (``pow``, ``mean``, ``add``, ``rsqrt``, two ``mul``), so a
training step walks that many backward nodes and their full-width temporaries per norm (2 per
layer plus the final one). `RMSNorm` keeps torch's forward kernel (outputs bit-identical to
``nn.RMSNorm``) and writes the gradient in closed form, which takes less time forward + backward
(measured by `benchmarks/norm_bench.py`; the numbers live in benchmarks/README.md, "norm_bench").

With ``r = 1 / sqrt(mean(x^2) + eps)`` per row and ``y = x r w``, the gradients of a loss
with output gradient ``g`` are::

    dL/dx = r (g w) - x r^3 mean(g w x)        dL/dw = sum over rows of g x r

Elsewhere (CUDA, half precision, autocast, no grad, inference mode, under ``torch.compile``) the
module is exactly ``nn.RMSNorm``: those paths have fused kernels of their own (the compiler fuses
the decomposition), and this backward is written for fp32/fp64.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_CLOSED_FORM_DTYPES = (torch.float32, torch.float64)


class _RMSNormFunction(torch.autograd.Function):
    """``F.rms_norm`` over the last dimension forward; the closed-form gradients backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, eps: float) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.eps = eps
        return F.rms_norm(x, (x.shape[-1],), weight, eps)

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        x, weight = ctx.saved_tensors
        d = x.shape[-1]
        # r is recomputed (one pass over x): the public F.rms_norm does not hand it out, and
        # computing it again in the forward would cost the same pass.
        r = torch.linalg.vecdot(x, x).div_(d).add_(ctx.eps).rsqrt_().unsqueeze(-1)
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            gw = grad_out * weight
            # x r^3 mean(gw x), then r gw minus it: one fused multiply-add for the last step.
            coef = torch.linalg.vecdot(gw, x).unsqueeze(-1).mul_(r.pow(3)).div_(d)
            grad_x = torch.addcmul(gw * r, x, coef, value=-1.0)
        if ctx.needs_input_grad[1]:
            rows = (grad_out * x).reshape(-1, d)
            grad_w = rows.t().mv(r.reshape(-1))
        return grad_x, grad_w, None


class RMSNorm(nn.RMSNorm):
    """``nn.RMSNorm`` over the last dimension, with `_RMSNormFunction`'s backward on the CPU.

    Same parameters and state-dict keys as ``nn.RMSNorm`` (``weight``), so checkpoints and the
    Hugging Face export are unchanged; the closed form is used only where it applies (CPU,
    fp32/fp64, a weight, grad enabled outside inference mode, no autocast, not compiling) and
    ``nn.RMSNorm`` runs everywhere else.
    """

    def forward(self, x: Tensor) -> Tensor:
        weight = self.weight
        if (
            torch.compiler.is_compiling()  # the compiler fuses nn.RMSNorm's decomposition itself
            or weight is None
            or len(self.normalized_shape) != 1
            or x.device.type != "cpu"
            or x.dtype not in _CLOSED_FORM_DTYPES
            or weight.dtype != x.dtype
            or not torch.is_grad_enabled()
            or torch.is_inference_mode_enabled()  # records nothing, even under enable_grad
            or not (x.requires_grad or weight.requires_grad)
            or torch.is_autocast_enabled("cpu")
        ):
            return super().forward(x)
        eps = torch.finfo(x.dtype).eps if self.eps is None else self.eps
        out: Tensor = _RMSNormFunction.apply(x, weight, eps)
        return out
