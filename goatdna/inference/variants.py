"""Zero-shot variant effects: the log-likelihood ratio of each ALT allele against the reference.

The score (shown on the docs page docs/variants.md), for a variant at 1-based ``POS`` with alleles ``REF``,
``ALT`` on contig ``c`` and ``F = W // 2``::

    left  = c[POS-1-F : POS-1]                                   (0-based, clipped, uppercased)
    right = c[POS-1+len(REF) : POS-1+len(REF)+F]
    s_ref = left + REF + right,   s_alt = left + ALT + right    (each scored from position 0)
    LL(s) = sum_{t>=1, s_t != N} log p(s_t | s_<t)
    llr_fwd = LL(s_alt) - LL(s_ref);  llr_rev = the same on the reverse complements
    llr = (llr_fwd + llr_rev) / 2      (llr_fwd alone with strands="forward")

Why shared prefixes: ``s_ref`` and ``s_alt`` agree on ``left`` (and on the alleles' common
leading bases), and a causal model's log-probabilities there are identical, so the shared part is
run once to fill the KV cache and only the two differing suffixes are run on top of it
(`score_pairs`). The reverse strand shares ``rc(right)`` the same way. ``shared_prefix=False``
scores two full windows instead (the reference the benchmark compares against).

Every per-position log-probability comes from `goatdna.model.scoring.target_log_probs`, the
primitive that also defines the training and evaluation losses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from goatdna.data_prep.tokens import COMPLEMENT, TOKEN_TABLE, N
from goatdna.errors import GoatDNAError
from goatdna.inference.reference import Reference

if TYPE_CHECKING:  # torch is imported where the model runs, not when this module loads
    import torch

    from goatdna.model.transformer import DNADecoder

STATUSES = ("ok", "symbolic", "ref_mismatch", "missing_contig", "non_acgt_allele", "identical")
"""Every output row has one: ``ok`` (scored) or why the allele was not scored."""

STATUS_MEANING = {
    "ok": "scored",
    "symbolic": "symbolic ALT (<DEL>, <INS:ME:ALU>, <CN0>, *, breakend): no sequence to score",
    "ref_mismatch": "REF differs from the FASTA at POS (wrong assembly or coordinates?)",
    "missing_contig": "the FASTA has no contig of that name",
    "non_acgt_allele": "REF or ALT holds a base other than A, C, G, T",
    "identical": "ALT equals REF",
}

STRANDS = ("both", "forward")

_ACGT = frozenset("ACGT")
_TOKEN_OF = np.full(256, N, dtype=np.uint8)
for _letter, _token in TOKEN_TABLE.items():
    _TOKEN_OF[ord(_letter)] = _token


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
    batch_size: int = 64  # allele pairs (one strand each) per forward pass
    shared_prefix: bool = True

    def __post_init__(self) -> None:
        if self.window < 2:
            raise GoatDNAError(
                f"--window {self.window}: must be >= 2 (W // 2 bases of context on each side)"
            )
        if self.strands not in STRANDS:
            raise GoatDNAError(f"--strands {self.strands!r}: expected 'both' or 'forward'")
        if self.batch_size < 1:
            raise GoatDNAError(f"--batch-size {self.batch_size}: must be >= 1")

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


def allele_status(allele: Allele, reference: Reference) -> str:
    """The status of one allele, checked in the order of `STATUSES` after ``ok``."""
    if is_symbolic(allele.alt):
        return "symbolic"
    if not reference.has(allele.chrom):
        return "missing_contig"
    ref, alt = allele.ref.upper(), allele.alt.upper()
    if not (set(ref) <= _ACGT and set(alt) <= _ACGT and ref and alt):
        return "non_acgt_allele"
    start = allele.pos - 1
    if start < 0 or start + len(ref) > reference.length(allele.chrom):
        return "ref_mismatch"
    fasta = reference.fetch(allele.chrom, start, start + len(ref))
    if not np.array_equal(fasta, encode_allele(ref)):
        return "ref_mismatch"
    if ref == alt:
        return "identical"
    return "ok"


def encode_allele(bases: str) -> np.ndarray:
    """Uppercase A/C/G/T text -> tokens (uint8)."""
    return _TOKEN_OF[np.frombuffer(bases.upper().encode("ascii"), dtype=np.uint8)]


def reverse_complement(tokens: np.ndarray) -> np.ndarray:
    return COMPLEMENT[tokens[::-1]]


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


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

    @property
    def s_ref(self) -> np.ndarray:
        return np.concatenate([self.left, self.ref, self.right])

    @property
    def s_alt(self) -> np.ndarray:
        return np.concatenate([self.left, self.alt, self.right])


def allele_window(allele: Allele, reference: Reference, flank: int) -> AlleleWindow:
    """Flanks of ``flank`` bases clipped at the contig ends (the score's definition)."""
    ref, alt = allele.ref.upper(), allele.alt.upper()
    start = allele.pos - 1
    end = start + len(ref)
    left = reference.fetch(allele.chrom, start - flank, start)
    right = reference.fetch(allele.chrom, end, end + flank)
    prefix = _common_prefix(ref, alt)
    suffix = _common_prefix(ref[prefix:][::-1], alt[prefix:][::-1])
    return AlleleWindow(
        left=left,
        ref=encode_allele(ref),
        alt=encode_allele(alt),
        right=right,
        window_start=start - left.size,
        window_end=end + right.size,
        common_prefix=prefix,
        common_suffix=suffix,
    )


@dataclass(frozen=True)
class Pair:
    """Two sequences scored from position 0 whose first ``shared`` tokens are equal."""

    x: np.ndarray
    y: np.ndarray
    shared: int


def strand_pairs(window: AlleleWindow, strands: str) -> list[Pair]:
    """(s_ref, s_alt) on the forward strand and, for ``both``, on the reverse complement."""
    pairs = [Pair(window.s_ref, window.s_alt, window.left.size + window.common_prefix)]
    if strands == "both":
        pairs.append(
            Pair(
                reverse_complement(window.s_ref),
                reverse_complement(window.s_alt),
                window.right.size + window.common_suffix,
            )
        )
    return pairs


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
        for b in range(0, len(order), batch_size):
            rows = order[b : b + batch_size]
            batch = [pairs[i] for i in rows]
            shared = min(p.shared for p in batch)
            if shared_prefix and shared >= 1:
                ll = _score_shared(model, batch, shared, device)
            else:
                ll = _score_full(model, batch, device)
            out[rows] = ll
    return out


def _padded(seqs: Sequence[np.ndarray], length: int) -> np.ndarray:
    """Right-pad with N (never a target, and causal attention never looks right)."""
    block = np.full((len(seqs), length), N, dtype=np.int64)
    for i, s in enumerate(seqs):
        block[i, : s.size] = s
    return block


def _sequence_ll(model: DNADecoder, seqs: Sequence[np.ndarray], device: torch.device) -> np.ndarray:
    """LL of each sequence scored from position 0 (full forward pass, right-padded batch)."""
    import torch

    from goatdna.model.scoring import sequence_log_probs

    length = max(s.size for s in seqs)
    if length < 2:
        return np.zeros(len(seqs))
    tokens = torch.from_numpy(_padded(seqs, length)).to(device)  # (B, L)
    return sequence_log_probs(model, tokens).double().sum(dim=1).cpu().numpy()


def _score_full(model: DNADecoder, batch: Sequence[Pair], device: torch.device) -> np.ndarray:
    """Two full windows per pair: LL(x) and LL(y) from one forward pass over 2B rows."""
    ll = _sequence_ll(model, [p.x for p in batch] + [p.y for p in batch], device)
    return np.stack([ll[: len(batch)], ll[len(batch) :]], axis=1)


def _score_shared(
    model: DNADecoder, batch: Sequence[Pair], shared: int, device: torch.device
) -> np.ndarray:
    """x in one causal pass that also fills the KV cache; then y's suffix on the shared prefix.

    The first ``shared`` positions of the cache hold the prefix both sequences share; y's
    suffix is written over x's beyond it, so only ``len(y) - shared`` positions run twice.
    """
    import torch

    from goatdna.model.scoring import target_log_probs

    x_len = max(max(p.x.size for p in batch), shared + 1)  # >= shared + 1: see ``first`` below
    x = torch.from_numpy(_padded([p.x for p in batch], x_len)).to(device)  # (B, Lx)
    y_suffix = [p.y[shared:] for p in batch]
    y_len = max(s.size for s in y_suffix)
    cache = model.new_cache(len(batch), max(x_len - 1, shared + y_len - 1))
    x_logits = model.forward_cached(x[:, :-1], cache)  # (B, Lx-1, V)
    x_logp = target_log_probs(x_logits, x[:, 1:]).double()  # (B, Lx-1)
    ll_x = x_logp.sum(dim=1)
    ll_y = x_logp[:, : shared - 1].sum(dim=1)  # the shared prefix's own log-probabilities
    if y_len:
        targets = torch.from_numpy(_padded(y_suffix, y_len)).to(device)  # (B, Sy)
        first = x_logits[:, shared - 1 : shared]  # (B, 1, V): the prefix predicts y[shared]
        if y_len > 1:
            cache.length = shared  # x's keys beyond the prefix are overwritten, never read
            rest = model.forward_cached(targets[:, :-1], cache)
            first = torch.cat([first, rest], dim=1)  # (B, Sy, V)
        ll_y = ll_y + target_log_probs(first, targets).double().sum(dim=1)
    return torch.stack([ll_x, ll_y], dim=1).cpu().numpy()


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
        window = allele_window(allele, reference, options.flank)
        windows[row] = (window.window_start, window.window_end)
        for strand, pair in enumerate(strand_pairs(window, options.strands)):
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

    ``ll_ref``/``ll_alt`` are LL(s_ref)/LL(s_alt) averaged over the scored strands, so
    ``llr = ll_alt - ll_ref`` (up to rounding); ``llr_rev`` is NaN with ``strands="forward"``.
    """
    llr_fwd = scores[:, 1] - scores[:, 0]
    llr_rev = scores[:, 3] - scores[:, 2]
    if strands == "both":
        llr = (llr_fwd + llr_rev) / 2
        ll_ref = (scores[:, 0] + scores[:, 2]) / 2
        ll_alt = (scores[:, 1] + scores[:, 3]) / 2
    else:
        llr, ll_ref, ll_alt = llr_fwd, scores[:, 0], scores[:, 1]
        llr_rev = np.full_like(llr_fwd, np.nan)
    return {"llr": llr, "llr_fwd": llr_fwd, "llr_rev": llr_rev, "ll_ref": ll_ref, "ll_alt": ll_alt}
