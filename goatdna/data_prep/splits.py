"""Which bases go where: contig selection and the train/val/test split plan.

Every base of a kept contig lands in exactly one split (contig and tail-fraction modes); in BED
mode the records are exactly the BED intervals (bases outside them are not kept, and we say so).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from goatdna.data_prep.options import (
    DEFAULT_EXCLUDE_CONTIGS,
    DEFAULT_TEST_CONTIGS,
    DEFAULT_VAL_CONTIGS,
    PrepareOptions,
)
from goatdna.errors import GoatDNAError
from goatdna.io.fasta import ContigInfo

SPLITS: tuple[str, ...] = ("train", "val", "test")
BED_SPLIT_NAMES = {
    "train": "train",
    "training": "train",
    "val": "val",
    "valid": "val",
    "validation": "val",
    "test": "test",
}
_REGEX_CHARS = set(".^$*+?{}[]\\|()")


@dataclass(frozen=True)
class PlannedRecord:
    """A source interval [start, end) of ``name`` assigned to ``split``."""

    name: str
    split: str
    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class SplitPlan:
    mode: str  # "contigs", "bed" or "tail-fraction"
    records: tuple[PlannedRecord, ...]


def is_regex(pattern: str) -> bool:
    return any(ch in _REGEX_CHARS for ch in pattern)


def _compile(pattern: str, what: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as err:
        raise GoatDNAError(f"{what}: {pattern!r} is not a valid regex ({err})") from None


def select_contigs(
    contigs: Sequence[ContigInfo],
    options: PrepareOptions,
    message: Callable[[str], None],
) -> list[ContigInfo]:
    """Apply --contigs, --exclude-contigs and --min-contig-length, keeping FASTA order."""
    names = {c.name for c in contigs}
    exact: set[str] = set()
    chosen: set[str] | None = None
    if options.contigs is not None:
        chosen = set()
        for item in options.contigs:
            if item in names:
                exact.add(item)
                chosen.add(item)
                continue
            if not is_regex(item):
                raise GoatDNAError(
                    f"--contigs: contig {item!r} is not in the FASTA (it has {_few(names)})"
                )
            regex = _compile(item, "--contigs")
            hits = {n for n in names if regex.fullmatch(n)}
            if not hits:
                raise GoatDNAError(f"--contigs: the regex {item!r} matches no contig")
            chosen |= hits
    excludes = (
        DEFAULT_EXCLUDE_CONTIGS if options.exclude_contigs is None else options.exclude_contigs
    )
    exclude_res = [_compile(p, "--exclude-contigs") for p in excludes if p]
    if options.min_contig_length < 0:
        raise GoatDNAError("--min-contig-length must be >= 0")
    kept, excluded, short = [], 0, 0
    for info in contigs:
        if chosen is not None and info.name not in chosen:
            continue
        if info.name not in exact and any(r.search(info.name) for r in exclude_res):
            excluded += 1
            continue
        if info.length < max(1, options.min_contig_length):
            short += 1
            continue
        kept.append(info)
    if excluded or short:
        message(
            f"kept {len(kept)} contigs; left out {excluded} by --exclude-contigs and {short} "
            f"shorter than --min-contig-length={options.min_contig_length} (or empty)"
        )
    if not kept:
        raise GoatDNAError(
            "no contig left after --contigs/--exclude-contigs/--min-contig-length: "
            "loosen the selection"
        )
    return kept


def _few(names: set[str] | Sequence[str], limit: int = 5) -> str:
    ordered = sorted(names)
    shown = ", ".join(ordered[:limit])
    return shown + (f", ... ({len(ordered)} in all)" if len(ordered) > limit else "")


def plan_splits(
    kept: Sequence[ContigInfo],
    all_contigs: Sequence[ContigInfo],
    options: PrepareOptions,
    message: Callable[[str], None],
    contig_of: Callable[[str], str | None] | None = None,
) -> SplitPlan:
    """Decide the records and their splits (see module docstring); ``contig_of`` as in
    `read_split_bed`."""
    if options.split_bed is not None:
        if options.val_contigs is not None or options.test_contigs is not None:
            raise GoatDNAError("--split-bed cannot be combined with --val-contigs/--test-contigs")
        bed = read_split_bed(Path(options.split_bed), kept, all_contigs, message, contig_of)
        return SplitPlan("bed", tuple(bed))
    kept_names = [c.name for c in kept]
    all_names = {c.name for c in all_contigs}
    explicit = options.val_contigs is not None or options.test_contigs is not None
    if explicit:
        val = _check_named(options.val_contigs or [], "--val-contigs", kept_names, all_names)
        test = _check_named(options.test_contigs or [], "--test-contigs", kept_names, all_names)
        if options.val_contigs is None:
            val = [n for n in DEFAULT_VAL_CONTIGS if n in kept_names and n not in test]
        if options.test_contigs is None:
            test = [n for n in DEFAULT_TEST_CONTIGS if n in kept_names and n not in val]
    else:
        val = [n for n in DEFAULT_VAL_CONTIGS if n in kept_names]
        test = [n for n in DEFAULT_TEST_CONTIGS if n in kept_names]
        if (
            len(val) != len(DEFAULT_VAL_CONTIGS)
            or len(test) != len(DEFAULT_TEST_CONTIGS)
            or len(kept) <= len(val) + len(test)
        ):
            return _tail_fraction(kept, options, message)
    overlap = set(val) & set(test)
    if overlap:
        raise GoatDNAError(
            f"contig {sorted(overlap)[0]!r} is named in both --val-contigs and --test-contigs"
        )
    split_of = {n: "val" for n in val} | {n: "test" for n in test}
    records = tuple(PlannedRecord(c.name, split_of.get(c.name, "train"), 0, c.length) for c in kept)
    if not any(r.split == "train" for r in records):
        raise GoatDNAError("every kept contig is held out: leave at least one contig for training")
    return SplitPlan("contigs", records)


def _check_named(
    names: Sequence[str], flag: str, kept: Sequence[str], all_names: set[str]
) -> list[str]:
    for name in names:
        if name not in all_names:
            raise GoatDNAError(
                f"{flag}: contig {name!r} is not in the FASTA (it has {_few(all_names)})"
            )
        if name not in kept:
            raise GoatDNAError(
                f"{flag}: contig {name!r} was left out by --contigs/--exclude-contigs/"
                "--min-contig-length: keep it or choose another"
            )
    return list(dict.fromkeys(names))


def _tail_fraction(
    kept: Sequence[ContigInfo], options: PrepareOptions, message: Callable[[str], None]
) -> SplitPlan:
    vf, tf = options.val_fraction, options.test_fraction
    if not (0 <= vf < 1 and 0 <= tf < 1 and vf + tf < 1):
        raise GoatDNAError(
            f"--val-fraction {vf} and --test-fraction {tf} must be in [0, 1) and sum below 1"
        )
    message(
        f"no {'/'.join(DEFAULT_VAL_CONTIGS + DEFAULT_TEST_CONTIGS)} hold-out contigs here: "
        f"holding out the last {vf:.0%} (val) and {tf:.0%} (test) of each contig instead"
    )
    records = []
    for c in kept:
        n_test = round(c.length * tf)
        n_val = round(c.length * vf)
        train_end = c.length - n_val - n_test
        for split, start, end in (
            ("train", 0, train_end),
            ("val", train_end, train_end + n_val),
            ("test", train_end + n_val, c.length),
        ):
            if end > start:
                records.append(PlannedRecord(c.name, split, start, end))
    return SplitPlan("tail-fraction", tuple(records))


def read_split_bed(
    path: Path,
    kept: Sequence[ContigInfo],
    all_contigs: Sequence[ContigInfo],
    message: Callable[[str], None],
    contig_of: Callable[[str], str | None] | None = None,
) -> list[PlannedRecord]:
    """Parse a ``chrom start end split`` BED; unknown contigs and overlaps are errors.

    ``contig_of`` maps a BED chrom to a contig of this FASTA, or to None for a line that belongs
    to another FASTA of a multi-source run (the line is skipped here).
    """
    from goatdna.io.regions import read_bed_intervals

    lengths = {c.name: c.length for c in all_contigs}
    order = {c.name: i for i, c in enumerate(all_contigs)}
    kept_names = {c.name for c in kept}
    intervals: list[tuple[str, int, int, str, int]] = []
    for line in read_bed_intervals(path, "--split-bed"):  # the one BED reader (io/regions.py)
        where = f"--split-bed {path} line {line.line}"
        if len(line.fields) < 4:
            raise GoatDNAError(f"{where}: expected 4 columns (chrom start end split)")
        chrom, start, end, split_s = line.chrom, line.start, line.end, line.fields[3]
        if contig_of is not None:
            mapped = contig_of(chrom)
            if mapped is None:
                continue
            chrom = mapped
        if chrom not in lengths:
            raise GoatDNAError(f"{where}: contig {chrom!r} is not in the FASTA")
        if end > lengths[chrom]:
            raise GoatDNAError(
                f"{where}: interval {chrom}:{start}-{end} is outside the contig "
                f"(length {lengths[chrom]})"
            )
        split = BED_SPLIT_NAMES.get(split_s.lower())
        if split is None:
            raise GoatDNAError(f"{where}: split {split_s!r} is not one of train, val, test")
        intervals.append((chrom, start, end, split, line.line))
    if not intervals:
        raise GoatDNAError(f"--split-bed: {path} holds no intervals")
    intervals.sort(key=lambda iv: (order[iv[0]], iv[1], iv[2]))
    for prev, cur in zip(intervals, intervals[1:], strict=False):
        if prev[0] == cur[0] and cur[1] < prev[2]:
            raise GoatDNAError(
                f"--split-bed: intervals {prev[0]}:{prev[1]}-{prev[2]} (line {prev[4]}) and "
                f"{cur[0]}:{cur[1]}-{cur[2]} (line {cur[4]}) overlap"
            )
    records = [PlannedRecord(c, s, a, b) for c, a, b, s, _ in intervals if c in kept_names]
    dropped = len(intervals) - len(records)
    if dropped:
        message(f"--split-bed: {dropped} intervals on contigs left out by the contig filters")
    if not records:
        raise GoatDNAError("--split-bed: no interval lies on a kept contig")
    covered = sum(r.length for r in records)
    total = sum(lengths[n] for n in {r.name for r in records})
    if covered < total:
        message(
            f"--split-bed: the intervals cover {covered:,} of {total:,} bases of their contigs; "
            "bases outside every interval are not kept"
        )
    return records
