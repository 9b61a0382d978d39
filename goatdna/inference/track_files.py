"""The files of `goatdna score-track`: the bigWig/bedGraph writers.

Tracks are written only when every block of values is scored (the blocks are units of
`goatdna.workdir.WorkDir` work until then), through `open_track`: a temporary name renamed into
place, so an interrupted run leaves no output file.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, TextIO

import numpy as np

from goatdna.atomic import atomic_path
from goatdna.errors import GoatDNAError

BIGWIG_SUFFIXES = (".bw", ".bigwig")
BEDGRAPH_SUFFIXES = (".bedgraph", ".bg")
DEFAULT_ZOOM_LEVELS = 10


def output_kind(path: Path) -> str:
    """'bigwig' or 'bedgraph' from the --out name."""
    suffix = path.suffix.lower()
    if suffix in BIGWIG_SUFFIXES:
        return "bigwig"
    if suffix in BEDGRAPH_SUFFIXES:
        return "bedgraph"
    raise GoatDNAError(
        f"--out {path}: unknown extension {path.suffix or '(none)'}; use .bw/.bigWig or .bedGraph"
    )


def output_paths(out: Path, what: Sequence[str]) -> dict[str, Path]:
    """One file per quantity: --out itself for one, ``NAME.<what>.ext`` beside it for several."""
    output_kind(out)
    if len(what) == 1:
        return {what[0]: out}
    return {w: out.with_name(f"{out.stem}.{w}{out.suffix}") for w in what}


def _runs(values: np.ndarray) -> Iterator[tuple[int, int]]:
    """[lo, hi) stretches of consecutive non-NaN values."""
    ok = ~np.isnan(values)
    if not ok.any():
        return
    edges = np.flatnonzero(np.diff(np.concatenate([[False], ok, [False]]).astype(np.int8)))
    for lo, hi in zip(edges[::2], edges[1::2], strict=True):
        yield int(lo), int(hi)


class _BigWigWriter(Protocol):
    """What `TrackWriter` uses of a ``pyBigWig`` file opened for writing (pyBigWig is untyped)."""

    def addHeader(self, chroms: list[tuple[str, int]], maxZooms: int) -> None: ...  # noqa: N802

    def addEntries(  # noqa: N802
        self, chrom: str, start: int, values: np.ndarray, span: int, step: int
    ) -> None: ...

    def close(self) -> None: ...


class TrackWriter:
    """Writes one track file at ``path`` (a temporary name: `open_track` renames it when done)."""

    def __init__(
        self,
        path: Path,
        kind: str,
        chrom_sizes: list[tuple[str, int]],
        name: str,
        zoom_levels: int = DEFAULT_ZOOM_LEVELS,
    ) -> None:
        self._bw: _BigWigWriter | None = None
        self._text: TextIO | None = None
        if kind == "bigwig":
            import pyBigWig

            bw: _BigWigWriter = pyBigWig.open(str(path), "w")
            self._bw = bw
            # Zoom levels (summaries for zoomed-out browser views) are computed by libBigWig when
            # the file closes, from one contig's values at a time held in memory (~12 bytes per
            # base); zoom_levels=0 writes none and keeps memory flat.
            bw.addHeader(chrom_sizes, maxZooms=zoom_levels)
        else:
            text = open(path, "w")  # noqa: SIM115 - closed in close()
            self._text = text
            text.write(f'track type=bedGraph name="{name}" description="{name}"\n')

    def add(self, contig: str, start: int, values: np.ndarray) -> None:
        """Values of bases start, start+1, ... of ``contig``; NaN bases are left out."""
        for lo, hi in _runs(values):
            if self._bw is not None:
                self._bw.addEntries(
                    contig, start + lo, values=values[lo:hi].astype(np.float64), span=1, step=1
                )
            else:  # 64k lines at a time, so the text never holds more than a few MB
                assert self._text is not None, "TrackWriter.add after close()"
                for a in range(lo, hi, 1 << 16):
                    b = min(a + (1 << 16), hi)
                    lines = [
                        f"{contig}\t{p}\t{p + 1}\t{v:.7g}\n"
                        for p, v in zip(
                            range(start + a, start + b), values[a:b].tolist(), strict=True
                        )
                    ]
                    self._text.write("".join(lines))

    def close(self) -> None:
        if self._bw is not None:
            self._bw.close()
            self._bw = None
        if self._text is not None:
            self._text.close()
            self._text = None


@contextmanager
def open_track(
    path: Path,
    chrom_sizes: list[tuple[str, int]],
    name: str,
    zoom_levels: int = DEFAULT_ZOOM_LEVELS,
) -> Iterator[TrackWriter]:
    """A `TrackWriter` on a temporary name beside ``path``, renamed into place when the block
    ends without an error (`goatdna.atomic.atomic_path`) and removed otherwise."""
    kind = output_kind(path)
    with atomic_path(path) as tmp:
        writer = TrackWriter(tmp, kind, chrom_sizes, name, zoom_levels)
        try:
            yield writer
        finally:
            writer.close()
