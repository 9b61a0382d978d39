r"""ALiBi (Press et al., 2022) as a fixed key-only prior, packed like GOAT's into one SDPA call.

ALiBi adds ``-m_h (i - j)`` to the logit of query i and key j, with fixed head slopes ``m_h``.
Softmax ignores the per-query constant ``-m_h i``, so ALiBi *is* GOAT's key-only term with only
the slope (the paper's Eqs. (21)-(22) with ``g_h = 0``, ``sink_h = 0``, ``slope_h = m_h``; its
App. G.3) and no relative modes (Eqs. (12)-(19) with R = 0): ``K_ij = m_h j``. It is packed the
same way (goat.py, Eqs. (23)-(24)) with d_p = 2 position dims::

    q'_i = [ sqrt(d_h/d_c) qc_i,  sqrt(d_h),  sqrt(d_h) ]
    k'_j = [ kc_j,                hi(u_h(j)), lo(u_h(j)) ],   u_h(j) = m_h j

so ``sdpa(q', k', v)`` with its default scale computes ``softmax(qc kc^T / sqrt(d_c) + K) v``,
with no L x L bias in memory; ``u`` is split into bf16 ``hi + lo`` exactly as GOAT's is. Nothing is
learned, and nothing is stored: the slopes are built on the inputs' device when used.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .goat import DECODE_BLOCK, Positions, _as_positions, _flat, _per_row, _slot_and_gain

POSITION_DIM = 2
"""Query/key dims ALiBi's packing takes from each head (the hi/lo slots of the key bias)."""


def slopes_on(num_heads: int, device: torch.device) -> Tensor:
    """`alibi_slopes` built on ``device`` (float64): no host-to-device copy per step.

    With c the largest power of two <= H: exponents 8h/c for h = 1..c, then 4(2k+1)/c for the
    H - c interleaved extra heads; slope = 2^-exponent.
    """
    c = 2 ** math.floor(math.log2(num_heads))
    f64 = torch.float64
    exponents = torch.cat(
        [
            8 * torch.arange(1, c + 1, dtype=f64, device=device) / c,
            4 * (2 * torch.arange(0, num_heads - c, dtype=f64, device=device) + 1) / c,
        ]
    )
    return torch.exp2(-exponents)


class AlibiPrior(nn.Module):
    """One layer's ALiBi log-prior ``K_ij = m_h j`` (equivalently ``-m_h (i - j)``)."""

    def __init__(self, num_heads: int, head_dim: int) -> None:
        super().__init__()
        if head_dim <= POSITION_DIM:
            raise ValueError(f"ALiBi packing needs head_dim > {POSITION_DIM}, got {head_dim}")
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.content_dim = head_dim - POSITION_DIM
        self._decode_block: tuple | None = None  # (key, k tail) of the current decoding block
        # precomputed so that pack() stays free of host syncs (torch.compile traces it whole)
        self._slot_gain = {
            dt: _slot_and_gain(head_dim, dt)
            for dt in (torch.float64, torch.float32, torch.float16, torch.bfloat16)
        }

    def key_bias64(self, pos: Positions, device: torch.device) -> Tensor:
        """u_h(j) = m_h j -> (H, L) float64 on ``device``."""
        slopes = slopes_on(self.num_heads, device)  # float64, exact
        return slopes[:, None] * _as_positions(pos, device)[None, :]

    def log_prior(self, pos_q: Positions, pos_k: Positions) -> Tensor:
        """K_ij = m_h j -> (num_heads, Lq, Lk) float32 on the CPU, materialised (reference and plots;
        ALiBi holds no tensor to take a device from, so the explicit path moves it to its logits)."""
        u = self.key_bias64(pos_k, torch.device("cpu"))  # (H, Lk)
        lq = len(pos_q)
        return u[:, None, :].expand(self.num_heads, lq, u.shape[1]).float()

    def pack(
        self, q_c: Tensor, k_c: Tensor, pos_q: Positions, pos_k: Positions
    ) -> tuple[Tensor, Tensor]:
        """Content queries/keys (B, H, L, d_c) -> packed q', k' (B, H, L, d_h) for one SDPA call;
        ``pos_k`` may be per-row positions (B, L), as for `GoatPrior.pack`."""
        B, H, Lq, dc = q_c.shape
        Lk = k_c.shape[2]
        dtype, device, d = q_c.dtype, q_c.device, self.head_dim
        slot, _ = self._slot_gain.get(dtype) or _slot_and_gain(d, dtype)
        const = q_c.new_full((2,), slot)
        q = torch.cat(
            [q_c.transpose(1, 2) * math.sqrt(d / dc), const.expand(B, Lq, H, 2)], dim=-1
        )  # (B, Lq, H, d_h)
        k_tail = _per_row(self._key_tail(_flat(pos_k), dtype, device), pos_k)  # ([B,] Lk, H, 2)
        k = torch.cat([k_c.transpose(1, 2), k_tail.expand(B, Lk, H, 2)], dim=-1)  # (B, Lk, H, d_h)
        return q.transpose(1, 2), k.transpose(1, 2)  # (B, H, L, d_h) views

    def _key_tail(self, pos: Positions, dtype: torch.dtype, device: torch.device) -> Tensor:
        """[hi(u), lo(u)] of u_h(j) = m_h j -> (Lk, H, 2). A decoding step (one position, no
        autograd) reads it from a block of `DECODE_BLOCK` positions built once, as GOAT does."""
        if (
            isinstance(pos, range)
            and len(pos) == 1
            and not torch.is_grad_enabled()
            and not torch.compiler.is_compiling()
        ):
            first = pos.start - pos.start % DECODE_BLOCK
            key = (first, dtype, device)
            if self._decode_block is None or self._decode_block[0] != key:
                block = range(first, first + DECODE_BLOCK)
                self._decode_block = (key, self._compute_key_tail(block, dtype, device))
            row = pos.start - first
            return self._decode_block[1][row : row + 1]
        return self._compute_key_tail(pos, dtype, device)

    def _compute_key_tail(self, pos: Positions, dtype: torch.dtype, device: torch.device) -> Tensor:
        _, gain = self._slot_gain.get(dtype) or _slot_and_gain(self.head_dim, dtype)
        u = (self.key_bias64(pos, device) / gain).t()  # (Lk, H) float64
        hi = u.to(dtype)
        lo = (u - hi.double()).to(dtype)  # what dtype(u) lost (goat.py, numerics)
        return torch.stack([hi, lo], dim=-1)  # (Lk, H, 2)

    def extra_repr(self) -> str:
        return f"heads={self.num_heads}, head_dim={self.head_dim}, content_dim={self.content_dim}"
