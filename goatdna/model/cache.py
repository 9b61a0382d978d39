"""KV cache for incremental decoding: prefill a prompt, then one token at a time.

Keys are stored exactly as the attention kernel consumes them: GOAT's packed ``k'`` (content,
``k_rel(j)``, ``u_h(j)`` at the key's true absolute position) and RoPE's rotated ``k``. A key never
changes once written, so a decoding step only computes the new token's query/key/value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor


class LayerCache(Protocol):
    """What attention needs of a KV cache: `KVCache` here, a transformers cache in `goatdna.hf`.

    ``length`` is the number of positions already cached (the next token's absolute position);
    ``write`` appends one layer's new keys/values and returns all of that layer's so far.
    """

    length: int

    def check_room(self, batch_size: int, new_tokens: int) -> None: ...

    def write(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]: ...


@dataclass
class KVCache:
    """Per-layer keys and values for positions ``0 .. length-1``.

    ``keys``/``values``: (n_layers, B, H, max_length, head_dim). ``length`` counts the tokens
    already processed; the next call to ``DNADecoder.forward_cached`` starts at that position.
    """

    keys: Tensor
    values: Tensor
    length: int = 0

    @classmethod
    def empty(
        cls,
        n_layers: int,
        batch_size: int,
        n_heads: int,
        max_length: int,
        head_dim: int,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> KVCache:
        if batch_size < 1 or max_length < 1:
            raise ValueError(
                f"KV cache needs batch_size >= 1 and max_length >= 1, got {batch_size}, {max_length}"
            )
        shape = (n_layers, batch_size, n_heads, max_length, head_dim)
        return cls(
            keys=torch.zeros(shape, device=device, dtype=dtype),
            values=torch.zeros(shape, device=device, dtype=dtype),
        )

    @property
    def batch_size(self) -> int:
        return self.keys.shape[1]

    @property
    def max_length(self) -> int:
        return self.keys.shape[3]

    def check_room(self, batch_size: int, new_tokens: int) -> None:
        """Raise a clear ValueError when ``new_tokens`` more tokens would not fit."""
        if batch_size != self.batch_size:
            raise ValueError(
                f"KV cache was made for batch size {self.batch_size}, got {batch_size}"
            )
        if self.length + new_tokens > self.max_length:
            raise ValueError(
                f"KV cache holds {self.max_length} positions; {self.length} used, "
                f"{new_tokens} more do not fit: make it with a larger max_length"
            )

    def write(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store new keys/values (B, H, L, d) at ``length..length+L-1``; return all so far."""
        end = self.length + k.shape[2]
        self.keys[layer, :, :, self.length : end] = k
        self.values[layer, :, :, self.length : end] = v
        return self.keys[layer, :, :, :end], self.values[layer, :, :, :end]  # (B, H, end, d)

    def reset(self) -> None:
        """Forget every cached token (the buffers are reused)."""
        self.length = 0
