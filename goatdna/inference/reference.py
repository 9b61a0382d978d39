"""The reference genome for inference: contig sizes, region reads as tokens, naming hints.

Built on `goatdna.data_prep.fasta` (plain, gzip or bgzip FASTA, indexed with pyfaidx, validated
per base), so inference reads a FASTA exactly as `goatdna prepare` does. A plain-gzip FASTA cannot
be read at random offsets; it is decompressed once into a cache folder (``$GOATDNA_CACHE``, else
``$XDG_CACHE_HOME/goatdna``, else ``~/.cache/goatdna``) and reused while the source is unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from goatdna.data_prep.fasta import ContigInfo, FastaSource, open_fasta
from goatdna.data_prep.tokens import TOKEN_MASK
from goatdna.errors import GoatDNAError


def default_cache_dir() -> Path:
    """Where decompressed copies of plain-gzip FASTA files go."""
    if os.environ.get("GOATDNA_CACHE"):
        return Path(os.environ["GOATDNA_CACHE"]) / "fasta"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "goatdna" / "fasta"


def alternative_contig_name(name: str, names: set[str]) -> str | None:
    """The same contig under the other naming style, when the reference has it.

    UCSC names chromosomes ``chr20``/``chrM``; Ensembl and GRCh37 (b37, hs37d5) use ``20``/``MT``.
    """
    candidates = []
    if name.startswith("chr"):
        bare = name[3:]
        candidates.append("MT" if bare == "M" else bare)
    else:
        candidates.append("chrM" if name == "MT" else "chr" + name)
    for candidate in candidates:
        if candidate in names:
            return candidate
    return None


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
            self.path, cache_dir or default_cache_dir(), message or (lambda _text: None)
        )
        self._contigs = {info.name: info for info in self.source.contigs}
        self._reader = self.source.open_reader()

    @property
    def contig_names(self) -> list[str]:
        """Contig names in FASTA order (the order tracks are written in)."""
        return [info.name for info in self.source.contigs]

    def chrom_sizes(self) -> list[tuple[str, int]]:
        """(name, length) of every contig, in FASTA order: the bigWig header."""
        return [(info.name, info.length) for info in self.source.contigs]

    def contig(self, name: str, where: str = "") -> ContigInfo:
        """The named contig; a missing one says which name the FASTA uses instead, if any."""
        info = self._contigs.get(name)
        if info is not None:
            return info
        prefix = f"{where}: " if where else ""
        other = alternative_contig_name(name, set(self._contigs))
        hint = (
            f"; the FASTA names it {other!r} (use {other!r} or rename the contigs)"
            if other
            else f"; it has {self._describe_names()}"
        )
        raise GoatDNAError(f"{prefix}contig {name!r} is not in {self.path.name}{hint}")

    def _describe_names(self) -> str:
        names = self.contig_names
        shown = ", ".join(repr(n) for n in names[:5])
        more = f" and {len(names) - 5} more" if len(names) > 5 else ""
        return f"contigs {shown}{more}"

    def read(self, contig: ContigInfo, start: int, end: int) -> np.ndarray:
        """Tokens A C G T N = 0..4 (uint8, soft-mask flag removed) of bases [start, end)."""
        raw = self._reader.read_tokens(contig, start, end)
        return np.frombuffer(raw, dtype=np.uint8) & TOKEN_MASK

    def read_soft_mask(self, contig: ContigInfo, start: int, end: int) -> np.ndarray:
        """True where the base of [start, end) is lowercase (soft-masked) in the FASTA."""
        raw = self._reader.read_tokens(contig, start, end)
        return (np.frombuffer(raw, dtype=np.uint8) & ~np.uint8(TOKEN_MASK)) != 0

    def close(self) -> None:
        self._reader.close()

    def __enter__(self) -> Reference:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
