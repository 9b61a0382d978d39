"""Rotary position embedding (RoPE, Su et al. 2021): the baseline GOAT is compared with.

Rotates pairs ``(x[k], x[k + d/2])`` of the full head dim by ``theta_k * position`` with
``theta_k = base^(-2k/d)`` (the GPT-NeoX "rotate half" pairing of the projection's outputs).
Angles are computed in float64 from integer positions and cached per position range and device,
so offsets for the KV cache and positions far beyond the training length stay exact.

The rotation is one complex multiply: pair k becomes the complex number ``x[k] + i x[k + d/2]``
times ``exp(i theta_k p)``, and the result is returned pair-interleaved, ``(re_0, im_0, re_1,
im_1, ...)``, the layout the complex product already has in memory. Queries and keys get the same
order, so every ``q . k`` (and so attention, the KV cache and attention maps) equals the
rotate-half formula's ``q*cos + rotate_half(q)*sin``; only the order of the dims inside a rotated
vector differs. Two ops instead of that formula's five (neg, cat, two muls, add), and backward is
the inverse rotation (`_Rotate`), two more (timed against the formula by
`benchmarks/rope_bench.py`; the numbers live in benchmarks/README.md, "rope_bench").
Half precision (no bfloat16 complex type) rotates in float32 and rounds once.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor, nn


def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    """The real dtype the rotation runs in: float64 stays, everything else uses float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _polar(angles: Tensor, work: torch.dtype) -> tuple[Tensor, Tensor]:
    """exp(i angles) (float64 angles) and its conjugate, as complex tensors of ``work``'s width."""
    complex_dtype = torch.complex128 if work == torch.float64 else torch.complex64
    rotation = torch.polar(torch.ones_like(angles), angles).to(complex_dtype)
    return rotation, rotation.conj().resolve_conj()


@functools.lru_cache(maxsize=16)
def _rotations(
    head_dim: int,
    base: float,
    pos: range,
    device: torch.device,
    work: torch.dtype,
    divisor: float = 1.0,
) -> tuple[Tensor, Tensor]:
    """exp(i pos theta_k) computed in float64 and its conjugate, each (L, d/2) complex.

    Built on ``device`` directly (no blocking host-to-device copy per decoding step, no CPU
    ``arange`` in a compiled graph), and outside inference mode so that a cache filled during
    evaluation serves training too.
    """
    with torch.inference_mode(False), torch.no_grad():
        f64 = torch.float64
        theta = base ** (
            -torch.arange(0, head_dim, 2, dtype=f64, device=device) / head_dim
        )  # (d/2,)
        positions = torch.arange(pos.start, pos.stop, pos.step, dtype=f64, device=device) / divisor
        return _polar(positions[:, None] * theta[None, :], work)  # (L, d/2)


def _rotate(x: Tensor, rotation: Tensor) -> Tensor:
    """x (..., d), pairs (k, k + d/2), times ``rotation`` (..., d/2) -> (..., d) pair-interleaved."""
    half = x.shape[-1] // 2
    work = _work_dtype(x.dtype)
    z = torch.complex(x[..., :half].to(work), x[..., half:].to(work)) * rotation
    return torch.view_as_real(z).flatten(-2).to(x.dtype)  # (..., d): re_0, im_0, re_1, ...


class _Rotate(torch.autograd.Function):
    """`_rotate` with the inverse rotation as its backward.

    Written out because autograd's own backward of the complex product goes through
    ``torch.complex``'s two halves, each scattered into a zero tensor and summed (five ops where
    the inverse rotation below takes two; `benchmarks/rope_bench.py` times both).
    """

    @staticmethod
    def forward(ctx, x: Tensor, rotation: Tensor, inverse: Tensor) -> Tensor:
        ctx.save_for_backward(inverse)
        ctx.dtype = x.dtype
        return _rotate(x, rotation)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:
        (inverse,) = ctx.saved_tensors
        half = grad.shape[-1] // 2
        work = _work_dtype(ctx.dtype)
        pairs = torch.view_as_complex(grad.to(work).contiguous().unflatten(-1, (half, 2)))
        back = torch.view_as_real(pairs * inverse)  # (..., d/2, 2): the pairs rotated back
        return back.transpose(-1, -2).flatten(-2).to(ctx.dtype), None, None  # (..., d) halves


class RotaryEmbedding(nn.Module):
    """Applies RoPE to queries and keys (B, H, L, d) at absolute positions ``pos``."""

    def __init__(
        self,
        head_dim: int,
        base: float = 10000.0,
        scaling: str = "none",
        train_length: int | None = None,
    ) -> None:
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"RoPE needs an even head dim, got {head_dim}")
        if scaling not in ("none", "linear", "ntk"):
            raise ValueError(f"RoPE scaling must be none, linear or ntk, got {scaling!r}")
        if scaling != "none" and not train_length:
            raise ValueError("RoPE scaling needs the training length")
        self.head_dim = head_dim
        self.base = float(base)
        self.scaling = scaling
        self.train_length = train_length

    def _base_and_divisor(self, pos: range) -> tuple[float, float]:
        """(base, position divisor) for a call ending at ``pos.stop`` (see the module docstring)."""
        if self.scaling == "none" or self.train_length is None:
            return self.base, 1.0
        s = max(1.0, pos.stop / self.train_length)
        if self.scaling == "linear":
            return self.base, s
        return self.base * s ** (self.head_dim / (self.head_dim - 2)), 1.0

    def rotations(
        self, pos: range, device: torch.device, dtype: torch.dtype
    ) -> tuple[Tensor, Tensor]:
        """Cached exp(i angle) for a position range and its conjugate, each (L, d/2) complex, for
        inputs of ``dtype`` (complex128 for float64, complex64 otherwise)."""
        # under torch.compile the tables are traced into the graph (constants there)
        table = _rotations.__wrapped__ if torch.compiler.is_compiling() else _rotations
        base, divisor = self._base_and_divisor(pos)
        return table(self.head_dim, base, pos, device, _work_dtype(dtype), divisor)

    def rotations_rows(self, pos: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """exp(i angle) for per-row positions ``pos`` (B, L) and its conjugate -> each
        (B, 1, L, d/2) complex.

        The same float64 angles as `rotations`; a row's scaling (linear, ntk) follows its own last
        position, as `rotations` follows ``pos.stop`` for a row alone.
        """
        f64, d = torch.float64, self.head_dim
        positions = pos.to(torch.float64)  # (B, L)
        exponent = torch.arange(0, d, 2, dtype=f64, device=pos.device) / d  # (d/2,)
        base = torch.full_like(positions[:, :1], self.base)  # (B, 1)
        if self.scaling != "none" and self.train_length is not None:
            stop = positions.amax(dim=-1, keepdim=True) + 1
            s = (stop / self.train_length).clamp(min=1.0)  # (B, 1)
            if self.scaling == "linear":
                positions = positions / s
            else:
                base = base * s ** (d / (d - 2))
        theta = base ** (-exponent)  # (B, d/2)
        angles = positions[:, :, None] * theta[:, None, :]  # (B, L, d/2)
        return _polar(angles[:, None], _work_dtype(dtype))  # (B, 1, L, d/2)

    def forward(self, x: Tensor, pos: range | Tensor) -> Tensor:
        """Rotate ``x`` (B, H, L, d) whose rows sit at positions ``pos`` (a range of len L, or
        per-row positions (B, L)) -> (B, H, L, d), pair-interleaved (module docstring)."""
        if isinstance(pos, Tensor):
            rotation, inverse = self.rotations_rows(pos, x.dtype)  # (B, 1, L, d/2)
        else:
            rotation, inverse = self.rotations(pos, x.device, x.dtype)  # (L, d/2)
        if torch.is_grad_enabled() and x.requires_grad:
            return _Rotate.apply(x, rotation, inverse)
        return _rotate(x, rotation)  # no backward: skip autograd.Function's ~15 us per call

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base}, scaling={self.scaling}"
