"""The reference genome for inference: contig sizes, token reads of any range, naming hints.

Built on `goatdna.io.fasta` (plain, gzip or bgzip FASTA, indexed with pyfaidx, validated
per base), so inference reads a FASTA exactly as `goatdna prepare` does. A plain-gzip FASTA cannot
be read at random offsets; it is decompressed once into a cache folder (``$GOATDNA_CACHE``, else
``$XDG_CACHE_HOME/goatdna``, else ``~/.cache/goatdna``, or the folder the caller names) and reused
while the source is unchanged.

Two access patterns share one reader: tracks stream ranges of a region (`read`), variant scoring
walks a sorted VCF and keeps the current contig in memory (`fetch`, `contig_tokens`). A name
that is not in the FASTA gets a suggestion when the other naming convention (``20`` vs ``chr20``)
is there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from goatdna.errors import GoatDNAError
from goatdna.io.fasta import (
    ContigInfo,
    ContigReader,
    FastaSource,
    default_cache_dir,
    open_fasta,
)
from goatdna.io.tokens import TOKEN_MASK


def alternative_contig_name(name: str, names: set[str]) -> str | None:
    """The same contig under the other naming style, when the reference has it.

    UCSC names chromosomes ``chr20``/``chrM``; Ensembl and GRCh37 (b37, hs37d5) use ``20``/``MT``.
    """
    if name.startswith("chr"):
        bare = name[3:]
        candidate = "MT" if bare == "M" else bare
    else:
        candidate = "chrM" if name == "MT" else "chr" + name
    return candidate if candidate in names else None


class Reference:
    """A FASTA opened for random access: contig lengths and token reads of any range."""

    def __init__(
        self,
        fasta: str | Path,
        cache_dir: Path | None = None,
        message: Callable[[str], None] | None = None,
    ) -> None:
        self.path = Path(fasta)
        self.source: FastaSource = open_fasta(
            self.path, Path(cache_dir) if cache_dir else default_cache_dir(),
            message or (lambda _text: None),
        )  # fmt: skip
        self._contigs = {info.name: info for info in self.source.contigs}
        self._reader: ContigReader | None = None
        self._cached_name: str | None = None
        self._cached_tokens: np.ndarray | None = None

    # ------------------------------------------------------------------ names and sizes
    @property
    def contig_names(self) -> list[str]:
        """Contig names in FASTA order (the order tracks are written in)."""
        return [info.name for info in self.source.contigs]

    def chrom_sizes(self) -> list[tuple[str, int]]:
        """(name, length) of every contig, in FASTA order: the bigWig header."""
        return [(info.name, info.length) for info in self.source.contigs]

    def has(self, name: str) -> bool:
        return name in self._contigs

    def length(self, name: str) -> int:
        return self.contig(name).length

    def suggestion(self, name: str) -> str | None:
        """The FASTA's name for ``name`` under the other convention, when the FASTA has it."""
        return alternative_contig_name(name, set(self._contigs))

    def missing_message(self, name: str) -> str:
        """Why ``name`` cannot be read, with the other convention's name when that exists."""
        other = self.suggestion(name)
        if other:
            hint = (
                f"; the FASTA names it {other!r} (use {other!r}, or rename the contigs of one "
                "file, e.g. with bcftools annotate --rename-chrs)"
            )
        else:
            names = self.contig_names
            shown = ", ".join(repr(n) for n in names[:5])
            more = f" and {len(names) - 5} more" if len(names) > 5 else ""
            hint = f"; it has contigs {shown}{more}"
        return f"contig {name!r} is not in {self.path.name}{hint}"

    def contig(self, name: str, where: str = "") -> ContigInfo:
        """The named contig; a missing one says which name the FASTA uses instead, if any."""
        info = self._contigs.get(name)
        if info is None:
            prefix = f"{where}: " if where else ""
            raise GoatDNAError(prefix + self.missing_message(name))
        return info

    # ------------------------------------------------------------------ reads
    def _open_reader(self) -> ContigReader:
        if self._reader is None:
            self._reader = self.source.open_reader()
        return self._reader

    def read(self, contig: ContigInfo, start: int, end: int) -> np.ndarray:
        """Tokens A C G T N = 0..4 (uint8, soft-mask flag removed) of bases [start, end)."""
        raw = self._open_reader().read_tokens(contig, start, end)
        return np.frombuffer(raw, dtype=np.uint8) & TOKEN_MASK

    def read_soft_mask(self, contig: ContigInfo, start: int, end: int) -> np.ndarray:
        """True where the base of [start, end) is lowercase (soft-masked) in the FASTA."""
        raw = self._open_reader().read_tokens(contig, start, end)
        return (np.frombuffer(raw, dtype=np.uint8) & ~np.uint8(TOKEN_MASK)) != 0

    def contig_tokens(self, name: str) -> np.ndarray:
        """All bases of contig ``name`` as uppercased tokens (uint8); the last contig stays cached
        (a sorted VCF asks for one contig after another)."""
        if self._cached_name != name:
            info = self.contig(name)
            self._cached_tokens = self.read(info, 0, info.length)
            self._cached_name = name
        assert self._cached_tokens is not None
        return self._cached_tokens

    def fetch(self, name: str, start: int, end: int) -> np.ndarray:
        """Uppercased tokens of bases [start, end) of ``name`` (0-based, clipped at the ends)."""
        tokens = self.contig_tokens(name)
        return tokens[max(0, start) : max(0, min(end, tokens.size))]

    # ------------------------------------------------------------------ lifetime
    def __getstate__(self) -> dict:
        """Picklable for spawned workers: the open reader and the cached contig stay behind."""
        state = dict(self.__dict__)
        state.update(_reader=None, _cached_name=None, _cached_tokens=None)
        return state

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self._cached_name, self._cached_tokens = None, None

    def __enter__(self) -> Reference:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_region(fasta: Path, region: str, cache_dir: Path | None = None) -> tuple[np.ndarray, str]:
    """The tokens of ``--region`` (``contig:start-end``, 1-based inclusive) of ``--fasta`` and
    the region's label; a region past its contig's end is refused."""
    from goatdna.io.regions import parse_region

    where = parse_region(region)
    if not fasta.is_file():
        raise GoatDNAError(f"--fasta {fasta}: not found")
    with Reference(fasta, cache_dir) as reference:
        info = reference.contig(where.contig, where=f"--region {where.label}")
        if where.end > info.length:
            raise GoatDNAError(
                f"--region {where.label}: ends beyond contig {info.name!r} ({info.length:,} bases)"
            )
        return reference.read(info, where.start, where.end), where.label
