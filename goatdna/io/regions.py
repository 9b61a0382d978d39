"""Genomic regions: the one `Region` type and the one ``--region`` parser (issue 42).

One convention: on the command line a region is written the samtools way, ``contig:start-end``,
1-based and inclusive (commas allowed, ``20:1,000,001-1,010,000``); in code it is a `Region`,
0-based and half-open (``Region("20", 1_000_000, 1_010_000)``), as BED files and the token
arrays index it. The contig is everything before the last ``:``, so names holding a colon work.

Before issue 42 there were two parsers (score-track/mutagenesis/attention, and generate's prompt
region). Both read text the same way (1-based inclusive) but accepted slightly different strings,
and each command must keep accepting exactly what it did, so the one parser has one switch,
``whole_contig``: see `parse_region`.

`read_bed_intervals` is the one BED reader (score-track's ``--bed``, embed's and the task tables'
BED inputs, prepare's ``--split-bed``): BED is 0-based, half-open, as `Region`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, overload

from goatdna.errors import GoatDNAError
from goatdna.io.text import open_text


@dataclass(frozen=True)
class Region:
    """Bases [start, end) (0-based, half-open) of one contig."""

    contig: str
    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start

    @property
    def label(self) -> str:
        """samtools-style 1-based inclusive name, e.g. ``20:1000001-1010000``."""
        return f"{self.contig}:{self.start + 1}-{self.end}"


_SPAN_RE = re.compile(r"^(?P<start>[\d,]+)-(?P<end>[\d,]+)$")


@overload
def parse_region(text: str, *, whole_contig: Literal[False] = False) -> Region: ...


@overload
def parse_region(text: str, *, whole_contig: Literal[True]) -> Region | str: ...


def parse_region(text: str, *, whole_contig: bool = False) -> Region | str:
    """``contig:start-end`` (1-based, inclusive, commas allowed) -> a 0-based half-open `Region`.

    ``whole_contig=False`` (score-track, mutagenesis, attention): a span is required; start and
    end are digits and commas. ``whole_contig=True`` (generate's prompt ``--region``): a bare
    ``contig`` is allowed too and comes back as the name alone (a ``str``: the whole record);
    commas are dropped from the whole text first and start/end are read with ``int()``, as that
    command always did. Both raise one ``--region`` `GoatDNAError` naming the expected form.
    """
    if whole_contig:
        return _parse_prompt_region(text)
    contig, sep, span = text.strip().rpartition(":")
    match = _SPAN_RE.match(span.strip())
    if not sep or not contig or match is None:
        raise GoatDNAError(
            f"--region {text!r}: expected contig:start-end (1-based, inclusive), e.g. 20:1000001-1100000"
        )
    start = int(match["start"].replace(",", ""))
    end = int(match["end"].replace(",", ""))
    if start < 1 or end < start:
        raise GoatDNAError(
            f"--region {text!r}: start must be >= 1 and end >= start (1-based, inclusive)"
        )
    return Region(contig, start - 1, end)


def _parse_prompt_region(region: str) -> Region | str:
    """The ``whole_contig=True`` grammar of `parse_region` (generate's, kept as it was)."""
    text = region.strip().replace(",", "")
    if not text:
        raise GoatDNAError("--region is empty: use chr:start-end (1-based, inclusive)")
    if ":" not in text:
        return text
    name, _, span = text.rpartition(":")
    try:
        first, last = (int(x) for x in span.split("-"))
    except ValueError:
        raise GoatDNAError(
            f"--region {region!r}: expected chr:start-end with integer start and end"
        ) from None
    if not name or first < 1 or last < first:
        raise GoatDNAError(
            f"--region {region!r}: need a contig name and 1 <= start <= end (1-based, inclusive)"
        )
    return Region(name, first - 1, last)


@dataclass(frozen=True)
class BedInterval:
    """One BED line: its line number, the interval (0-based, half-open) and all its fields."""

    line: int
    chrom: str
    start: int
    end: int
    fields: list[str]


def read_bed_intervals(path: str | Path, option: str = "--bed") -> list[BedInterval]:
    """The intervals of a BED file in file order (fields split on tabs, else on whitespace).

    ``track``/``browser`` lines, ``#`` comments and blank lines are skipped; any other line that
    is not ``chrom start end ...`` with 0 <= start < end is an error naming the line.
    """
    path = Path(path)
    if not path.is_file():
        raise GoatDNAError(f"{option} {path}: file not found")
    intervals: list[BedInterval] = []
    try:
        with open_text(path) as handle:
            lines = list(handle)
    except (OSError, UnicodeDecodeError, EOFError) as err:
        raise GoatDNAError(f"{option} {path}: not a text BED file ({err})") from None
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith(("#", "track", "browser")):
            continue
        fields = text.split("\t") if "\t" in text else text.split()
        where = f"{option} {path} line {number}"
        if len(fields) < 3:
            raise GoatDNAError(f"{where}: expected contig, start, end; got {text[:60]!r}")
        try:
            start, end = int(fields[1]), int(fields[2])
        except ValueError:
            raise GoatDNAError(
                f"{where}: start and end must be integers, got {fields[1]!r} and {fields[2]!r}"
            ) from None
        if end <= start:
            raise GoatDNAError(
                f"{where}: empty region {fields[0]}:{start}-{end}; need 0 <= start < end "
                "(BED is 0-based, half-open)"
            )
        if start < 0:
            raise GoatDNAError(f"{where}: start {start} is negative; need 0 <= start < end")
        intervals.append(BedInterval(number, fields[0], start, end, fields))
    if not intervals:
        raise GoatDNAError(f"{option} {path}: holds no regions")
    return intervals
