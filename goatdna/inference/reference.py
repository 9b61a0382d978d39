"""Reference sequence for inference: contig names, lengths and uppercased token ranges of a FASTA.

Built on the project's FASTA reader (`goatdna.data_prep.fasta`: plain, gzip or bgzip, indexed with
pyfaidx, validated per base), so scoring reads exactly the tokens training saw. Inference wants
whole-contig access in genome order (a sorted VCF, a list of regions), so a contig is read once
and kept until another one is asked for. A name that is not in the FASTA gets a suggestion when
the other naming convention (``20`` vs ``chr20``) is there.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from goatdna.data_prep.fasta import ContigInfo, ContigReader, open_fasta
from goatdna.data_prep.tokens import TOKEN_MASK
from goatdna.errors import GoatDNAError


def alternative_name(name: str) -> str:
    """The same contig under the other naming convention: ``chr20`` <-> ``20``, ``chrM`` <-> ``MT``."""
    if name in ("chrM", "MT"):
        return "MT" if name == "chrM" else "chrM"
    return name[3:] if name.startswith("chr") else "chr" + name


class ReferenceGenome:
    """Random access to a reference FASTA as uppercased tokens (A=0 C=1 G=2 T=3 N=4)."""

    def __init__(self, path: str | Path, cache_dir: str | Path, quiet: bool = False) -> None:
        self.path = Path(path)
        self.source = open_fasta(
            self.path, Path(cache_dir), message=(lambda _m: None) if quiet else print
        )
        self._by_name: dict[str, ContigInfo] = {c.name: c for c in self.source.contigs}
        self._reader: ContigReader | None = None
        self._cached_name: str | None = None
        self._cached_tokens: np.ndarray | None = None

    @property
    def names(self) -> list[str]:
        return list(self._by_name)

    def has(self, name: str) -> bool:
        return name in self._by_name

    def length(self, name: str) -> int:
        return self._info(name).length

    def suggestion(self, name: str) -> str | None:
        """The FASTA's name for ``name`` under the other convention, when the FASTA has it."""
        other = alternative_name(name)
        return other if other in self._by_name else None

    def missing_message(self, name: str) -> str:
        """Why ``name`` cannot be read, with the other convention's name when that exists."""
        other = self.suggestion(name)
        hint = (
            f"; the FASTA names it {other!r} (rename the contigs of one file, e.g. with "
            "bcftools annotate --rename-chrs)"
            if other
            else f" (it has {', '.join(self.names[:5])}{', ...' if len(self.names) > 5 else ''})"
        )
        return f"contig {name!r} is not in {self.path.name}{hint}"

    def _info(self, name: str) -> ContigInfo:
        info = self._by_name.get(name)
        if info is None:
            raise GoatDNAError(self.missing_message(name))
        return info

    def contig_tokens(self, name: str) -> np.ndarray:
        """All bases of contig ``name`` as uppercased tokens (uint8); the last contig stays cached."""
        if self._cached_name != name:
            info = self._info(name)
            if self._reader is None:
                self._reader = self.source.open_reader()
            raw = self._reader.read_tokens(info, 0, info.length)
            self._cached_tokens = np.frombuffer(raw, dtype=np.uint8) & TOKEN_MASK
            self._cached_name = name
        assert self._cached_tokens is not None
        return self._cached_tokens

    def fetch(self, name: str, start: int, end: int) -> np.ndarray:
        """Uppercased tokens of bases [start, end) of ``name`` (0-based, clipped at the ends)."""
        tokens = self.contig_tokens(name)
        return tokens[max(0, start) : max(0, min(end, tokens.size))]

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
