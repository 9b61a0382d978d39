"""Embeddings of DNA sequences: hidden states of a chosen layer, pooled per sequence or per base.

A sequence longer than ``max_length`` (M) is cut into consecutive chunks of M bases (the last one
shorter); each chunk is one independent forward pass at positions 0..len-1, so memory is bounded
by M and the batch size, never by the sequence length. Pooling:

* ``mean``: the average over every position of every chunk (sum of all vectors / length);
* ``last``: the vector at the last position of the last chunk;
* ``none``: one vector per base, the chunks' outputs concatenated.

``strands="both"`` also embeds the reverse complement and averages: pooled vectors directly, and
per-base vectors aligned so that base i of the forward strand meets the reverse-complement
position of the same base (``rc[L - 1 - i]``).

The layer is a 1-based block index (block L's output, before the next block); ``None`` is the
final norm's output, the vector the head reads.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from goatdna.configfile import COUNT, bounded, check_bounds
from goatdna.errors import GoatDNAError
from goatdna.io.records import SequenceRecord
from goatdna.io.tokens import TOKEN_MASK, encode, reverse_complement

if TYPE_CHECKING:  # torch is imported where the model runs, not when this module loads
    from torch import Tensor

    from goatdna.model import DNADecoder

Pool = Literal["mean", "last", "none"]
Strands = Literal["forward", "both"]
POOLS = ("mean", "last", "none")
STRANDS = ("forward", "both")
GOAT_LENGTH_FACTOR = 4  # GOAT extrapolates: default M = 4x the training length


@dataclass(frozen=True)
class EmbedOptions:
    """What to embed and how; ``max_length`` None means the model's default (see below)."""

    layer: int | None = bounded(None, COUNT)  # 1-based block (at most the model's)
    pool: Pool = "mean"
    strands: Strands = "forward"
    max_length: int | None = bounded(None, COUNT)
    batch_size: int = bounded(8, COUNT)

    def validate(self, n_layers: int) -> None:
        check_bounds(self, GoatDNAError)
        if self.layer is not None and not 1 <= self.layer <= n_layers:
            raise GoatDNAError(
                f"--layer {self.layer}: the model has {n_layers} block(s); choose 1..{n_layers} "
                "(or omit --layer for the final norm's output)"
            )
        if self.pool not in POOLS:
            raise GoatDNAError(f"--pool {self.pool!r}: choose one of {', '.join(POOLS)}")
        if self.strands not in STRANDS:
            raise GoatDNAError(f"--strands {self.strands!r}: choose one of {', '.join(STRANDS)}")


def default_max_length(config: dict[str, Any]) -> int:
    """4x the training length for GOAT (it extrapolates), the training length for RoPE."""
    data = config.get("data") or {}
    seq_len = data.get("seq_len") if isinstance(data, dict) else None
    train_length = seq_len if isinstance(seq_len, int) else int(config["model"]["train_length"])
    factor = GOAT_LENGTH_FACTOR if config["model"]["positional"] == "goat" else 1
    return factor * train_length


def tokens_of(sequence: str, what: str) -> np.ndarray:
    """A sequence string -> plain tokens; empty or non-nucleotide input names the record."""
    text = "".join(sequence.split())
    if not text:
        raise GoatDNAError(f"{what}: empty sequence; every record needs at least one base")
    try:
        return encode(text) & TOKEN_MASK
    except GoatDNAError as err:
        raise GoatDNAError(f"{what}: {err}") from None


def chunk_spans(length: int, max_length: int) -> list[tuple[int, int]]:
    """Consecutive [start, end) chunks of at most ``max_length`` covering ``range(length)``."""
    return [(s, min(s + max_length, length)) for s in range(0, length, max_length)]


class LayerReader:
    """Runs the model up to the chosen layer: tokens (B, L) -> hidden states (B, L, d_model).

    ``layer`` k is `DNADecoder.hidden` with ``layers=k`` (block k's output, not normed); None is
    the full trunk, final norm included.
    """

    def __init__(self, model: DNADecoder, layer: int | None) -> None:
        self.model = model
        self.layer = layer

    def __call__(self, tokens: Tensor) -> Tensor:
        import torch

        with torch.inference_mode():
            return self.model.hidden(tokens, layers=self.layer).float()


@dataclass
class _Accumulator:
    """Per-sequence running result while its chunks come back in any order."""

    length: int
    pool: str
    total: np.ndarray | None = None  # mean: float64 sum (d,); none: (L, d) float32; last: (d,)

    def add(self, start: int, hidden: np.ndarray, is_last_chunk: bool) -> None:
        if self.pool == "mean":
            part = hidden.sum(axis=0, dtype=np.float64)
            self.total = part if self.total is None else self.total + part
        elif self.pool == "last":
            if is_last_chunk:
                self.total = hidden[-1].astype(np.float32)
        else:
            if self.total is None:
                self.total = np.empty((self.length, hidden.shape[1]), dtype=np.float32)
            self.total[start : start + hidden.shape[0]] = hidden

    def result(self) -> np.ndarray:
        assert self.total is not None, "every sequence has a last chunk (empty ones are refused)"
        if self.pool == "mean":
            return (self.total / self.length).astype(np.float32)
        return self.total


def _jobs(
    token_lists: Sequence[np.ndarray], max_length: int
) -> Iterator[tuple[int, int, int, bool]]:
    """(sequence index, chunk start, chunk end, is last chunk) for every chunk, in order."""
    for i, tokens in enumerate(token_lists):
        spans = chunk_spans(len(tokens), max_length)
        for j, (start, end) in enumerate(spans):
            yield i, start, end, j == len(spans) - 1


def embed_token_lists(
    model: DNADecoder,
    token_lists: Sequence[np.ndarray],
    layer: int | None,
    pool: str,
    max_length: int,
    batch_size: int,
) -> list[np.ndarray]:
    """One strand: each sequence's pooled (d,) or per-base (L, d) float32 embedding, in order.

    Chunks of equal length are batched together (at most ``batch_size`` per forward pass).
    """
    import torch

    device = model.embed.weight.device
    reader = LayerReader(model, layer)
    accumulators = [_Accumulator(len(t), pool) for t in token_lists]
    buckets: dict[int, list[tuple[int, int, int, bool]]] = {}

    def flush(jobs: list[tuple[int, int, int, bool]]) -> None:
        batch = np.stack([token_lists[i][s:e] for i, s, e, _ in jobs]).astype(np.int64)  # (B, L)
        hidden = reader(torch.from_numpy(batch).to(device)).cpu().numpy()  # (B, L, d)
        for (i, s, _e, last), h in zip(jobs, hidden, strict=True):
            accumulators[i].add(s, h, last)

    for job in _jobs(token_lists, max_length):
        bucket = buckets.setdefault(job[2] - job[1], [])
        bucket.append(job)
        if len(bucket) == batch_size:
            flush(bucket)
            buckets[job[2] - job[1]] = []
    for bucket in buckets.values():
        if bucket:
            flush(bucket)
    return [acc.result() for acc in accumulators]


def embed_records(
    model: DNADecoder, records: Sequence[SequenceRecord], options: EmbedOptions, max_length: int
) -> list[np.ndarray]:
    """Embeddings of ``records`` (both strands averaged when asked), in input order."""
    options.validate(model.n_layers)
    tokens = [r.tokens for r in records]
    was_training = model.training
    model.eval()
    try:
        forward = embed_token_lists(
            model, tokens, options.layer, options.pool, max_length, options.batch_size
        )
        if options.strands == "forward":
            return forward
        rc_tokens = [reverse_complement(t) for t in tokens]
        reverse = embed_token_lists(
            model, rc_tokens, options.layer, options.pool, max_length, options.batch_size
        )
    finally:
        if was_training:
            model.train()
    if options.pool == "none":
        return [(f + r[::-1]) / 2 for f, r in zip(forward, reverse, strict=True)]
    return [(f + r) / 2 for f, r in zip(forward, reverse, strict=True)]


def embed(
    model: DNADecoder,
    sequences: Sequence[str],
    *,
    config: dict[str, Any] | None = None,
    layer: int | None = None,
    pool: Pool = "mean",
    strands: Strands = "forward",
    max_length: int | None = None,
    batch_size: int = 8,
) -> np.ndarray | list[np.ndarray]:
    """Python API: embeddings of DNA strings as numpy.

    Pooled output is one (n, d_model) float32 array; ``pool="none"`` gives a list of (L_i,
    d_model) arrays. ``max_length`` defaults to the model's default (needs ``config``, the dict
    `load_checkpoint` returns; else the model's training length x 4 for GOAT, x 1 for RoPE).
    """
    options = EmbedOptions(layer, pool, strands, max_length, batch_size)
    records = [
        SequenceRecord(str(i + 1), tokens_of(s, f"sequence {i + 1}"))
        for i, s in enumerate(sequences)
    ]
    if not records:
        raise GoatDNAError("no sequences given")
    if max_length is None:
        config = config or {"model": {"positional": model.config.positional,
                                      "train_length": model.config.train_length}}  # fmt: skip
        max_length = default_max_length(config)
    result = embed_records(model, records, options, max_length)
    return result if pool == "none" else np.stack(result)
