"""`PrepareOptions`: every knob of `goatdna prepare`, as one dataclass the CLI fills in."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from goatdna.configfile import COUNT, COUNT_OR_ZERO, FRACTION, bounded

DEFAULT_EXCLUDE_CONTIGS: tuple[str, ...] = ("_alt", "_random", "_fix", "chrUn", "EBV", "HLA-")
"""Regexes searched in contig names: alt haplotypes, unplaced/unlocalised scaffolds, patches,
the EBV decoy and HLA alleles, which would duplicate or pollute the primary assembly."""

DEFAULT_VAL_CONTIGS: tuple[str, ...] = ("chr20",)
DEFAULT_TEST_CONTIGS: tuple[str, ...] = ("chr21",)


@dataclass
class PrepareOptions:
    """How to turn a FASTA into shards. ``None`` means "the documented default".

    contigs: names or regexes (full match) of contigs to keep; None keeps all.
    exclude_contigs: regexes searched in names; None means DEFAULT_EXCLUDE_CONTIGS, [] none.
        A contig named exactly in ``contigs`` is kept even if it matches an exclusion.
    val_contigs / test_contigs: whole contigs held out; None means chr20 / chr21 when both are
        present (hg38-like), otherwise the tail of each contig (val_fraction / test_fraction).
    split_bed: BED file (chrom, start, end, split) whose intervals become the records.
    workers: parallel processes (None: up to 4, bounded by the CPU count).
    chunk_bases: bases read, translated and hashed per step.
    source_names: one name per FASTA file of a multi-source run (None: from the file names).
        With several sources, contig lists take ``source:contig`` for one source, a bare name
        for every source holding it, and the split options apply to each source on its own.
    """

    contigs: list[str] | None = None
    exclude_contigs: list[str] | None = None
    min_contig_length: int = bounded(0, COUNT_OR_ZERO)
    val_contigs: list[str] | None = None
    test_contigs: list[str] | None = None
    split_bed: Path | None = None
    val_fraction: float = bounded(0.05, FRACTION)
    test_fraction: float = bounded(0.05, FRACTION)
    workers: int | None = bounded(None, COUNT)
    force: bool = False
    resume: bool = False
    chunk_bases: int = 1 << 24
    cache_dir: Path | None = None
    progress: bool = True
    source_names: list[str] | None = None
