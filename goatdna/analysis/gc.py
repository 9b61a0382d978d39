"""GC% statistics of generated continuations against the reference continuation.

The question these numbers answer: does a model that continues a 200-nt prompt reproduce the
*composition* of the genome there (isochores, CpG islands), not just its per-base likelihood?
Every function works on plain strings or token arrays and knows nothing of models, so the
metrics can be checked on hand-made sequences.

Conventions (they matter when comparing with other tools):
- GC fraction is ``(G + C) / (A + C + G + T)``, case-insensitive; N and other ambiguity codes are
  removed from both counts. This equals Biopython's ``Bio.SeqUtils.gc_fraction(seq)`` (its default
  ``ambiguous="remove"``) on A/C/G/T/N sequences, including 0.0 for a sequence without bases.
- A GC *trajectory* is the GC fraction of every 25-nt window, sliding by 1 nt.
- Pearson r of two trajectories is undefined (NaN) when either is constant (e.g. an all-AT
  continuation); undefined values are excluded from means and counted, never silently set to 0.
- k-mer spectra skip k-mers that contain N; Jensen-Shannon divergence uses log base 2, so it lies
  in [0, 1] (0 for identical spectra).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from goatdna.data_prep import kmers
from goatdna.errors import GoatDNAError
from goatdna.io.tokens import BYTE_LUT, INVALID, NUM_BASES, TOKEN_MASK, C, G

TRAJECTORY_WINDOW = 25
KMER_SIZES = (1, 2, 3, 4, 5, 6)

_GC_TOKENS = (C, G)


def as_tokens(seq: str | np.ndarray) -> np.ndarray:
    """Sequence string (any case, IUPAC codes -> N) or token bytes -> plain tokens 0..4 (uint8)."""
    if isinstance(seq, str):
        raw = np.frombuffer(seq.encode("ascii", errors="replace"), dtype=np.uint8)
        tokens = BYTE_LUT[raw]
        if (tokens == INVALID).any():
            pos = int(np.flatnonzero(tokens == INVALID)[0])
            raise GoatDNAError(
                f"not a nucleotide sequence: {seq[pos]!r} at position {pos + 1} (1-based)"
            )
        return tokens & TOKEN_MASK
    return np.asarray(seq, dtype=np.uint8) & TOKEN_MASK


def gc_fraction(seq: str | np.ndarray) -> float:
    """(G+C)/(A+C+G+T), N removed; 0.0 when there is no A/C/G/T (Biopython's convention)."""
    tokens = as_tokens(seq)
    gc = int(np.isin(tokens, _GC_TOKENS).sum())
    bases = int((tokens < NUM_BASES).sum())
    return gc / bases if bases else 0.0


def gc_trajectory(seq: str | np.ndarray, window: int = TRAJECTORY_WINDOW) -> np.ndarray:
    """GC fraction of each ``window``-nt window sliding by 1: shape (len - window + 1,).

    A window without any A/C/G/T gives NaN. A sequence shorter than the window gives an empty array.
    """
    if window < 1:
        raise GoatDNAError(f"GC trajectory window must be >= 1, got {window}")
    tokens = as_tokens(seq)
    if tokens.size < window:
        return np.zeros(0, dtype=np.float64)
    is_gc = np.isin(tokens, _GC_TOKENS).astype(np.int64)
    is_base = (tokens < NUM_BASES).astype(np.int64)
    gc_sum = np.convolve(is_gc, np.ones(window, dtype=np.int64), mode="valid")  # (len-window+1,)
    base_sum = np.convolve(is_base, np.ones(window, dtype=np.int64), mode="valid")
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(base_sum > 0, gc_sum / np.maximum(base_sum, 1), np.nan)


def pearson_or_nan(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson r, or NaN when it is undefined (fewer than 2 points, a constant input, NaNs)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"trajectories differ in length: {x.shape} vs {y.shape}")
    if x.size < 2 or not (np.isfinite(x).all() and np.isfinite(y).all()):
        return math.nan
    dx = x - x.mean()
    dy = y - y.mean()
    sxx = float(dx @ dx)
    syy = float(dy @ dy)
    # A trajectory of equal values has zero variance up to rounding of its mean.
    scale = max(float(np.abs(x).max()), float(np.abs(y).max()), 1.0)
    tiny = (1e-12 * scale) ** 2 * x.size
    if sxx <= tiny or syy <= tiny:
        return math.nan
    r = float(dx @ dy) / math.sqrt(sxx * syy)
    return max(-1.0, min(1.0, r))


def base_accuracy(generated: str | np.ndarray, reference: str | np.ndarray) -> float:
    """Fraction of positions where the generated base equals the reference base (case-insensitive)."""
    g = as_tokens(generated)
    r = as_tokens(reference)
    if g.size != r.size:
        raise ValueError(f"sequences differ in length: {g.size} vs {r.size}")
    if g.size == 0:
        return math.nan
    return float((g == r).mean())


def kmer_counts(seqs: Iterable[str | np.ndarray], k: int) -> np.ndarray:
    """Counts of the 4^k k-mers (index = base-4 number, A=0..T=3) over all sequences, N skipped."""
    if not 1 <= k <= 12:
        raise ValueError(f"k must be in 1..12, got {k}")
    counts = np.zeros(NUM_BASES**k, dtype=np.int64)
    for seq in seqs:
        counts += kmers.kmer_counts(as_tokens(seq), k)
    return counts


def js_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon divergence (bits, in [0, 1]) of two count or probability vectors."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if p.shape != q.shape:
        raise ValueError(f"spectra differ in shape: {p.shape} vs {q.shape}")
    if p.sum() <= 0 or q.sum() <= 0:
        return math.nan
    p = p / p.sum()
    q = q / q.sum()
    m = 0.5 * (p + q)

    def kl(a: np.ndarray, b: np.ndarray) -> float:
        nz = a > 0
        return float(np.sum(a[nz] * np.log2(a[nz] / b[nz])))

    return max(0.0, 0.5 * kl(p, m) + 0.5 * kl(q, m))


def kmer_js_divergences(
    generated: Sequence[str | np.ndarray],
    reference: Sequence[str | np.ndarray],
    ks: Iterable[int] = KMER_SIZES,
) -> dict[int, float]:
    """JS divergence between the k-mer spectra of two sets of sequences, for each k."""
    return {k: js_divergence(kmer_counts(generated, k), kmer_counts(reference, k)) for k in ks}


@dataclass(frozen=True)
class SampleStats:
    """The per-sample numbers of the GC study (one generated continuation vs its reference)."""

    gc_reference: float
    gc_continuation: float
    gc_traj_pearson: float  # NaN when undefined (a constant trajectory)
    base_accuracy: float


def sample_stats(
    continuation: str | np.ndarray,
    reference: str | np.ndarray,
    window: int = TRAJECTORY_WINDOW,
) -> SampleStats:
    """GC of both sequences, Pearson r of their sliding-window GC trajectories, base accuracy."""
    return SampleStats(
        gc_reference=gc_fraction(reference),
        gc_continuation=gc_fraction(continuation),
        gc_traj_pearson=pearson_or_nan(
            gc_trajectory(continuation, window), gc_trajectory(reference, window)
        ),
        base_accuracy=base_accuracy(continuation, reference),
    )


@dataclass(frozen=True)
class ModelGCSummary:
    """Per-model aggregate of the GC study."""

    n_samples: int
    gc_mae: float
    gc_rmse: float
    gc_pearson: float  # mean over samples where r is defined
    pearson_defined: int
    pearson_undefined: int
    base_accuracy: float
    kmer_js: dict[int, float] = field(default_factory=dict)
    # 95% percentile bootstrap intervals over the continuations (`goatdna.metrics`, seed 0)
    gc_mae_low: float = math.nan
    gc_mae_high: float = math.nan
    gc_rmse_low: float = math.nan
    gc_rmse_high: float = math.nan
    gc_pearson_low: float = math.nan
    gc_pearson_high: float = math.nan
    base_accuracy_low: float = math.nan
    base_accuracy_high: float = math.nan


def summarize_samples(
    stats: Sequence[SampleStats],
    continuations: Sequence[str | np.ndarray],
    references: Sequence[str | np.ndarray],
    ks: Iterable[int] = KMER_SIZES,
) -> ModelGCSummary:
    """MAE/RMSE of GC fraction, mean defined Pearson r (with the exclusion count), mean accuracy,
    and k-mer JS divergences between the generated set and the reference set.

    The means carry 95% percentile bootstrap intervals over the continuations (RMSE: the square
    root of the interval of the mean squared error; Pearson r: over the samples where it is
    defined), so a GC difference between two models can be read against its noise."""
    from goatdna.metrics import percentile_interval, resampled_ratios

    def interval(values: np.ndarray) -> tuple[float, float]:
        return percentile_interval(resampled_ratios(values, np.ones(values.size)))

    if not stats:
        raise GoatDNAError("GC study: no samples to summarize")
    gc_err = np.array([s.gc_continuation - s.gc_reference for s in stats], dtype=np.float64)
    rs = np.array([s.gc_traj_pearson for s in stats], dtype=np.float64)
    defined = np.isfinite(rs)
    accuracy = np.array([s.base_accuracy for s in stats], dtype=np.float64)
    mae = interval(np.abs(gc_err))
    mse = interval(gc_err**2)
    pearson = interval(rs[defined]) if defined.any() else (math.nan, math.nan)
    acc = interval(accuracy)
    return ModelGCSummary(
        n_samples=len(stats),
        gc_mae=float(np.abs(gc_err).mean()),
        gc_rmse=float(np.sqrt((gc_err**2).mean())),
        gc_pearson=float(rs[defined].mean()) if defined.any() else math.nan,
        pearson_defined=int(defined.sum()),
        pearson_undefined=int((~defined).sum()),
        base_accuracy=float(accuracy.mean()),
        kmer_js=kmer_js_divergences(continuations, references, ks),
        gc_mae_low=mae[0],
        gc_mae_high=mae[1],
        gc_rmse_low=math.sqrt(mse[0]),
        gc_rmse_high=math.sqrt(mse[1]),
        gc_pearson_low=pearson[0],
        gc_pearson_high=pearson[1],
        base_accuracy_low=acc[0],
        base_accuracy_high=acc[1],
    )
