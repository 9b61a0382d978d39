"""The memory budget of a forward pass: one bound and one per-position estimate for every command.

Why one home: the ``--window`` bound of score-variants and mutagenesis (`check_window`), the batch
cuts and attention blocks of the shared-prefix pair scoring (`pair_scoring`) and of mutagenesis's
``full`` passes (`mutagenesis.pass_bytes`), score-track's longest window, attribute's rows per pass
and check-precision's refusal all promise the same thing, that no single pass asks for more than
`MEMORY_BOUND_BYTES`, and they must measure a position the same way (`position_bytes`) for the
promise to be one promise. The numbers are float32 estimates (allocator slack ignored) used to cut
work into passes and to refuse a request up front with one ``error:`` line, not to predict a
process's resident memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from goatdna.errors import GoatDNAError

if TYPE_CHECKING:
    from goatdna.model.config import ModelConfig

MEMORY_BOUND_BYTES = 8 * 2**30
"""What one forward pass may hold in KV cache and activations (float32, by `position_bytes`)."""

ATTENTION_BLOCK_BYTES = 2**30
"""The largest (rows, heads, queries, keys) float32 attention-score block a pass may ask for."""


def position_bytes(config: ModelConfig) -> int:
    """Float32 bytes one sequence position costs in a pass: its KV cache over every layer plus the
    widest activations of one layer (SwiGLU's three hidden-width tensors, a few model-width ones).

    An estimate (it ignores allocator slack), used to keep passes bounded, not to predict RSS.
    """
    return 4 * (2 * config.n_layers * config.d_model + 3 * config.mlp_hidden + 4 * config.d_model)


def max_window(config: ModelConfig) -> int:
    """The largest ``--window`` W: one allele pair (sequences of up to 2W positions: W flank
    bases plus an allele of up to W) must fit `MEMORY_BOUND_BYTES` alone."""
    return int(MEMORY_BOUND_BYTES // (2 * position_bytes(config)))


def check_window(window: int, config: ModelConfig) -> None:
    """One ``error:`` line for a window beyond `max_window` (before anything is read)."""
    bound = max_window(config)
    if window > bound:
        raise GoatDNAError(
            f"--window {window}: above this model's bound of {bound:,} bases (one allele pair "
            f"must fit {MEMORY_BOUND_BYTES // 2**30} GiB of KV cache and activations, "
            "see docs/variants.md); use a smaller --window, or score-track for long contexts"
        )
