"""`PrepareOptions`: every knob of `goatdna prepare`, as one dataclass the CLI fills in.

`PREPARE_FLAGS` are the command's flags, one per field they set (the command's signature is
built from them, `goatdna.configfile.options_with_flags` fills the dataclass from their values);
type and default are the field's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from goatdna.configfile import COUNT, COUNT_OR_ZERO, FRACTION, ConfigFlag, bounded

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


PREPARE_FLAGS: tuple[ConfigFlag, ...] = (
    ConfigFlag(
        "contigs",
        "contigs",
        "Comma-separated contig names or regexes (full match) to keep; default: all. Names "
        "given here must exist.",
    ),
    ConfigFlag(
        "exclude_contigs",
        "exclude_contigs",
        "Comma-separated regexes searched in contig names to leave out; default: "
        f"{','.join(DEFAULT_EXCLUDE_CONTIGS)}  ('' excludes nothing).",
    ),
    ConfigFlag(
        "min_contig_length",
        "min_contig_length",
        "Leave out contigs shorter than this many bases.",
    ),
    ConfigFlag(
        "val_contigs",
        "val_contigs",
        "Comma-separated contigs held out for validation (default chr20 when chr20 and chr21 are "
        "both present; otherwise the tail of each contig, see --val-fraction).",
    ),
    ConfigFlag(
        "test_contigs",
        "test_contigs",
        "Comma-separated contigs held out for test (default chr21, as --val-contigs).",
    ),
    ConfigFlag(
        "split_bed",
        "split_bed",
        "BED file 'chrom start end split' (split: train/val/test, e.g. HyenaDNA's "
        "sequences_human.bed); its intervals become the records. Overlaps are an error.",
    ),
    ConfigFlag(
        "val_fraction",
        "val_fraction",
        "Without hold-out contigs: share of each contig's tail held out for validation.",
    ),
    ConfigFlag(
        "test_fraction",
        "test_fraction",
        "Without hold-out contigs: share of each contig's tail (after val) held out for test.",
    ),
    ConfigFlag(
        "workers",
        "workers",
        "Parallel worker processes (default: up to 4 CPU cores).",
        names=("--workers", "-j"),
    ),
    ConfigFlag("force", "force", "Overwrite a dataset or an interrupted run already in OUT."),
    ConfigFlag("resume", "resume", "Finish an interrupted run in OUT (same input and options)."),
    ConfigFlag(
        "source_names",
        "source_names",
        "Comma-separated name of each FASTA, in order (default: the file names without "
        ".fa/.gz). Contig options then take source:contig for one source; hold-outs apply per "
        "source; contigs found in several files are stored as source:contig.",
    ),
    ConfigFlag(
        "cache_dir",
        "cache_dir",
        "Where a plain-gzip FASTA is decompressed once (default OUT/cache).",
    ),
)
"""`goatdna prepare`'s flags that set `PrepareOptions` fields, in --help order."""
