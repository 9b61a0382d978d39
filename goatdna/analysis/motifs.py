"""Motifs from attributions: TF-MoDISco (modisco-lite) over `goatdna attribute` output.

The input is an `attribute` ``.npz`` (``hypothetical`` (N, L, 4) and ``sequences``) or a
`goatdna mutagenesis` matrix ``.npz`` (``scores`` (L, 4) and ``ref``, one region). TF-MoDISco
reads, per sequence, the one-hot ``x`` and the *hypothetical* contributions ``h`` (what each
base would contribute were it there); the actual contribution is ``h * x``. For ISM (either
file) ``h`` is the effect matrix centred per position (NaN at N read as 0).

modisco-lite finds seqlets (windows of high contribution, on both strands), clusters them into
patterns and returns positive patterns (bases that raise the output) and negative ones. Each
pattern here keeps its PWM (the seqlets' base frequencies, ``ppm``), its mean contribution and
its seqlets (sequence, start, end, strand). `best_match` scores a pattern against a known PWM:
the best Pearson correlation of aligned columns over every offset and both orientations.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from goatdna.configfile import COUNT, COUNT_OR_ZERO, bounded, check_bounds
from goatdna.errors import GoatDNAError

BASES = "ACGT"
OUTPUT_FILES = frozenset({"motifs.meme", "seqlets.tsv", "motifs.html"})
"""What `goatdna motifs` writes in its ``--out`` folder: ``--force`` replaces a folder of these
only (`goatdna.workdir.claim_output_folder`)."""
MIN_SEQLETS_CLUSTERED = 2
"""modisco-lite clusters seqlets by their neighbours: one seqlet has none, and its clustering
step then fails (``max() arg is an empty sequence``), so ``--max-seqlets`` starts at 2."""


@dataclass(frozen=True)
class MotifOptions:
    """modisco-lite's settings that depend on sequence length.

    The defaults suit sequences of ~50-500 bases and motifs of ~6-12 (modisco-lite's own, window
    21, flank 10, trim 30, suit 1 kb inputs); seqlets are ``window + 2 * flank`` wide."""

    window: int = bounded(9, COUNT)
    """Sliding window that scores seqlet candidates (modisco's ``sliding_window_size``)."""
    flank: int = bounded(3, COUNT_OR_ZERO)
    """Bases added on each side of a seqlet (``flank_size``)."""
    trim: int = bounded(14, COUNT)
    """Width patterns are trimmed to (``trim_to_window_size``)."""
    min_seqlets: int = bounded(20, COUNT)
    """Fewest seqlets a pattern may have (``final_min_cluster_size``)."""
    max_seqlets: int = bounded(20000, COUNT)
    """Seqlets used per sign (``max_seqlets_per_metacluster``)."""
    min_metacluster: int = bounded(50, COUNT)
    """Fewest seqlets of one sign worth clustering (``min_metacluster_size``)."""
    leiden_runs: int = bounded(50, COUNT)
    """Leiden clusterings per round, the best kept (``n_leiden_runs``; fewer is faster)."""

    def __post_init__(self) -> None:
        check_bounds(self, GoatDNAError)
        if self.max_seqlets < MIN_SEQLETS_CLUSTERED:
            raise GoatDNAError(
                f"--max-seqlets {self.max_seqlets}: TF-MoDISco clusters seqlets by their "
                f"neighbours and needs at least {MIN_SEQLETS_CLUSTERED}; raise --max-seqlets"
            )
        if self.trim > self.seqlet_width:
            raise GoatDNAError(
                f"--trim {self.trim}: patterns are trimmed within seqlets of --window "
                f"{self.window} + 2 x --flank {self.flank} = {self.seqlet_width} bases; lower "
                f"--trim to at most {self.seqlet_width} (or raise --window/--flank)"
            )

    @property
    def seqlet_width(self) -> int:
        """A seqlet's width in bases: the scoring window and a flank on each side."""
        return self.window + 2 * self.flank


@dataclass(frozen=True)
class AttributionSet:
    """What TF-MoDISco reads: one-hot and hypothetical contributions (N, L, 4), and names."""

    one_hot: np.ndarray
    hypothetical: np.ndarray
    names: list[str]
    source: Path


@dataclass(frozen=True)
class Seqlet:
    """One occurrence of a pattern: 0-based [start, end) in sequence ``index``, its strand."""

    index: int
    start: int
    end: int
    strand: str


@dataclass(frozen=True)
class Pattern:
    """One TF-MoDISco pattern: ``pos_i`` (raises the output) or ``neg_i`` (lowers it)."""

    name: str
    ppm: np.ndarray  # (w, 4) base frequencies of its seqlets
    contribution: np.ndarray  # (w, 4) mean contribution
    hypothetical: np.ndarray  # (w, 4) mean hypothetical contribution
    seqlets: list[Seqlet]


def _one_hot(sequences: Sequence[str], width: int) -> np.ndarray:
    out = np.zeros((len(sequences), width, 4), dtype=np.float32)
    lookup = {b: i for i, b in enumerate(BASES)}
    for i, seq in enumerate(sequences):
        for p, letter in enumerate(seq.upper()[:width]):
            if letter in lookup:
                out[i, p, lookup[letter]] = 1.0
    return out


def read_attributions(path: str | Path, option: str = "--attributions") -> AttributionSet:
    """An `attribute` .npz or a `mutagenesis` matrix .npz; anything else is one error line."""
    path = Path(path)
    if not path.is_file():
        raise GoatDNAError(
            f"{option} {path}: no such file; pass the .npz `goatdna attribute` wrote"
        )
    try:
        data = dict(np.load(path, allow_pickle=False))
    except Exception as err:  # a foreign or truncated file: say which
        raise GoatDNAError(
            f"{option} {path}: not a readable .npz ({err.__class__.__name__})"
        ) from None
    where = f"{option} {path}"
    if {"hypothetical", "sequences"} <= data.keys():
        hypothetical = _numbers(data, "hypothetical", where, ndim=3).astype(np.float32)
        sequences = _strings(data, "sequences", where, ndim=1)
        names = (
            _strings(data, "names", where, ndim=1)
            if "names" in data
            else [str(i + 1) for i in range(len(sequences))]
        )
        if hypothetical.shape[0] != len(sequences) or hypothetical.shape[2] != 4:
            raise GoatDNAError(
                f"{where}: hypothetical has shape {hypothetical.shape}, not (N, L, 4) with N = "
                f"{len(sequences)} sequences"
            )
        if len(names) != len(sequences):
            raise GoatDNAError(
                f"{where}: names holds {len(names)} names for {len(sequences)} sequences"
            )
    elif {"scores", "ref"} <= data.keys():  # mutagenesis --out x.npz: one region's (L, 4)
        scores = _numbers(data, "scores", where, ndim=2).astype(np.float64)
        sequences = _strings(data, "ref", where, ndim=0)
        if scores.shape != (len(sequences[0]), 4):
            raise GoatDNAError(
                f"{where}: scores has shape {scores.shape}, not (L, 4) with L = "
                f"{len(sequences[0])} bases of ref"
            )
        scores = np.nan_to_num(scores)
        hypothetical = (scores - scores.mean(axis=1, keepdims=True))[None].astype(np.float32)
        start = int(_numbers(data, "start", where, ndim=0)) if "start" in data else 0
        chrom = _strings(data, "chrom", where, ndim=0)[0] if "chrom" in data else "region"
        names = [f"{chrom}:{start + 1}-{start + len(sequences[0])}"]
    else:
        missing = [k for k in ("hypothetical", "sequences") if k not in data]
        raise GoatDNAError(
            f"{where}: holds neither `goatdna attribute` arrays (hypothetical, "
            f"sequences; missing {', '.join(missing)}) nor a `goatdna mutagenesis` matrix "
            "(scores, ref)"
        )
    if hypothetical.shape[0] == 0 or hypothetical.shape[1] == 0:
        raise GoatDNAError(f"{where}: holds no bases (hypothetical has shape {hypothetical.shape})")
    hypothetical = np.nan_to_num(hypothetical)
    return AttributionSet(_one_hot(sequences, hypothetical.shape[1]), hypothetical, names, path)


def _numbers(data: dict[str, np.ndarray], key: str, where: str, ndim: int) -> np.ndarray:
    """Array ``key`` of an attributions file, checked to be numbers of ``ndim`` dimensions."""
    values = data[key]
    if values.dtype.kind not in "biuf" or values.ndim != ndim:
        raise GoatDNAError(
            f"{where}: {key} is a {values.ndim}-d {values.dtype} array, not {ndim}-d numbers; "
            "pass the .npz `goatdna attribute` or `goatdna mutagenesis` wrote"
        )
    return values


def _strings(data: dict[str, np.ndarray], key: str, where: str, ndim: int) -> list[str]:
    """Array ``key`` of an attributions file as strings (a 0-d one as a list of one)."""
    values = data[key]
    if values.dtype.kind not in "US" or values.ndim != ndim:
        raise GoatDNAError(
            f"{where}: {key} is a {values.ndim}-d {values.dtype} array, not {ndim}-d text; "
            "pass the .npz `goatdna attribute` or `goatdna mutagenesis` wrote"
        )
    return [str(v) for v in values.reshape(-1)]


def discover(attributions: AttributionSet, options: MotifOptions) -> list[Pattern]:
    """modisco-lite's positive and negative patterns (``pos_0``, ``pos_1``, ..., ``neg_0``, ...)."""
    from modiscolite.tfmodisco import TFMoDISco

    width = attributions.one_hot.shape[1]
    if width < options.window + 2 * options.flank:
        raise GoatDNAError(
            f"{attributions.source}: sequences of {width} bases are shorter than --window "
            f"{options.window} plus twice --flank {options.flank}; lower them"
        )
    if not _scorable(attributions, options):
        return []
    pos, neg = TFMoDISco(
        one_hot=attributions.one_hot,
        hypothetical_contribs=attributions.hypothetical,
        sliding_window_size=options.window,
        flank_size=options.flank,
        trim_to_window_size=options.trim,
        initial_flank_to_add=options.flank,
        final_min_cluster_size=options.min_seqlets,
        min_metacluster_size=options.min_metacluster,
        max_seqlets_per_metacluster=options.max_seqlets,
        n_leiden_runs=options.leiden_runs,
        verbose=False,
    )
    patterns = []
    for sign, found in (("pos", pos), ("neg", neg)):
        for k, pattern in enumerate(found or []):
            seqlets = [
                Seqlet(int(s.example_idx), int(s.start), int(s.end), "-" if s.is_revcomp else "+")
                for s in pattern.seqlets
            ]
            patterns.append(
                Pattern(
                    f"{sign}_{k}",
                    np.asarray(pattern.sequence, dtype=np.float64),
                    np.asarray(pattern.contrib_scores, dtype=np.float64),
                    np.asarray(pattern.hypothetical_contribs, dtype=np.float64),
                    seqlets,
                )
            )
    return patterns


def _scorable(attributions: AttributionSet, options: MotifOptions) -> bool:
    """Whether modisco-lite can set seqlet thresholds on these contributions; False (with a
    note) when every contribution is the same, as in all-zero attributions: no seqlet stands out
    of them, and modisco-lite's null estimate fails on them (an IndexError). Contributions whose
    ``--window`` sums are all of one sign are refused in one line: modisco-lite fits each sign's
    threshold against that sign's windows, and with none of one sign its fit fails (sklearn's
    "Sample weights must contain at least one non-zero number")."""
    contributions = (attributions.one_hot * attributions.hypothetical).sum(axis=2)
    if np.ptp(contributions) == 0:
        value = float(contributions.flat[0])
        print(
            f"note: {attributions.source}: every contribution is the same ({value:g}): no "
            "seqlet stands out, so there is no pattern",
            file=sys.stderr,
        )
        return False
    # the windows modisco-lite scores: sums of --window consecutive contributions
    summed = np.cumsum(contributions, axis=1, dtype=np.float64)
    windows = (
        summed[:, options.window - 1 :] - np.pad(summed, ((0, 0), (1, 0)))[:, : -options.window]
    )
    for missing, has_none in (("negative", windows.min() >= 0), ("positive", windows.max() < 0)):
        if has_none:
            raise GoatDNAError(
                f"{attributions.source}: none is {missing} among the contributions summed over "
                f"--window {options.window} bases; TF-MoDISco sets its seqlet thresholds from "
                "windows of both signs and cannot run on these: pass attributions of both signs "
                "(e.g. `goatdna attribute --method saliency`)"
            )
    return True


def best_match(ppm: np.ndarray, pwm: np.ndarray) -> tuple[float, int, str]:
    """(Pearson, offset, strand) of the best alignment of ``pwm`` (k, 4) within ``ppm`` (w, 4):
    every offset at which the shorter lies wholly inside the longer, ``pwm`` as given or
    reverse-complemented (both axes flipped); the correlation is over the aligned cells."""
    best = (-1.0, 0, "+")
    for strand, motif in (("+", pwm), ("-", pwm[::-1, ::-1])):
        short, long_ = (motif, ppm) if len(motif) <= len(ppm) else (ppm, motif)
        for offset in range(len(long_) - len(short) + 1):
            a = long_[offset : offset + len(short)].ravel()
            b = short.ravel()
            if a.std() == 0 or b.std() == 0:
                continue
            r = float(np.corrcoef(a, b)[0, 1])
            if r > best[0]:
                best = (r, offset, strand)
    return best
