"""Log-likelihoods of sequence pairs that share a prefix, with the prefix run once into a KV cache.

A pair is two sequences ``x`` and ``y`` scored from position 0 whose first ``shared`` tokens are
equal (an allele's reference and alternative windows on one strand, `variants.strand_pairs`).
A causal model's log-probabilities over the shared prefix are the same for both, so
`score_pairs` runs ``x`` once, filling the KV cache, and then only ``y``'s suffix on top of the
cached prefix: ``len(y) - shared`` positions run twice instead of ``len(y)``.
``shared_prefix=False`` scores two full sequences instead (the reference the benchmark and the
tests compare against). score-variants, the calibration null and check-precision's variant
check all score through here, so they share one definition of LL and one batching.

    LL(s) = sum_{t>=1, s_t != N} log p(s_t | s_<t)

Every per-position log-probability comes from `goatdna.model.scoring.target_log_probs`, the
primitive that also defines the training and evaluation losses. Pairs run in a fixed order
(sorted by shared length and suffix lengths), at most ``batch_size`` a pass and fewer where a
pass would exceed `goatdna.inference.memory.MEMORY_BOUND_BYTES`; ``y``'s suffix runs in blocks of
queries so that no attention-score block exceeds `ATTENTION_BLOCK_BYTES`. Both only change how
the work is cut, not the numbers (beyond float rounding).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from goatdna.inference.memory import ATTENTION_BLOCK_BYTES, MEMORY_BOUND_BYTES, position_bytes
from goatdna.io.tokens import N

if TYPE_CHECKING:  # torch is imported where the model runs, not when this module loads
    import torch

    from goatdna.model.cache import KVCache
    from goatdna.model.transformer import DNADecoder


@dataclass(frozen=True)
class Pair:
    """Two sequences scored from position 0 whose first ``shared`` tokens are equal."""

    x: np.ndarray
    y: np.ndarray
    shared: int


def score_pairs(
    model: DNADecoder, pairs: Sequence[Pair], batch_size: int, shared_prefix: bool = True
) -> np.ndarray:
    """LL(x) and LL(y) of every pair -> (len(pairs), 2) float64, in the order given.

    Pairs are batched in a fixed order (sorted by shared length and suffix lengths), so the
    numbers depend only on the list of pairs and ``batch_size``, never on what else runs.
    """
    import torch

    out = np.zeros((len(pairs), 2), dtype=np.float64)
    order = sorted(
        range(len(pairs)),
        key=lambda i: (pairs[i].shared, pairs[i].x.size, pairs[i].y.size, i),
    )
    device = next(model.parameters()).device
    with torch.inference_mode():
        for rows in _batches(order, pairs, batch_size, position_bytes(model.config)):
            batch = [pairs[i] for i in rows]
            shared = min(p.shared for p in batch)
            if shared_prefix and shared >= 1:
                ll = _score_shared(model, batch, shared, device)
            else:
                ll = _score_full(model, batch, device)
            out[rows] = ll
    return out


def _batches(
    order: Sequence[int], pairs: Sequence[Pair], batch_size: int, per_position: int
) -> list[list[int]]:
    """Consecutive runs of ``order``: at most ``batch_size`` pairs, and fewer where their longest
    sequence would take a pass past `MEMORY_BOUND_BYTES` (never fewer than one pair)."""
    batches: list[list[int]] = []
    rows: list[int] = []
    longest = 0
    for i in order:
        length = max(pairs[i].x.size, pairs[i].y.size, longest)
        if rows and (
            len(rows) == batch_size or (len(rows) + 1) * length * per_position > MEMORY_BOUND_BYTES
        ):
            batches.append(rows)
            rows, length = [], max(pairs[i].x.size, pairs[i].y.size)
        rows.append(i)
        longest = length
    if rows:
        batches.append(rows)
    return batches


def padded(seqs: Sequence[np.ndarray], length: int) -> np.ndarray:
    """Right-pad with N (never a target, and causal attention never looks right).

    Public: mutagenesis pads its batches through here too (one padding rule)."""
    block = np.full((len(seqs), length), N, dtype=np.int64)
    for i, s in enumerate(seqs):
        block[i, : s.size] = s
    return block


def sequence_ll(model: DNADecoder, seqs: Sequence[np.ndarray], device: torch.device) -> np.ndarray:
    """LL of each sequence scored from position 0 (full forward pass, right-padded batch).

    Public: mutagenesis scores its positions without a shared prefix (contig ends) here."""
    import torch

    from goatdna.model.scoring import sequence_log_probs

    length = max(s.size for s in seqs)
    if length < 2:
        return np.zeros(len(seqs))
    tokens = torch.from_numpy(padded(seqs, length)).to(device)  # (B, L)
    return sequence_log_probs(model, tokens).double().sum(dim=1).cpu().numpy()


def _score_full(model: DNADecoder, batch: Sequence[Pair], device: torch.device) -> np.ndarray:
    """Two full windows per pair: LL(x) and LL(y) from one forward pass over 2B rows."""
    ll = sequence_ll(model, [p.x for p in batch] + [p.y for p in batch], device)
    return np.stack([ll[: len(batch)], ll[len(batch) :]], axis=1)


def prefix_pass(
    model: DNADecoder,
    seqs: Sequence[np.ndarray],
    shared: int,
    min_length: int,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor, KVCache]:
    """``seqs`` (which agree on their first ``shared`` tokens) in one causal pass that also fills
    a new KV cache -> (tokens (B, Lx), logits (B, Lx-1, V), cache).

    Rows are right-padded to ``Lx >= shared + 1`` tokens, so logit ``shared - 1`` (the prefix's
    prediction of the token after it) always exists. The cache holds at least ``min_length``
    positions, room for the suffixes the caller runs on the prefix next; its size never changes
    a number (attention reads only the ``length`` positions written). Public: `score_pairs` and
    mutagenesis's ``full`` scan both start here (one prefix pass).
    """
    import torch

    x_len = max(max(s.size for s in seqs), shared + 1)
    x = torch.from_numpy(padded(seqs, x_len)).to(device)  # (B, Lx)
    cache = model.new_cache(len(seqs), max(x_len - 1, min_length))
    logits = model.forward_cached(x[:, :-1], cache)  # (B, Lx-1, V): one causal block
    return x, logits, cache


def _score_shared(
    model: DNADecoder, batch: Sequence[Pair], shared: int, device: torch.device
) -> np.ndarray:
    """x in one causal pass that also fills the KV cache; then y's suffix on the shared prefix.

    The first ``shared`` positions of the cache hold the prefix both sequences share; y's
    suffix is written over x's beyond it, so only ``len(y) - shared`` positions run twice.
    """
    import torch

    from goatdna.model.scoring import target_log_probs

    y_suffix = [p.y[shared:] for p in batch]
    y_len = max(s.size for s in y_suffix)
    x, x_logits, cache = prefix_pass(
        model, [p.x for p in batch], shared, shared + y_len - 1, device
    )
    x_logp = target_log_probs(x_logits, x[:, 1:]).double()  # (B, Lx-1)
    ll_x = x_logp.sum(dim=1)
    ll_y = x_logp[:, : shared - 1].sum(dim=1)  # the shared prefix's own log-probabilities
    if y_len:
        targets = torch.from_numpy(padded(y_suffix, y_len)).to(device)  # (B, Sy)
        first = x_logits[:, shared - 1 : shared]  # (B, 1, V): the prefix predicts y[shared]
        pieces = [first]
        if y_len > 1:
            cache.length = shared  # x's keys beyond the prefix are overwritten, never read
            # queries in blocks: a long allele never asks for a (B, H, Sy, Lk) score block
            keys = shared + y_len - 1
            block = max(1, ATTENTION_BLOCK_BYTES // (4 * len(batch) * model.config.n_heads * keys))
            inputs = targets[:, :-1]
            for b in range(0, inputs.shape[1], block):
                pieces.append(model.forward_cached(inputs[:, b : b + block], cache))
        logits = torch.cat(pieces, dim=1) if len(pieces) > 1 else first  # (B, Sy, V)
        ll_y = ll_y + target_log_probs(logits, targets).double().sum(dim=1)
    return torch.stack([ll_x, ll_y], dim=1).cpu().numpy()
