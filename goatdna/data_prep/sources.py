"""Several FASTA files in one dataset: source names, per-source options, unique record names.

``goatdna prepare human.fa.gz mouse.fa.gz --source-names human,mouse`` plans each FASTA on its
own (contig filters and hold-out options apply per source, so mouse gets its own val/test tail
while human holds out chr20/chr21) and writes them into one set of split files. Contig lists
(``--contigs``, ``--val-contigs``, ``--test-contigs``) and ``--split-bed`` chroms may name
``source:contig`` for one source; a bare name applies to every source that holds it. A contig
name found in more than one source is stored as ``source:contig`` in each of them, so record
names stay unique; the renames are said on the console and listed in the manifest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from goatdna.data_prep.options import PrepareOptions
from goatdna.data_prep.shards import default_source_name
from goatdna.data_prep.splits import PlannedRecord, is_regex
from goatdna.errors import GoatDNAError

SOURCE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
SEPARATOR = ":"
"""Between a source's name and a contig name, in options and in renamed records."""


def source_names(fastas: Sequence[Path], names: Sequence[str] | None) -> list[str]:
    """One valid, unique name per FASTA: the given ones, or the file names without suffixes."""
    derived = names is None
    chosen = [default_source_name(f.name) for f in fastas] if names is None else list(names)
    if len(chosen) != len(fastas):
        raise GoatDNAError(
            f"--source-names gives {len(chosen)} names for {len(fastas)} FASTA files: "
            "give one name per file, in the same order"
        )
    seen: set[str] = set()
    for name in chosen:
        if not SOURCE_NAME.fullmatch(name):
            raise GoatDNAError(
                f"--source-names: {name!r} is not a valid source name: use letters, digits, "
                "'_', '.' and '-' (starting with a letter or digit)"
            )
        if name in seen:
            if derived:
                raise GoatDNAError(
                    f"two FASTA files would both be source {name!r} (named after their files): "
                    "name them with --source-names"
                )
            raise GoatDNAError(
                f"--source-names: {name!r} is given twice: source names must be unique"
            )
        seen.add(name)
    first: dict[Path, str] = {}
    for fasta, name in zip(fastas, chosen, strict=True):
        where = Path(fasta).resolve()
        if where in first:  # the same genome twice would double its bases in every split
            raise GoatDNAError(
                f"{fasta} is given twice (as sources {first[where]!r} and {name!r}): give each "
                "FASTA once"
            )
        first[where] = name
    return chosen


def _split_qualified(item: str, sources: Mapping[str, set[str]]) -> tuple[str | None, str]:
    source, sep, rest = item.partition(SEPARATOR)
    if sep and source in sources:
        return source, rest
    return None, item


def _matches(item: str, contigs: set[str], regex_ok: bool) -> bool:
    if item in contigs:
        return True
    if not regex_ok or not is_regex(item):
        return False
    try:
        pattern = re.compile(item)
    except re.error:
        return True  # let select_contigs report the bad regex
    return any(pattern.fullmatch(c) for c in contigs)


def _scope(
    items: list[str] | None,
    name: str,
    sources: Mapping[str, set[str]],
    regex_ok: bool,
) -> list[str] | None:
    if items is None:
        return None
    mine = []
    for item in items:
        source, contig = _split_qualified(item, sources)
        if source is not None:
            if source == name:
                mine.append(contig)
        elif _matches(item, sources[name], regex_ok):
            mine.append(item)
    return mine


def check_contig_lists(options: PrepareOptions, sources: Mapping[str, set[str]]) -> None:
    """A bare contig name (or regex) in a contig option must be found in at least one source."""
    for flag, items, regex_ok in (
        ("--contigs", options.contigs, True),
        ("--val-contigs", options.val_contigs, False),
        ("--test-contigs", options.test_contigs, False),
    ):
        for item in items or []:
            source, _ = _split_qualified(item, sources)
            if source is None and not any(
                _matches(item, contigs, regex_ok) for contigs in sources.values()
            ):
                raise GoatDNAError(
                    f"{flag}: contig {item!r} is in none of the FASTA files "
                    f"({', '.join(sources)}); name one source's contig as source:contig"
                )


def options_for_source(
    options: PrepareOptions, name: str, sources: Mapping[str, set[str]]
) -> PrepareOptions:
    """The options as they apply to source ``name`` (``sources``: name -> its contig names).

    Contig lists keep the items for this source; hold-out lists that name nothing here fall
    back to the defaults for this source (chr20/chr21, else each contig's tail).
    """
    val = _scope(options.val_contigs, name, sources, regex_ok=False)
    test = _scope(options.test_contigs, name, sources, regex_ok=False)
    return replace(
        options,
        contigs=_scope(options.contigs, name, sources, regex_ok=True),
        val_contigs=val or None,
        test_contigs=test or None,
    )


def bed_contig_resolver(name: str, sources: Mapping[str, set[str]]) -> Callable[[str], str | None]:
    """For `read_split_bed`: a BED chrom -> this source's contig, None for another source's."""

    def contig_of(chrom: str) -> str | None:
        source, contig = _split_qualified(chrom, sources)
        if source is not None:
            return contig if source == name else None
        holders = [s for s, contigs in sources.items() if chrom in contigs]
        if not holders:
            raise GoatDNAError(
                f"--split-bed: contig {chrom!r} is in none of the FASTA files "
                f"({', '.join(sources)}); write source:contig for one source's contig"
            )
        if len(holders) > 1:
            raise GoatDNAError(
                f"--split-bed: contig {chrom!r} is in several FASTA files "
                f"({', '.join(holders)}): write it as source:contig, e.g. {holders[0]}:{chrom}"
            )
        return chrom if holders[0] == name else None

    return contig_of


def unique_names(
    sources: Mapping[str, set[str]], plans: Mapping[str, Sequence[PlannedRecord]]
) -> dict[str, dict[str, str]]:
    """Per source, its kept contigs renamed ``source:contig`` because another FASTA has a contig
    of that name too (kept or not: a name never means two things across the dataset's files)."""
    holders: dict[str, list[str]] = {}
    for source, contigs in sources.items():
        for contig in contigs:
            holders.setdefault(contig, []).append(source)
    clash = {contig for contig, where in holders.items() if len(where) > 1}
    renamed = {  # in record order, so the manifest's bytes never depend on set order
        source: {r.name: f"{source}{SEPARATOR}{r.name}" for r in records if r.name in clash}
        for source, records in plans.items()
    }
    plain = {contig for contig, where in holders.items() if len(where) == 1}
    taken = sorted({new for names in renamed.values() for new in names.values()} & plain)
    if taken:  # a contig literally named like a renamed one ("mouse:chr1")
        raise GoatDNAError(
            f"record name {taken[0]!r} would be used twice: rename that contig in its FASTA"
        )
    return renamed
