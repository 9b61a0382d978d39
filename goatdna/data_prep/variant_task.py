"""A labelled SNV set with known truth on the synthetic genome (`goatdna make-variant-task`).

The synthetic generator (`goatdna.data_prep.synthetic`) plants microsatellites: tandem copies of a
1-6 base unit, soft-masked. Inside one, the next base is fixed by the unit, so an SNV there
breaks the planted structure; an SNV in the Markov background changes one base of a sequence
with ~1.75 bits of entropy per base. A model that learned the genome scores the first kind much
lower (more negative LLR) than the second: that is the truth this task checks.

- positives (``label`` 1, ``element`` ``microsatellite``): one base of each of randomly chosen
  perfect periodic runs
  (smallest period ``unit`` of 1..6 bases, at least `MIN_RUN` bases long, soft-masked), changed
  to another base, which breaks the period;
- negatives (``label`` 0, ``element`` ``background``): a base of the unmasked background at least
  `BACKGROUND_MARGIN` bases from any soft-masked base or N, changed to another base at random;
- ``match_group``: each positive and `CONTROLS` negatives drawn within `CONTROL_RANGE` bases of
  it on the same contig (TraitGym's matched design, here matched on position);
- ``gc_band``: GC content of the 101 bases around the SNV (``low`` < 40% <= ``mid`` < 55% <=
  ``high``), a subset column; ``creates_cpg``: whether ALT makes a new CG dinucleotide.

Only positions in the last ``held_out`` fraction of each contig are drawn (by default 10%, the
validation and test stretches that `goatdna prepare` holds out of a synthetic genome), so the
models never trained on them. The same FASTA and seed give the same table on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from goatdna.configfile import COUNT, SEED, SHARE, bounded
from goatdna.io.fasta import fasta_titles, read_fasta_text
from goatdna.io.tokens import REPEAT_FLAG, TOKEN_MASK, encode

MIN_RUN = 16
MAX_UNIT = 6
BACKGROUND_MARGIN = 50
CONTROLS = 3
CONTROL_RANGE = 20_000
GC_HALF_WIDTH = 50
COLUMNS = ("chrom", "pos", "ref", "alt", "label", "element", "match_group", "gc_band")
_BASES = "ACGT"


@dataclass(frozen=True)
class VariantTaskOptions:
    positives: int = bounded(
        200, COUNT
    )  # half homopolymer breaks (fewer if the genome has fewer), half new CpGs
    held_out: float = bounded(
        0.1, SHARE
    )  # the last fraction of each contig positions are drawn from
    seed: int = bounded(0, SEED)


SYNTHETIC_HEADER = " synthetic seed="
"""What `goatdna.data_prep.synthetic` writes in every record header (``>syn1 synthetic seed=0 ...``)."""


def has_planted_truth(path: Path) -> bool:
    """Whether every record of the FASTA was written by the synthetic generator: only there do
    soft-masked runs mark planted structure, so only there are the labels a known truth."""
    headers = 0
    for title in fasta_titles(path):
        headers += 1
        if SYNTHETIC_HEADER not in title:
            return False
    return headers > 0


def periodic_positions(
    tokens: np.ndarray, masked: np.ndarray, max_unit: int = MAX_UNIT
) -> np.ndarray:
    """The smallest period (1..MAX_UNIT) of the perfect soft-masked run each base lies in, else 0.

    A base ``i`` is inside a run of period ``p`` when tokens[j] == tokens[j - p] for every j of
    a stretch of at least ``MIN_RUN - p`` consecutive positions that covers ``i`` (so the run,
    with its first unit, spans at least MIN_RUN bases); N never counts.
    """
    n = tokens.size
    unit = np.zeros(n, dtype=np.int64)
    acgt = tokens < 4
    for p in range(max_unit, 0, -1):  # smaller periods overwrite larger ones
        same = np.zeros(n, dtype=bool)
        same[p:] = (tokens[p:] == tokens[:-p]) & acgt[p:] & acgt[:-p]
        edges = np.flatnonzero(np.diff(np.r_[0, same.astype(np.int8), 0]))
        starts, ends = edges[::2], edges[1::2]
        long = ends - starts >= MIN_RUN - p
        for start, end in zip(starts[long], ends[long], strict=True):
            span = slice(start - p, end)
            unit[span] = np.where(masked[span], p, unit[span])
    return unit


def _one_per_run(unit: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One random position of each run of periodic bases (positives spread over many runs)."""
    inside = unit > 0
    edges = np.flatnonzero(np.diff(np.r_[0, inside.astype(np.int8), 0]))
    starts, ends = edges[::2], edges[1::2]
    return starts + (rng.random(starts.size) * (ends - starts)).astype(np.int64)


def _gc_band(tokens: np.ndarray, pos: int) -> list[str]:
    """``[band]`` of the 2 * GC_HALF_WIDTH + 1 bases around ``pos``."""
    piece = tokens[max(0, pos - GC_HALF_WIDTH) : pos + GC_HALF_WIDTH + 1]
    f = float(np.isin(piece, (1, 2)).mean())
    return ["low" if f < 0.40 else "mid" if f < 0.55 else "high"]


def _creates_cpg(tokens: np.ndarray, pos: int, alt: int) -> bool:
    before = tokens[pos - 1] if pos > 0 else 4
    after = tokens[pos + 1] if pos + 1 < tokens.size else 4
    return bool((before == 1 and alt == 2) or (alt == 1 and after == 2))


def _far_from(bad: np.ndarray, margin: int) -> np.ndarray:
    """Positions with no ``bad`` base within ``margin`` on either side."""
    count = np.cumsum(np.r_[0, bad.astype(np.int64)])
    n = bad.size
    i = np.arange(n)
    lo, hi = np.clip(i - margin, 0, n), np.clip(i + margin + 1, 0, n)
    return (count[hi] - count[lo]) == 0


def _cpg_effect(
    tokens: np.ndarray, pos: np.ndarray, alt: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(creates a CG, destroys a CG) for SNVs ``pos -> alt`` (vectorised)."""
    n = tokens.size
    before = np.where(pos > 0, tokens[np.maximum(pos - 1, 0)], 4)
    after = np.where(pos + 1 < n, tokens[np.minimum(pos + 1, n - 1)], 4)
    ref = tokens[pos]
    had = ((before == 1) & (ref == 2)) | ((ref == 1) & (after == 2))
    has = ((before == 1) & (alt == 2)) | ((alt == 1) & (after == 2))
    return has & ~had, had


@dataclass
class _Contig:
    index: int
    name: str
    tokens: np.ndarray
    runs: np.ndarray  # one position per planted homopolymer run (held-out part)
    background: np.ndarray  # held-out background positions, sorted


def _contigs(fasta: Path, options: VariantTaskOptions, rng: np.random.Generator) -> list[_Contig]:
    contigs = []
    for index, (name, text) in enumerate(read_fasta_text(fasta)):
        stored = encode(text)
        tokens, masked = stored & TOKEN_MASK, (stored & REPEAT_FLAG) != 0
        first = int(tokens.size * (1 - options.held_out))
        unit = periodic_positions(tokens, masked, max_unit=1)
        unit[:first] = 0
        background = _far_from(masked | (tokens > 3), BACKGROUND_MARGIN)
        background[:first] = False
        contigs.append(_Contig(index, name, tokens, _one_per_run(unit, rng),
                               np.flatnonzero(background)))  # fmt: skip
    return contigs


def _random_alt(rng: np.random.Generator, ref: np.ndarray) -> np.ndarray:
    return (ref + rng.integers(1, 4, ref.size)) % 4  # uniform over the three other bases


def _apportion(total: int, sizes: list[int]) -> list[int]:
    """``total`` split over pools in proportion to their sizes (largest remainders, capped at
    each size), so the counts add up exactly whenever the pools hold enough."""
    sizes_arr = np.asarray(sizes, dtype=np.float64)
    total = int(min(total, sizes_arr.sum()))
    if total == 0:
        return [0] * len(sizes)
    quota = total * sizes_arr / sizes_arr.sum()
    counts = np.floor(quota).astype(np.int64)
    for i in np.argsort(-(quota - counts), kind="stable")[: total - int(counts.sum())]:
        counts[i] += 1
    return [int(c) for c in np.minimum(counts, sizes_arr.astype(np.int64))]


def make_variant_task(fasta: Path, options: VariantTaskOptions):
    """The task as a pandas DataFrame in `COLUMNS` order, sorted by contig and position."""
    import pandas as pd

    rng = np.random.default_rng(options.seed)
    contigs = _contigs(fasta, options, rng)
    n_runs = _apportion(options.positives // 2, [c.runs.size for c in contigs])
    rows = []  # (contig, pos0, ref, alt (-1: drawn below), element)
    for c, share in zip(contigs, n_runs, strict=True):
        runs = rng.choice(c.runs, share, replace=False)
        rows += [(c.index, int(p), int(c.tokens[p]), -1, "homopolymer") for p in runs]
    pools = []
    for c in contigs:  # every background SNV, classified by its effect on CG dinucleotides
        alt = _random_alt(rng, c.tokens[c.background])
        creates, destroys = _cpg_effect(c.tokens, c.background, alt)
        pools.append((c, alt, np.flatnonzero(creates), np.flatnonzero(~creates & ~destroys)))
    n_cpg = _apportion(options.positives - len(rows), [p[2].size for p in pools])
    n_neg = _apportion(CONTROLS * options.positives, [p[3].size for p in pools])
    for (c, alt, new, plain), k_new, k_neg in zip(pools, n_cpg, n_neg, strict=True):
        for j, element in [(j, "new_cpg") for j in rng.choice(new, k_new, replace=False)] + [
            (j, "background") for j in rng.choice(plain, k_neg, replace=False)
        ]:
            pos = int(c.background[j])
            rows.append((c.index, pos, int(c.tokens[pos]), int(alt[j]), element))
    rows.sort(key=lambda r: (r[0], r[1]))
    by_index = {c.index: c for c in contigs}
    alts = [r[3] if r[3] >= 0 else int(_random_alt(rng, np.array([r[2]]))[0]) for r in rows]
    frame = pd.DataFrame(
        {
            "chrom": [by_index[r[0]].name for r in rows],
            "pos": np.array([r[1] + 1 for r in rows], dtype=np.int64),
            "ref": [_BASES[r[2]] for r in rows],
            "alt": [_BASES[a] for a in alts],
            "label": np.array([int(r[4] != "background") for r in rows], dtype=np.int64),
            "element": [r[4] for r in rows],
            "gc_band": [b for r in rows for b in _gc_band(by_index[r[0]].tokens, r[1])],
        }
    )
    frame["match_group"] = _match_groups(frame)
    return frame[list(COLUMNS)]


def _match_groups(frame) -> list[str]:
    """Each positive with the negatives nearest it on its contig (TraitGym's matched design,
    matched here on position): every negative joins the group of its nearest positive."""
    groups = [""] * len(frame)
    for _, part in frame.groupby("chrom", sort=False):
        rows = part.index.to_numpy()
        pos = part.pos.to_numpy()
        positive = part.label.to_numpy() == 1
        anchors = rows[positive]
        if anchors.size == 0:
            continue
        anchor_pos = pos[positive]
        for row, p in zip(rows, pos, strict=True):
            groups[row] = f"g{int(anchors[np.argmin(np.abs(anchor_pos - p))]):05d}"
    return groups


@dataclass(frozen=True)
class VariantTaskRequest:
    """What `goatdna make-variant-task` asks for: the task of ``options`` from the synthetic
    genome ``fasta``, written to ``out`` (.tsv or .parquet; an existing one only with ``force``)."""

    fasta: Path
    out: Path
    options: VariantTaskOptions = VariantTaskOptions()
    force: bool = False


@dataclass(frozen=True)
class VariantTaskResult:
    """The written task: ``counts`` per ``element``; ``warnings`` to show the user (no planted
    truth in a FASTA that is not synthetic; fewer SNVs than asked)."""

    rows: int
    counts: dict[str, int]
    warnings: list[str]


def write_variant_task(request: VariantTaskRequest) -> VariantTaskResult:
    """Check the request, build the task and write it to ``request.out`` (atomically, under the
    output's lock: one writer, from before the FASTA is read)."""
    from goatdna.atomic import check_output_file
    from goatdna.errors import GoatDNAError
    from goatdna.formats import output_format
    from goatdna.workdir import output_lock

    fasta, out, options = request.fasta, request.out, request.options
    kind = output_format(out, (".tsv", ".parquet")).kind  # the one suffix rule
    check_output_file(out, "--out")  # a file we can write, before any work
    if options.positives < 1:
        raise GoatDNAError(f"--positives {options.positives}: must be >= 1")
    if not 0 < options.held_out <= 1:
        raise GoatDNAError(f"--held-out {options.held_out}: must be in (0, 1]")
    if not fasta.is_file():
        raise GoatDNAError(f"--fasta {fasta}: file not found")
    with output_lock(out, True):
        return _build_and_write(request, kind)


def _build_and_write(request: VariantTaskRequest, kind: str) -> VariantTaskResult:
    from goatdna.atomic import atomic_path
    from goatdna.errors import GoatDNAError
    from goatdna.workdir import claim_output

    fasta, out, options = request.fasta, request.out, request.options
    claim_output([out], request.force, inputs=[fasta])
    frame = make_variant_task(fasta, options)
    if frame.empty:
        raise GoatDNAError(
            f"--fasta {fasta}: no soft-masked homopolymer runs nor background bases found; pass "
            "a synthetic genome (goatdna prepare --synthetic, or the demo's shards/synthetic.fa)"
        )
    with atomic_path(out) as tmp:
        if kind == "parquet":
            frame.to_parquet(tmp, index=False)
        else:
            frame.to_csv(tmp, sep="\t", index=False)
    warnings = []
    if not has_planted_truth(fasta):
        warnings.append(
            f"warning: --fasta {fasta} is not a goatdna synthetic genome (no 'synthetic seed=' "
            "in its headers): the labels mark soft-masked homopolymer breaks and new CpGs, but "
            "carry no planted truth here"
        )
    made, positives, held_out = int(frame.label.sum()), options.positives, options.held_out
    negatives = len(frame) - made
    if made < positives or negatives < CONTROLS * positives:
        warnings.append(
            f"warning: made {made:,} positives and {negatives:,} negatives of the {positives:,} "
            f"and {CONTROLS * positives:,} asked: --held-out {held_out} leaves too few positions "
            "(raise --held-out, or ask for fewer --positives)"
        )
    counts = {str(k): int(v) for k, v in frame.element.value_counts().to_dict().items()}
    return VariantTaskResult(len(frame), counts, warnings)
