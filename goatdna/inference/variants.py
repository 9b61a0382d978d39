"""Zero-shot variant effects: the log-likelihood ratio of each ALT allele against the reference.

The score, for a variant at 1-based ``POS`` with alleles ``REF``,
``ALT`` on contig ``c`` and ``F = W // 2``:

    left  = c[POS-1-F : POS-1]                                   (0-based, clipped, uppercased)
    right = c[POS-1+len(REF) : POS-1+len(REF)+F]
    d     = |len(ALT) - len(REF)|
    more_right = c[POS-1+len(REF)+F : POS-1+len(REF)+F+d]       (read after the alleles: forward)
    more_left  = c[POS-1-F-d : POS-1-F]                         (read after them: reverse strand)
    forward:  s_ref = left + REF + right [+ more_right if REF is the shorter allele]
              s_alt = left + ALT + right [+ more_right if ALT is the shorter allele]
    reverse:  rc([more_left if REF is shorter] + left + REF + right), and the same for ALT
    LL(s) = sum_{t>=1, s_t != N} log p(s_t | s_<t)             (each s scored from position 0)
    llr_fwd = LL(s_alt) - LL(s_ref);  llr_rev = the same on the reverse-strand sequences
    llr = (llr_fwd + llr_rev) / 2      (llr_fwd alone with strands="forward")

Length-fair windows (the default, ``length_fair=True``): for an indel the shorter allele's
sequence is extended by ``d`` reference bases on the side read *after* the alleles (the right
flank on the forward strand, the left flank on the reverse strand), so both sequences of a
strand have the same number of scored positions and share the flank read first. Without it
(``length_fair=False``, `score-variants --length-unfair`, the definition before length-fair windows)
``more_right``/``more_left`` are empty: LL then sums over ``len(ALT) - len(REF)`` more
predictions for ALT, about 1.3 nats per extra base for a model of human DNA (a 10 kbp deletion
scored +14,003), so deletions score high and insertions low in proportion to their length. SNVs and equal-length substitutions are scored the same either
way.

The extension is ``d`` scored bases, not ``d`` positions: N (never a target) adds no
prediction, so an extension that meets an N run reaches past it until it holds ``d`` A/C/G/T
bases (`fair_extension`). Where the contig ends first, that strand cannot be made fair and is
not scored: near a contig's last base only the reverse strand is scored, near its first base
only the forward strand (also with ``strands="forward"``, which then scores the reverse strand),
and the output's ``scored_strands`` says which. An indel with neither (a contig shorter than
the window plus ``d``) has status ``no_fair_window``; a length-biased number is never ``ok``.

Limits: an allele longer than ``W`` is not scored (status ``too_long``), and ``W`` may not exceed
`goatdna.inference.memory.max_window` of the model (a memory bound, see there).

This module says which sequences an allele's score compares (statuses, windows, length-fair
extensions, strands) and turns the log-likelihoods back into per-allele numbers; the model runs
in `goatdna.inference.pair_scoring`. Why shared prefixes: ``s_ref`` and ``s_alt`` agree on
``left`` (and on the alleles' common leading bases), and a causal model's log-probabilities there
are identical, so the shared part is run once to fill the KV cache and only the two differing
suffixes are run on top of it (`pair_scoring.score_pairs`). The reverse strand shares
``rc(right)`` the same way. ``shared_prefix=False`` scores two full windows instead (the
reference the benchmark compares against).

Every per-position log-probability comes from `goatdna.model.scoring.target_log_probs`, the
primitive that also defines the training and evaluation losses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from goatdna.configfile import COUNT, bounded, check_bounds
from goatdna.errors import GoatDNAError
from goatdna.inference.pair_scoring import Pair, score_pairs
from goatdna.inference.reference import Reference
from goatdna.io.tokens import encode, reverse_complement

if TYPE_CHECKING:  # torch is imported where the model runs, not when this module loads
    from goatdna.model.transformer import DNADecoder

STATUSES = (
    "ok",
    "symbolic",
    "ref_mismatch",
    "missing_contig",
    "non_acgt_allele",
    "identical",
    "too_long",
    "outside_contig",
    "no_fair_window",
)
"""Every output row has one: ``ok`` (scored) or why the allele was not scored."""

STATUS_MEANING = {
    "ok": "scored",
    "symbolic": "symbolic ALT (<DEL>, <INS:ME:ALU>, <CN0>, *, breakend): no sequence to score",
    "ref_mismatch": "REF differs from the FASTA at POS (wrong assembly or coordinates?)",
    "missing_contig": "the FASTA has no contig of that name",
    "non_acgt_allele": "REF or ALT holds a base other than A, C, G, T",
    "identical": "ALT equals REF",
    "too_long": "REF or ALT is longer than the window W (--window): not scored",
    "outside_contig": "POS (with REF's length) is past the contig's end: check the coordinates",
    "no_fair_window": "indel whose shorter allele cannot be extended to a length-fair window on "
    "either strand (contig ends): not scored (--length-unfair scores it)",
}

STRANDS = ("both", "forward")

_ACGT = frozenset("ACGT")


@dataclass(frozen=True)
class Allele:
    """One ALT allele of one VCF record (multi-allelic records give one Allele per ALT)."""

    record: int  # 0-based index of the VCF record
    chrom: str
    pos: int  # 1-based, as in the VCF
    id: str
    ref: str  # as written in the VCF
    alt: str


@dataclass(frozen=True)
class VariantOptions:
    """How alleles are scored. ``window`` W gives flanks of F = W // 2 bases on each side."""

    window: int
    strands: str = "both"
    batch_size: int = bounded(64, COUNT)  # allele pairs (one strand each) per forward pass
    shared_prefix: bool = True
    length_fair: bool = True  # equal scored positions for both alleles of an indel

    def __post_init__(self) -> None:
        check_bounds(self, GoatDNAError)
        if self.window < 2:
            raise GoatDNAError(
                f"--window {self.window}: must be >= 2 (W // 2 bases of context on each side)"
            )
        if self.strands not in STRANDS:
            raise GoatDNAError(f"--strands {self.strands!r}: expected 'both' or 'forward'")

    @property
    def flank(self) -> int:
        return self.window // 2


def is_symbolic(alt: str) -> bool:
    """``<DEL>``, ``<INS:ME:ALU>``, ``<CN0>``, ``*`` (spanning deletion), breakends, missing ``.``."""
    return (
        alt.startswith("<")
        or alt in ("*", ".", "")
        or "[" in alt
        or "]" in alt
        or alt.startswith(".")
        or alt.endswith(".")
    )


def allele_status(
    allele: Allele, reference: Reference, window: int | None = None, length_fair: bool = False
) -> str:
    """The status of one allele (``ok`` or why it is not scored).

    ``window``: W of the run; an allele longer than W is ``too_long`` (None: no length check).
    ``length_fair``: an indel that no strand can score length-fairly is ``no_fair_window``.
    """
    if is_symbolic(allele.alt):
        return "symbolic"
    if not reference.has(allele.chrom):
        return "missing_contig"
    ref, alt = allele.ref.upper(), allele.alt.upper()
    if not (set(ref) <= _ACGT and set(alt) <= _ACGT and ref and alt):
        return "non_acgt_allele"
    start = allele.pos - 1
    if start < 0 or start + len(ref) > reference.length(allele.chrom):
        return "outside_contig"
    fasta = reference.fetch(allele.chrom, start, start + len(ref))
    if not np.array_equal(fasta, encode_allele(ref)):
        return "ref_mismatch"
    if ref == alt:
        return "identical"
    if window is not None and max(len(ref), len(alt)) > window:
        return "too_long"
    if window is not None and length_fair and len(ref) != len(alt):
        fair = allele_window(allele, reference, window // 2, length_fair=True)
        if not (fair.fair_forward or fair.fair_reverse):
            return "no_fair_window"
    return "ok"


def encode_allele(bases: str) -> np.ndarray:
    """Allele text -> plain tokens (uint8), uppercased; a letter that is not a base is N.

    `allele_status` lets only A/C/G/T alleles through, so the N mapping is never reached there.
    """
    return encode(bases.upper(), unknown="N")


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


_EMPTY = np.zeros(0, dtype=np.uint8)


@dataclass(frozen=True)
class AlleleWindow:
    """The two sequences of one allele on the forward strand and where they sit on the contig."""

    left: np.ndarray
    ref: np.ndarray
    alt: np.ndarray
    right: np.ndarray
    window_start: int  # 0-based start of s_ref on the contig
    window_end: int  # 0-based exclusive end of s_ref
    common_prefix: int  # leading bases REF and ALT share
    common_suffix: int  # trailing bases they share (not overlapping the prefix)
    # Length-fair extensions of the shorter allele (empty for SNVs and with length_fair=False):
    # the d bases before ``left`` (read last on the reverse strand) and after ``right`` (forward).
    more_left: np.ndarray = field(default_factory=lambda: _EMPTY)
    more_right: np.ndarray = field(default_factory=lambda: _EMPTY)
    # whether each strand's two sequences score the same number of positions (always for SNVs
    # and plain windows; False where the contig ends before the extension's d scored bases)
    fair_forward: bool = True
    fair_reverse: bool = True

    def strands_to_score(self, strands: str) -> tuple[int, ...]:
        """0 (forward) and/or 1 (reverse): the requested strands that are fair, or with
        ``strands="forward"`` the reverse strand where only it can be made fair."""
        if strands == "both":
            return tuple(s for s, fair in ((0, self.fair_forward), (1, self.fair_reverse)) if fair)
        if self.fair_forward:
            return (0,)
        return (1,) if self.fair_reverse else ()

    def _extension(self, more: np.ndarray, allele: np.ndarray) -> np.ndarray:
        """``more`` for the shorter allele, nothing for the longer one (or an SNV)."""
        return more if allele.size < max(self.ref.size, self.alt.size) else _EMPTY

    def forward(self, allele: np.ndarray) -> np.ndarray:
        """left + allele + right (+ the extension when ``allele`` is the shorter one)."""
        return np.concatenate(
            [self.left, allele, self.right, self._extension(self.more_right, allele)]
        )

    def reverse(self, allele: np.ndarray) -> np.ndarray:
        """The reverse-strand sequence: rc((extension +) left + allele + right)."""
        return reverse_complement(
            np.concatenate([self._extension(self.more_left, allele), self.left, allele, self.right])
        )

    @property
    def s_ref(self) -> np.ndarray:
        return self.forward(self.ref)

    @property
    def s_alt(self) -> np.ndarray:
        return self.forward(self.alt)

    def span(self, strands: str) -> tuple[int, int]:
        """The 0-based half-open span of contig bases that the scored sequences read."""
        scored = self.strands_to_score(strands)
        start = self.window_start - (self.more_left.size if 1 in scored else 0)
        return start, self.window_end + (self.more_right.size if 0 in scored else 0)


def fair_extension(contig: np.ndarray, edge: int, step: int, d: int) -> np.ndarray | None:
    """The contig bases beyond ``edge`` (0-based) that hold exactly ``d`` A/C/G/T bases, ending on
    the d-th (N runs inside are kept: they are read but add no prediction), in contig order;
    ``step`` +1 reads rightwards from ``edge``, -1 leftwards from ``edge - 1``. None where the
    contig ends before ``d`` such bases."""
    span = max(4 * d, 256)
    while True:
        piece = contig[edge : edge + span] if step > 0 else contig[max(0, edge - span) : edge][::-1]
        found = np.flatnonzero(piece < 4)
        if found.size >= d:
            taken = piece[: found[d - 1] + 1]
            return taken if step > 0 else taken[::-1]
        if piece.size < span:  # the contig ended within this read
            return None
        span *= 4


def allele_window(
    allele: Allele, reference: Reference, flank: int, length_fair: bool = True
) -> AlleleWindow:
    """Flanks of ``flank`` bases clipped at the contig ends (the score's definition), and for an
    indel with ``length_fair`` the ``d`` bases beyond each flank that extend the shorter allele."""
    ref, alt = allele.ref.upper(), allele.alt.upper()
    start = allele.pos - 1
    end = start + len(ref)
    left = reference.fetch(allele.chrom, start - flank, start)
    right = reference.fetch(allele.chrom, end, end + flank)
    prefix = _common_prefix(ref, alt)
    suffix = _common_prefix(ref[prefix:][::-1], alt[prefix:][::-1])
    more_left = more_right = _EMPTY
    d = abs(len(alt) - len(ref))
    fair_forward = fair_reverse = True
    if length_fair and d:
        contig = reference.contig_tokens(allele.chrom)
        found_left = fair_extension(contig, start - left.size, -1, d)
        found_right = fair_extension(contig, end + right.size, +1, d)
        fair_reverse, fair_forward = found_left is not None, found_right is not None
        more_left = _EMPTY if found_left is None else found_left
        more_right = _EMPTY if found_right is None else found_right
    return AlleleWindow(
        left=left,
        ref=encode_allele(ref),
        alt=encode_allele(alt),
        right=right,
        window_start=start - left.size,
        window_end=end + right.size,
        common_prefix=prefix,
        common_suffix=suffix,
        more_left=more_left,
        more_right=more_right,
        fair_forward=fair_forward,
        fair_reverse=fair_reverse,
    )


def strand_pairs(window: AlleleWindow, strands: str) -> list[tuple[int, Pair]]:
    """(strand, (s_ref, s_alt)): 0 the forward strand, 1 the reverse complement, for the strands
    `AlleleWindow.strands_to_score` keeps."""
    pairs = []
    for strand in window.strands_to_score(strands):
        if strand == 0:
            forward = Pair(window.s_ref, window.s_alt, window.left.size + window.common_prefix)
            pairs.append((0, forward))
        else:
            reverse = Pair(window.reverse(window.ref), window.reverse(window.alt),
                           window.right.size + window.common_suffix)  # fmt: skip
            pairs.append((1, reverse))
    return pairs


SCORE_FIELDS = ("ll_ref_fwd", "ll_alt_fwd", "ll_ref_rev", "ll_alt_rev")
"""What is stored per allele while scoring (NaN where not scored)."""


def score_alleles(
    model: DNADecoder,
    alleles: Sequence[Allele],
    statuses: Sequence[str],
    reference: Reference,
    options: VariantOptions,
) -> tuple[np.ndarray, np.ndarray]:
    """Score the ``ok`` alleles -> (scores (n, 4) float64 in `SCORE_FIELDS` order, windows (n, 2)).

    Rows of alleles that are not ``ok`` hold NaN scores and window -1.
    """
    scores = np.full((len(alleles), 4), np.nan)
    windows = np.full((len(alleles), 2), -1, dtype=np.int64)
    pairs: list[Pair] = []
    owners: list[tuple[int, int]] = []  # (allele row, strand 0/1)
    for row, (allele, status) in enumerate(zip(alleles, statuses, strict=True)):
        if status != "ok":
            continue
        window = allele_window(allele, reference, options.flank, options.length_fair)
        windows[row] = window.span(options.strands)
        for strand, pair in strand_pairs(window, options.strands):
            pairs.append(pair)
            owners.append((row, strand))
    if pairs:
        ll = score_pairs(model, pairs, options.batch_size, options.shared_prefix)
        for (row, strand), (ll_ref, ll_alt) in zip(owners, ll, strict=True):
            scores[row, 2 * strand] = ll_ref
            scores[row, 2 * strand + 1] = ll_alt
    return scores, windows


def combine_strands(scores: np.ndarray, strands: str) -> dict[str, np.ndarray]:
    """Per-allele output numbers from the stored log-likelihoods.

    ``ll_ref``/``ll_alt`` are LL(s_ref)/LL(s_alt) averaged over the strands each allele was
    scored on (NaN where a strand was not: ``llr_rev`` with ``strands="forward"``, and the strand
    a length-fair indel at a contig end could not use), so ``llr = ll_alt - ll_ref`` (up to
    rounding). ``strands`` is kept for callers; the stored NaNs already say what was scored.
    """
    del strands
    llr_fwd = scores[:, 1] - scores[:, 0]
    llr_rev = scores[:, 3] - scores[:, 2]
    pairs = scores.reshape(-1, 2, 2)  # (n, strand, ref/alt)
    scored = ~np.isnan(pairs[:, :, 0])  # (n, strand)
    count = scored.sum(axis=1)
    safe = np.where(count > 0, count, 1)

    def mean(values: np.ndarray) -> np.ndarray:  # over the scored strands; NaN where none
        total = np.where(scored, values, 0.0).sum(axis=1) / safe
        return np.where(count > 0, total, np.nan)

    ll_ref, ll_alt = mean(pairs[:, :, 0]), mean(pairs[:, :, 1])
    llr = mean(np.stack([llr_fwd, llr_rev], axis=1))
    return {"llr": llr, "llr_fwd": llr_fwd, "llr_rev": llr_rev, "ll_ref": ll_ref, "ll_alt": ll_alt}
