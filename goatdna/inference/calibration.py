"""Calibrated variant scores: each SNV's LLR against a null of random SNVs of its context.

"Is an LLR of -2.3 extreme?" depends on the base and its neighbours: a model scores changes at
CpG sites, in repeats or at A/T-rich stretches on different scales. The null answers it per
context:

- the **context** of an SNV at 0-based ``p`` is the reference trinucleotide ``c[p-1] c[p] c[p+1]``,
  collapsed to a pyrimidine (C or T) centre by reverse-complementing when ``c[p]`` is A or G:
  ``4 x 2 x 4 = 32`` classes (`CONTEXTS`); an N in it, or a contig end, gives no context;
- the **null** holds up to ``per_context`` SNVs per class drawn uniformly without replacement
  from the positions of that class on the contigs of the scored alleles (the region set), each
  with one of its three alternative bases drawn uniformly, scored exactly as the alleles are
  (same model, window, strands);
- per scored SNV: ``llr_percentile`` = 100 x (#null < llr + 0.5 x #null == llr) / n (the mean
  of the strict and weak percentiles, scipy's ``percentileofscore(kind="mean")``) and
  ``llr_z`` = (llr - mean) / sd (ddof 1) against its class's null; other alleles (indels, MNVs,
  unscored ones) get none: the null is one of SNVs.

Sampling is a pure function of the seed and the reference: a `numpy.random.Generator`
(PCG64) seeded with ``seed`` draws, in a fixed order, the positions of class 0..31 and then the
alternative bases, so the same seed gives the same null on every machine. The scored null is
saved (``.npz``) with its fingerprint (the input stamps of `goatdna.workdir.input_stamp`, the
contigs and the options) and reused while the fingerprint matches; one that does not match is
refused in one line naming what differs.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from goatdna.atomic import atomic_write_bytes
from goatdna.configfile import SEED, bounded, check_bounds
from goatdna.errors import GoatDNAError
from goatdna.inference.reference import Reference
from goatdna.inference.variants import Allele, VariantOptions, combine_strands, score_alleles
from goatdna.io.tokens import COMPLEMENT, NUM_BASES
from goatdna.workdir import JSONValue, changed_keys, input_stamp

if TYPE_CHECKING:
    from lightning_fabric import Fabric

    from goatdna.model.transformer import DNADecoder

CONTEXTS = tuple(
    left + centre + right for centre in "CT" for left in "ACGT" for right in "ACGT"
)  # index = 16 * (centre is T) + 4 * left + right
NULL_FORMAT = 1
DEFAULT_PER_CONTEXT = 100
CALIBRATION_COLUMNS = ("context", "llr_percentile", "llr_z")


@dataclass(frozen=True)
class CalibrationRequest:
    """``--calibrate`` / ``--null FILE``: where the null lives and how it is drawn."""

    null: Path | None = None  # default: a file named by the fingerprint in the cache folder
    seed: int = bounded(0, SEED)  # numpy's generators take no negative seed
    per_context: int = DEFAULT_PER_CONTEXT

    def __post_init__(self) -> None:
        check_bounds(self, GoatDNAError)  # refused before scoring
        if self.per_context < 2:
            raise GoatDNAError(f"--null-size {self.per_context}: must be >= 2 (a z-score needs 2)")


def check_output(kind: str) -> None:
    """Calibration columns go to tables; the VCF output carries ``GOATDNA_LLR`` only."""
    if kind == "vcf.gz":
        raise GoatDNAError(
            "--calibrate/--null: llr_percentile and llr_z are columns of a .tsv or .parquet "
            "output; write one of those (the .vcf.gz output carries GOATDNA_LLR only)"
        )


def context_classes(contig: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The `CONTEXTS` index of the trinucleotide at each 0-based position; -1 where none."""
    positions = np.asarray(positions, dtype=np.int64)
    inside = (positions >= 1) & (positions < contig.size - 1)
    safe = np.where(inside, positions, 1)
    left, centre, right = contig[safe - 1], contig[safe], contig[safe + 1]
    known = inside & (left < NUM_BASES) & (centre < NUM_BASES) & (right < NUM_BASES)
    purine = (centre == 0) | (centre == 2)  # A or G: read the other strand
    left2 = np.where(purine, COMPLEMENT[np.minimum(right, 4)], left).astype(np.int64)
    right2 = np.where(purine, COMPLEMENT[np.minimum(left, 4)], right).astype(np.int64)
    centre2 = np.where(purine, COMPLEMENT[np.minimum(centre, 4)], centre)
    index = 16 * (centre2 == 3) + 4 * left2 + right2
    return np.where(known, index, -1)


def _all_classes(contig: np.ndarray) -> np.ndarray:
    return context_classes(contig, np.arange(contig.size)).astype(np.int8)


@dataclass(frozen=True)
class NullDraw:
    """The null's SNVs in contig (FASTA) then position order, and the context of each."""

    alleles: list[Allele]
    contexts: np.ndarray  # (n,) int64 index into CONTEXTS


def sample_null(
    reference: Reference, contigs: Sequence[str], seed: int, per_context: int
) -> NullDraw:
    """The null SNVs (module docstring). Each contig is read twice (count, then pick), never
    once per SNV: the reference keeps one contig in memory."""
    rng = np.random.default_rng(seed)
    totals = np.zeros((len(contigs), len(CONTEXTS)), dtype=np.int64)
    for i, name in enumerate(contigs):
        classes = _all_classes(reference.contig_tokens(name))
        totals[i] = np.bincount(classes[classes >= 0], minlength=len(CONTEXTS))
    per_class = totals.sum(axis=0)
    picks = [
        np.sort(rng.choice(int(n), size=min(per_context, int(n)), replace=False)) for n in per_class
    ]  # global ranks within each class, over the contigs in order
    offsets = rng.integers(0, 3, size=sum(p.size for p in picks))  # which alternative, per pick
    first_pick = np.concatenate([[0], np.cumsum([p.size for p in picks])])
    starts = np.vstack([np.zeros(len(CONTEXTS), np.int64), np.cumsum(totals, axis=0)])
    found: list[tuple[int, int, Allele]] = []  # (contig index, position, allele)
    contexts: list[int] = []
    for i, name in enumerate(contigs):
        contig = reference.contig_tokens(name)
        classes = _all_classes(contig)
        for k in range(len(CONTEXTS)):
            lo, hi = starts[i, k], starts[i + 1, k]
            inside = np.flatnonzero((picks[k] >= lo) & (picks[k] < hi))
            if not inside.size:
                continue
            where = np.flatnonzero(classes == k)[picks[k][inside] - lo]
            for p, offset in zip(where.tolist(), offsets[first_pick[k] + inside].tolist(),
                                 strict=True):  # fmt: skip
                ref = int(contig[p])
                alt = [b for b in range(4) if b != ref][offset]
                found.append((i, p, Allele(-1, name, p + 1, ".", "ACGT"[ref], "ACGT"[alt])))
                contexts.append(k)
    order = sorted(range(len(found)), key=lambda j: found[j][:2])
    return NullDraw(
        alleles=[found[j][2] for j in order],
        contexts=np.array([contexts[j] for j in order], dtype=np.int64),
    )


@dataclass
class NullScores:
    """A scored null: its SNVs, their context classes and LLRs, and its fingerprint."""

    fingerprint: dict[str, JSONValue]
    chrom: np.ndarray  # (n,) str
    pos: np.ndarray  # (n,) int64, 1-based
    ref: np.ndarray  # (n,) str
    alt: np.ndarray  # (n,) str
    context: np.ndarray  # (n,) int64 index into CONTEXTS
    llr: np.ndarray  # (n,) float64

    def save(self, path: Path) -> None:
        buffer = io.BytesIO()
        np.savez(
            buffer,
            fingerprint=np.array(json.dumps(self.fingerprint, sort_keys=True)),
            chrom=self.chrom, pos=self.pos, ref=self.ref, alt=self.alt,
            context=self.context, llr=self.llr,
        )  # fmt: skip
        atomic_write_bytes(path, buffer.getvalue())

    @classmethod
    def load(cls, path: Path) -> NullScores:
        try:
            with np.load(path) as data:
                return cls(
                    fingerprint=json.loads(str(data["fingerprint"])),
                    chrom=data["chrom"], pos=data["pos"], ref=data["ref"], alt=data["alt"],
                    context=data["context"], llr=data["llr"],
                )  # fmt: skip
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
            # an empty file is EOFError, which click would print as a bare "Aborted."
            raise GoatDNAError(
                f"--null {path}: not a goatdna null file ({err.__class__.__name__}); delete it "
                "or name another path, and it is made again"
            ) from None


def null_fingerprint(
    checkpoint: Path, fasta: Path, contigs: Sequence[str], options: VariantOptions,
    request: CalibrationRequest,
) -> dict[str, JSONValue]:  # fmt: skip
    """What the null's numbers depend on (batch size only reorders work: not part of it)."""
    return {
        "goatdna_null": NULL_FORMAT,
        "checkpoint": input_stamp(checkpoint).as_json(),
        "fasta": input_stamp(fasta).as_json(),
        "contigs": list(contigs),
        "window": options.window,
        "strands": options.strands,
        "shared_prefix": options.shared_prefix,
        "seed": request.seed,
        "per_context": request.per_context,
    }


def default_null_path(cache_dir: Path, fingerprint: dict[str, JSONValue]) -> Path:
    """A file per fingerprint in the cache folder, so ``--calibrate`` alone reuses its null."""
    digest = hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()
    return cache_dir / "nulls" / f"null-{digest[:20]}.npz"


def score_null(
    model: DNADecoder, reference: Reference, contigs: Sequence[str], options: VariantOptions,
    request: CalibrationRequest, fingerprint: dict[str, JSONValue], fabric: Fabric,
) -> NullScores:  # fmt: skip
    """Draw and score the null on this process (global rank 0 calls it)."""
    draw = sample_null(reference, contigs, request.seed, request.per_context)
    alleles = draw.alleles
    with fabric.autocast():
        scores, _ = score_alleles(model, alleles, ["ok"] * len(alleles), reference, options)
    return NullScores(
        fingerprint=fingerprint,
        chrom=np.array([a.chrom for a in alleles], dtype=str),
        pos=np.array([a.pos for a in alleles], dtype=np.int64),
        ref=np.array([a.ref for a in alleles], dtype=str),
        alt=np.array([a.alt for a in alleles], dtype=str),
        context=draw.contexts,
        llr=combine_strands(scores, options.strands)["llr"],
    )


@dataclass(frozen=True)
class NullPlan:
    """Where a run's null lives and what it must have been made from (checked before scoring)."""

    path: Path
    fingerprint: dict[str, JSONValue]
    contigs: list[str]
    request: CalibrationRequest


def plan_null(
    alleles: Sequence[Allele], statuses: Sequence[str], reference: Reference,
    options: VariantOptions, request: CalibrationRequest, checkpoint: Path, fasta: Path,
    cache_dir: Path,
) -> NullPlan:  # fmt: skip
    """The run's null: its fingerprint and file; an existing file made from other inputs or
    options is refused here, before any allele is scored. The region set is the contigs of
    the scored alleles, in FASTA order."""
    used = {a.chrom for a, s in zip(alleles, statuses, strict=True) if s == "ok"}
    contigs = [name for name in reference.contig_names if name in used]
    fingerprint = null_fingerprint(checkpoint, fasta, contigs, options, request)
    path = request.null or default_null_path(cache_dir, fingerprint)
    if path.exists():
        _check_fingerprint(path, NullScores.load(path), fingerprint)
    return NullPlan(path, fingerprint, contigs, request)


def _check_fingerprint(path: Path, null: NullScores, fingerprint: dict[str, JSONValue]) -> None:
    if null.fingerprint != fingerprint:
        differ = changed_keys(null.fingerprint, fingerprint)
        raise GoatDNAError(
            f"--null {path}: was made for other inputs or options ({', '.join(differ)} "
            "differ); delete it, or name another --null file to make a new one"
        )


def obtain_null(
    plan: NullPlan, make: Callable[[], NullScores], message: Callable[[str], None]
) -> NullScores:
    """The null at ``plan.path`` if its fingerprint matches; made (and saved) when there is none."""
    if plan.path.exists():
        null = NullScores.load(plan.path)
        _check_fingerprint(plan.path, null, plan.fingerprint)
        message(f"calibration: reusing the null in {plan.path} ({null.llr.size:,} SNVs)")
        return null
    null = make()
    plan.path.parent.mkdir(parents=True, exist_ok=True)
    null.save(plan.path)
    message(f"calibration: scored a null of {null.llr.size:,} SNVs, saved to {plan.path}")
    return null


def calibrate(
    alleles: Sequence[Allele], statuses: Sequence[str], llr: np.ndarray, reference: Reference,
    null: NullScores,
) -> dict[str, object]:  # fmt: skip
    """The `CALIBRATION_COLUMNS` of every allele (None / NaN where an allele has none)."""
    n = len(alleles)
    context: list[str | None] = [None] * n
    percentile = np.full(n, np.nan)
    z = np.full(n, np.nan)
    by_class = [np.sort(null.llr[null.context == k]) for k in range(len(CONTEXTS))]
    for row, (allele, status) in enumerate(zip(alleles, statuses, strict=True)):
        if status != "ok" or len(allele.ref) != 1 or len(allele.alt) != 1:
            continue
        where = np.array([allele.pos - 1])
        k = int(context_classes(reference.contig_tokens(allele.chrom), where)[0])
        if k < 0:
            continue
        context[row] = CONTEXTS[k]
        values = by_class[k]
        if values.size == 0:
            continue
        below = np.searchsorted(values, llr[row], side="left")
        at_or_below = np.searchsorted(values, llr[row], side="right")
        percentile[row] = 100.0 * (below + at_or_below) / (2 * values.size)
        if values.size >= 2 and values.std(ddof=1) > 0:
            z[row] = (llr[row] - values.mean()) / values.std(ddof=1)
    return {"context": context, "llr_percentile": percentile, "llr_z": z}


def calibration_columns(
    plan: NullPlan, model: DNADecoder, fabric: Fabric, alleles: Sequence[Allele],
    statuses: Sequence[str], llr: np.ndarray, reference: Reference, options: VariantOptions,
    message: Callable[[str], None],
) -> dict[str, object]:  # fmt: skip
    """The call `score-variants` makes on global rank 0 after scoring: the null, the columns."""
    null = obtain_null(
        plan,
        lambda: score_null(
            model, reference, plan.contigs, options, plan.request, plan.fingerprint, fabric
        ),  # fmt: skip
        message,
    )
    return calibrate(alleles, statuses, llr, reference, null)
