"""In-silico mutagenesis: every position of a region x its 3 alternative bases, two ways.

Both methods fill an array ``(n positions, 2 strands, 4 bases)`` (bases in A C G T order, the
reference base's entry 0, NaN where the reference is N or a strand has no value). With
``F = W // 2`` (``W`` the window) and ``c`` the contig (0-based):

``full`` -- the exact LLR of `goatdna score-variants` for the SNV ``c[p] -> b``:

    s_b = c[p-F : p] + b + c[p+1 : p+1+F]          (clipped at the contig ends)
    full_fwd(p, b) = LL(s_b) - LL(s_ref)           full_rev: the same on reverse complements

  All four sequences of a position share their left flank ``c[p-F : p]`` (their reverse
  complements share ``rc(c[p+1 : p+1+F])``), so ``s_ref`` runs once, filling the flank's KV
  cache, and the three suffixes ``b + right`` of the ALTs run on copies of it in one batch:
  about 2.5 windows per position and strand, where scoring the three alleles one by one costs
  4.5 (shared prefix per allele, as `score-variants` does) or 6 (two full windows each).
  ``LL(s_b) - LL(s_ref)`` sums over the suffix positions only: the flank's own log-probabilities
  are identical in both and cancel, as they do in `score-variants`.

  What is shared with `goatdna.inference.pair_scoring` (score-variants' pair scoring), and why
  the rest stays here. The padding (`pair_scoring.padded`), the pass without a shared prefix
  (`pair_scoring.sequence_ll`) and the prefix pass that fills the KV cache
  (`pair_scoring.prefix_pass`) are the same code. The suffix pass is not, because routing the
  scan through `pair_scoring.score_pairs` would change its numbers (and a ``--resume`` mixes
  units scored before and after a change, so they must not move): (1) three ALT suffixes run on
  copies of one prefix cache, where a `Pair` has one ``y`` written over its ``x`` (three pairs a
  position would run ``s_ref`` three times: 4.5 windows instead of 2.5); (2) the LLR sums the
  suffix log-probabilities only, where `score_pairs` returns whole LLs (prefix + suffix) whose
  difference rounds differently in the last bits (hence the 1e-5 tolerance between the two in
  tests/test_inference_mutagenesis.py); (3) groups are cut by ``batch_size`` in prefix-length
  order, and further only where a pass would pass the memory bound (below), where `score_pairs`
  cuts by its own pair sizes: another cut changes which rows share a pass and the batch's shared
  length, so where the cancelled flank sum ends.

  Memory. A ``full`` pass of ``k`` groups whose longest sequence has ``L`` tokens holds about
  `pass_bytes`: ``4 k L`` positions of `memory.position_bytes` (the prefix rows' KV cache lives
  on while the ``3k`` suffix rows run on their own copies) plus the suffix's ``(3k, heads,
  queries, keys)`` attention scores. A ``batch_size`` batch whose estimate is within
  `memory.MEMORY_BOUND_BYTES` runs in one pass, exactly as before the bound existed, and its
  numbers do not move (on the default 18 x 768 model: W <= 215 at batch size 64; the small test
  models' runs). A batch past it runs as consecutive passes of fewer groups, with the suffix queries in blocks (`plan_pass`): the same LLRs to float
  rounding (about 1e-6), not bit for bit, since a cut moves which rows share a pass, the shared
  prefix length and the matrix shapes. A window whose single group cannot fit even so is refused
  before any work (`check_full_window`).

``local`` -- an approximation: only the changed base's own probability, from one causal pass:

    local_fwd(p, b) = log p(b | ctx_fwd(p)) - log p(c[p] | ctx_fwd(p))

  where the region ``[a, e)`` is cut into chunks of ``S = W - F`` positions and position ``p`` of
  chunk ``k`` (``a + kS <= p < a + (k+1)S``) is predicted from ``ctx_fwd(p) = c[max(0, a-F+kS) :
  p]``: one forward pass per chunk scores all its positions, each with ``F`` to ``W - 1`` bases
  of left context. The reverse strand mirrors it: ``ctx_rev(p) = rc(c[p+1 : a+(k+1)S+F])``
  (clipped at the contig end), target ``comp(c[p])`` and alternative ``comp(b)``. The work is
  O(region), not O(region x window); the effect of the change on the bases after it is ignored,
  so ``local`` is a fast screen, not the variant score. The contig's first base has no forward
  value and its last base no reverse value.

Strands combine as in `score-variants`: ``both`` averages the forward and reverse values
(``local`` takes the one strand that has a value where only one has), ``forward`` keeps the
forward value. Every log-probability comes from `goatdna.model.scoring.target_log_probs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from goatdna.configfile import COUNT, bounded, check_bounds
from goatdna.errors import GoatDNAError
from goatdna.inference import memory
from goatdna.inference.pair_scoring import padded, prefix_pass, sequence_ll
from goatdna.inference.variants import STRANDS
from goatdna.io.tokens import COMPLEMENT, NUM_BASES, reverse_complement

if TYPE_CHECKING:  # torch is imported where the model runs, not when this module loads
    import torch

    from goatdna.model.config import ModelConfig
    from goatdna.model.transformer import DNADecoder

METHODS = ("full", "local")
BASES = "ACGT"


@dataclass(frozen=True)
class MutagenesisOptions:
    """How a region is scanned: window ``W`` (flank ``F = W // 2``), method and strands."""

    window: int
    method: str = "full"
    strands: str = "both"
    batch_size: int = bounded(
        64, COUNT
    )  # full: positions (one strand each) per pass; local: windows per pass

    def __post_init__(self) -> None:
        check_bounds(self, GoatDNAError)
        if self.window < 2:
            raise GoatDNAError(f"--window {self.window}: must be >= 2 (W // 2 bases of context)")
        if self.method not in METHODS:
            raise GoatDNAError(f"--method {self.method!r}: expected 'full' or 'local'")
        if self.strands not in STRANDS:
            raise GoatDNAError(f"--strands {self.strands!r}: expected 'both' or 'forward'")

    @property
    def flank(self) -> int:
        return self.window // 2

    @property
    def stride(self) -> int:
        """``local``: positions per chunk, S = W - F (so a chunk's window holds <= W bases)."""
        return self.window - self.flank


# ---------------------------------------------------------------------------------------------
# full: four sequences per position on one shared prefix


@dataclass(frozen=True)
class PositionGroup:
    """The four sequences ``prefix + b + tail`` of one position on one strand.

    Row ``i`` holds forward base ``i`` (A C G T), which reads as comp(i) on the reverse strand,
    so a group's rows are in A C G T order on both; ``ref`` is the reference's row.
    """

    prefix: np.ndarray
    tail: np.ndarray
    ref: int
    strand: int  # 0 forward, 1 reverse complement

    def row(self, base: int, skip: int = 0) -> np.ndarray:
        """Sequence ``base`` without its first ``skip`` prefix tokens."""
        letter = base if self.strand == 0 else int(COMPLEMENT[base])
        return np.concatenate([self.prefix[skip:], [letter], self.tail]).astype(np.uint8)

    @property
    def alternatives(self) -> list[int]:
        return [b for b in range(NUM_BASES) if b != self.ref]


def position_groups(contig: np.ndarray, p: int, flank: int, strands: str) -> list[PositionGroup]:
    """The forward group of position ``p`` and, for ``both``, the reverse-complement one."""
    left = contig[max(0, p - flank) : p]
    right = contig[p + 1 : p + 1 + flank]
    ref = int(contig[p])
    groups = [PositionGroup(left, right, ref, 0)]
    if strands == "both":
        groups.append(PositionGroup(reverse_complement(right), reverse_complement(left), ref, 1))
    return groups


def pass_bytes(config: ModelConfig, groups: int, length: int, queries: int) -> int:
    """Estimated float32 bytes of one ``full`` pass over ``groups`` groups whose longest sequence
    has ``length`` tokens, the suffix queries run ``queries`` at a time.

    Four rows a group of up to ``length`` positions at `memory.position_bytes` each (KV cache plus
    one layer's activations: the prefix row's cache is still held while its three suffix rows run
    on copies of it; a group without a shared prefix runs four whole rows), plus the suffix pass's
    float32 attention scores, (3 rows, heads, queries, up to ``length`` keys) a group. The same
    kind of estimate `pair_scoring` and score-track cut by: for bounding passes, not for
    predicting RSS.
    """
    rows = 4 * groups * length * memory.position_bytes(config)
    return rows + 4 * 3 * groups * config.n_heads * queries * length


def plan_pass(config: ModelConfig, groups: int, length: int) -> tuple[int, int | None]:
    """How a batch of ``groups`` groups (longest sequence ``length``) runs -> (groups per pass,
    suffix queries per block, None for all in one block).

    Within `memory.MEMORY_BOUND_BYTES` (by `pass_bytes`, all queries at once): the whole batch
    in one pass, as before the bound (byte-identical numbers). Past it: as many groups as fit in
    half the bound (at least one), and query blocks that fill the rest, each at most
    `memory.ATTENTION_BLOCK_BYTES` (at least one query).
    """
    bound = memory.MEMORY_BOUND_BYTES
    queries = max(1, length - 1)  # the suffix never runs more queries than its length - 1
    if pass_bytes(config, groups, length, queries) <= bound:
        return groups, None
    per_group = pass_bytes(config, 1, length, 0)
    fit = max(1, min(groups, bound // (2 * per_group)))
    per_query = pass_bytes(config, fit, length, 1) - pass_bytes(config, fit, length, 0)
    room = min(bound - pass_bytes(config, fit, length, 0), memory.ATTENTION_BLOCK_BYTES)
    return fit, max(1, min(queries, room // per_query))


def check_full_window(window: int, config: ModelConfig) -> None:
    """One ``error:`` line, before any work, for a ``full`` window whose single group (four
    sequences of up to ``W + 1`` bases, one query at a time) would not fit
    `memory.MEMORY_BOUND_BYTES`: no ``--batch-size`` can help it."""
    need = pass_bytes(config, 1, window + 1, 1)
    if need > memory.MEMORY_BOUND_BYTES:
        raise GoatDNAError(
            f"--window {window}: --method full holds about {need / 2**30:,.1f} GiB for one "
            f"position (four sequences of up to {window + 1:,} bases and their KV cache) even at "
            f"--batch-size 1, above the {memory.MEMORY_BOUND_BYTES // 2**30} GiB bound "
            "(docs/mutagenesis.md); use a smaller --window, or --method local"
        )


def score_groups(model: DNADecoder, groups: Sequence[PositionGroup], batch_size: int) -> np.ndarray:
    """``LL(s_b) - LL(s_ref)`` of every group's four rows -> (len(groups), 4) float64 (0 at REF).

    Groups are batched in a fixed order (by prefix length), ``batch_size`` a batch, so the
    numbers depend only on the list, ``batch_size`` and the memory bound, never on what else
    runs. A batch past the bound runs as smaller passes with suffix query blocks (`plan_pass`).
    """
    import torch

    out = np.zeros((len(groups), 4), dtype=np.float64)
    order = sorted(range(len(groups)), key=lambda i: (groups[i].prefix.size, i))
    device = next(model.parameters()).device
    with torch.inference_mode():
        for b in range(0, len(order), batch_size):
            batch_rows = order[b : b + batch_size]
            length = max(groups[i].prefix.size + 1 + groups[i].tail.size for i in batch_rows)
            fit, block = plan_pass(model.config, len(batch_rows), length)
            for c in range(0, len(batch_rows), fit):
                rows = batch_rows[c : c + fit]
                batch = [groups[i] for i in rows]
                shared = min(g.prefix.size for g in batch)
                if shared >= 1:
                    out[rows] = _score_on_prefix(model, batch, shared, device, block)
                else:
                    out[rows] = _score_whole(model, batch, device)
    return out


def _score_whole(
    model: DNADecoder, batch: Sequence[PositionGroup], device: torch.device
) -> np.ndarray:
    """No shared prefix (a position at a contig end): LL of the four full sequences."""
    seqs = [g.row(b) for g in batch for b in range(NUM_BASES)]
    ll = sequence_ll(model, seqs, device).reshape(len(batch), 4)  # (4B,) -> (B, 4)
    refs = np.array([g.ref for g in batch])
    return ll - ll[np.arange(len(batch)), refs][:, None]


def _score_on_prefix(
    model: DNADecoder,
    batch: Sequence[PositionGroup],
    shared: int,
    device: torch.device,
    block: int | None = None,
) -> np.ndarray:
    """s_ref in one causal pass that also fills the KV cache of the shared prefix, then the
    three alternatives' suffixes (3B rows) on copies of that prefix's cache, their queries in one
    block (``block`` None) or ``block`` at a time (a pass past the memory bound, `plan_pass`).

    The prefix pass is `pair_scoring.prefix_pass`; the suffix pass differs from
    `pair_scoring`'s (three suffixes per prefix, suffix-only sums: see the module docstring), so
    the prefix and ``s_ref`` run once for three alleles: per position and strand one window plus
    three half windows.
    """
    import torch

    from goatdna.model.scoring import target_log_probs

    n = len(batch)
    x, x_logits, cache = prefix_pass(model, [g.row(g.ref) for g in batch], shared, 0, device)
    ll_ref = target_log_probs(x_logits, x[:, 1:])[:, shared - 1 :].double().sum(dim=1)  # (B,)
    suffixes = [g.row(b, shared) for g in batch for b in g.alternatives]  # 3B rows
    length = max(s.size for s in suffixes)  # >= 1: every row holds its base
    targets = torch.from_numpy(padded(suffixes, length)).to(device)  # (3B, Ls)
    logits = x_logits[:, shared - 1 : shared].repeat_interleave(3, dim=0)  # predicts the base
    if length > 1:
        grown = model.new_cache(3 * n, shared + length - 1)
        grown.keys[:, :, :, :shared] = cache.keys[:, :, :, :shared].repeat_interleave(3, dim=1)
        grown.values[:, :, :, :shared] = cache.values[:, :, :, :shared].repeat_interleave(3, 1)
        grown.length = shared
        inputs = targets[:, :-1]
        step = inputs.shape[1] if block is None else block
        pieces = [logits]
        for q in range(0, inputs.shape[1], step):  # (3B, <= step, V) each
            pieces.append(model.forward_cached(inputs[:, q : q + step], grown))
        logits = torch.cat(pieces, dim=1)  # (3B, Ls, V)
    ll_alt = target_log_probs(logits, targets).double().sum(dim=1).view(n, 3)
    llr = (ll_alt - ll_ref[:, None]).cpu().numpy()
    out = np.zeros((n, 4))
    for i, g in enumerate(batch):
        out[i, g.alternatives] = llr[i]
    return out


def full_scores(
    model: DNADecoder, contig: np.ndarray, positions: range, options: MutagenesisOptions
) -> np.ndarray:
    """``full`` LLRs of ``positions`` of ``contig`` (tokens) -> (n, 2, 4) float64 (see above)."""
    scores = np.full((len(positions), 2, 4), np.nan)
    groups: list[PositionGroup] = []
    owners: list[int] = []  # row of each group
    for row, p in enumerate(positions):
        if contig[p] >= NUM_BASES:
            continue  # an N has no alternative bases
        for group in position_groups(contig, p, options.flank, options.strands):
            groups.append(group)
            owners.append(row)
    if groups:
        llr = score_groups(model, groups, options.batch_size)
        for row, group, values in zip(owners, groups, llr, strict=True):
            scores[row, group.strand] = values
    return scores


# ---------------------------------------------------------------------------------------------
# local: one causal pass per chunk and strand


def local_chunks(region_start: int, positions: range, stride: int) -> list[range]:
    """The chunks ``[a + kS, a + (k+1)S)`` of the region grid that hold ``positions``."""
    first = (positions.start - region_start) // stride
    last = (positions.stop - 1 - region_start) // stride
    return [
        range(region_start + k * stride, region_start + (k + 1) * stride)
        for k in range(first, last + 1)
    ]


def local_scores(
    model: DNADecoder,
    contig: np.ndarray,
    region_start: int,
    positions: range,
    options: MutagenesisOptions,
) -> np.ndarray:
    """``local`` LLRs of ``positions`` (a run of the region starting at ``region_start``) ->
    (n, 2, 4) float64 (see the module docstring for the chunk grid and contexts)."""
    import torch

    from goatdna.model.scoring import target_log_probs

    F, S = options.flank, options.stride
    # per window: its tokens, and for each scored position its logit index (strand-specific)
    windows: list[tuple[np.ndarray, int, range, int]] = []  # (tokens, strand, chunk, offset)
    for chunk in local_chunks(region_start, positions, S):
        start = max(0, chunk.start - F)
        windows.append((contig[start : chunk.stop], 0, chunk, start))
        if options.strands == "both":
            end = min(contig.size, chunk.stop + F)
            windows.append((reverse_complement(contig[chunk.start : end]), 1, chunk, end))
    logp = np.full((len(positions), 2, 4), np.nan)
    device = next(model.parameters()).device
    order = sorted(range(len(windows)), key=lambda i: (windows[i][0].size, i))
    with torch.inference_mode():
        for b in range(0, len(order), options.batch_size):
            rows = [windows[i] for i in order[b : b + options.batch_size]]
            length = max(w[0].size for w in rows)
            if length < 2:
                continue
            tokens = torch.from_numpy(padded([w[0] for w in rows], length)).to(device)
            logits = model(tokens[:, :-1])  # (B, L - 1, V): index j predicts token j + 1
            per_base = torch.stack(
                [
                    target_log_probs(logits, torch.full_like(tokens[:, 1:], base))
                    for base in range(NUM_BASES)
                ],
                dim=-1,
            )  # (B, L - 1, 4)
            values = per_base.double().cpu().numpy()
            for (seq, strand, _chunk, anchor), value in zip(rows, values, strict=True):
                _place(logp, value, seq.size, strand, anchor, positions, _chunk)
    ref = contig[positions.start : positions.stop]
    known = ref < NUM_BASES
    scores = np.full_like(logp, np.nan)
    safe = np.where(known, ref, 0).astype(np.int64)
    own = np.take_along_axis(logp, safe[:, None, None].repeat(2, axis=1), axis=2)  # (n, 2, 1)
    scores[known] = (logp - own)[known]
    return scores


def _place(logp: np.ndarray, value: np.ndarray, size: int, strand: int, anchor: int,
           positions: range, chunk: range) -> None:  # fmt: skip
    """Copy one window's per-base log-probabilities (size - 1, 4) to the rows of ``positions``.

    Forward (``anchor`` = window start): position p is predicted by logit ``p - anchor - 1``.
    Reverse (``anchor`` = window end, exclusive): p is rc token ``anchor - 1 - p``, predicted
    by logit ``anchor - 2 - p``, and base b reads as comp(b).
    """
    lo, hi = max(chunk.start, positions.start), min(chunk.stop, positions.stop)
    p = np.arange(lo, hi)
    index = p - anchor - 1 if strand == 0 else anchor - 2 - p
    ok = (index >= 0) & (index < size - 1)
    p, index = p[ok], index[ok]
    block = value[index]  # (m, 4) in the strand's own letters
    if strand == 1:
        block = block[:, COMPLEMENT[:NUM_BASES]]  # column b: log p(comp(b))
    logp[p - positions.start, strand] = block


def combine(scores: np.ndarray, options: MutagenesisOptions) -> np.ndarray:
    """(n, 2, 4) per-strand values -> (n, 4): the strands' mean (``both``) or the forward one.

    ``full`` averages both strands as `score-variants` does; ``local`` takes the strand that has
    a value where the other has none (the contig's first and last bases).
    """
    if options.strands == "forward":
        return scores[:, 0].copy()
    if options.method == "full":
        return scores.mean(axis=1)
    import warnings

    with warnings.catch_warnings():  # all-NaN rows (N bases) stay NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(scores, axis=1)


def scan(
    model: DNADecoder,
    contig: np.ndarray,
    region_start: int,
    positions: range,
    options: MutagenesisOptions,
) -> np.ndarray:
    """The (n, 2, 4) per-strand values of ``positions`` by ``options.method``."""
    if options.method == "full":
        return full_scores(model, contig, positions, options)
    return local_scores(model, contig, region_start, positions, options)
