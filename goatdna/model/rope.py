"""Rotary position embedding (RoPE, Su et al. 2021): the baseline GOAT is compared with.

Rotates pairs ``(x[k], x[k + d/2])`` of the full head dim by ``theta_k * position`` with
``theta_k = base^(-2k/d)`` (the GPT-NeoX "rotate half" layout). Angles are computed in float64
from integer positions and cached per position range and device, so offsets for the KV cache and
positions far beyond the training length stay exact.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor, nn


@functools.lru_cache(maxsize=16)
def _cos_sin(
    head_dim: int,
    base: float,
    pos: range,
    device: torch.device,
    dtype: torch.dtype,
    divisor: float = 1.0,
) -> tuple[Tensor, Tensor]:
    """cos/sin of ``pos * theta_k`` computed in float64, each (L, d) (halves repeated), in dtype.

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
        angles = positions[:, None] * theta[None, :]  # (L, d/2)
        angles = torch.cat([angles, angles], dim=-1)  # (L, d)
        return torch.cos(angles).to(dtype), torch.sin(angles).to(dtype)


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

    def cos_sin(
        self, pos: range, device: torch.device, dtype: torch.dtype
    ) -> tuple[Tensor, Tensor]:
        """Cached cos/sin for a position range, each (L, d) in ``dtype`` (halves repeated)."""
        # under torch.compile the tables are traced into the graph (constants there)
        table = _cos_sin.__wrapped__ if torch.compiler.is_compiling() else _cos_sin
        base, divisor = self._base_and_divisor(pos)
        return table(self.head_dim, base, pos, device, dtype, divisor)

    def cos_sin_rows(self, pos: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """cos/sin for per-row positions ``pos`` (B, L) -> each (B, 1, L, d) in ``dtype``.

        The same float64 angles as `cos_sin`; a row's scaling (linear, ntk) follows its own last
        position, as `cos_sin` follows ``pos.stop`` for a row alone.
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
        angles = torch.cat([angles, angles], dim=-1)[:, None]  # (B, 1, L, d)
        return torch.cos(angles).to(dtype), torch.sin(angles).to(dtype)

    def forward(self, x: Tensor, pos: range | Tensor) -> Tensor:
        """Rotate ``x`` (B, H, L, d) whose rows sit at positions ``pos`` (a range of len L, or
        per-row positions (B, L))."""
        if isinstance(pos, Tensor):
            cos, sin = self.cos_sin_rows(pos, x.dtype)  # (B, 1, L, d)
        else:
            cos, sin = self.cos_sin(pos, x.device, x.dtype)  # (L, d)
        half = self.head_dim // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # (B, H, L, d)
        return x * cos + rotated * sin

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base}, scaling={self.scaling}"
