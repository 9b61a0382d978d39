"""Per-base track files: the bigWig writer (pybigtools) and the bedGraph writer, one home each.

Every command that writes a track (`goatdna score-track`, `attribute`, `mutagenesis`) writes it
through `open_track`: a temporary name renamed into place, so an interrupted run or a failed
write (a full disk included) leaves no output file. The callers write only when every block of
values is computed (their blocks are units of `goatdna.workdir.WorkDir` work until then).
goatdna reads no bigWig itself: the tests read these files back with pyBigWig and pybigtools.
"""

from __future__ import annotations

import os
import queue
import struct
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import repeat
from pathlib import Path
from typing import TextIO

import numpy as np

from goatdna.atomic import atomic_path, disk_full_error, free_bytes
from goatdna.errors import GoatDNAError
from goatdna.formats import output_format

TRACK_SUFFIXES = (".bw", ".bigWig", ".bedGraph", ".bg")
DEFAULT_ZOOM_LEVELS = 10


def output_kind(path: Path) -> str:
    """'bigwig' or 'bedgraph' from the --out name (`goatdna.formats.output_format`)."""
    return output_format(path, TRACK_SUFFIXES).kind


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


class _BigWigStream:
    """A bigWig written by pybigtools (the Rust bigtools) from values pushed block by block.

    pybigtools' writer pulls ``(contig, start, end, value)`` items from an iterator until it
    ends and computes the header summary and every zoom level exactly as it goes (libBigWig,
    used before, wrote a header max of 2.2e-308 for all-negative tracks and corrupt last zoom
    records). The writers push blocks (`TrackWriter.add`), so the writer runs on a thread of
    its own over a bounded queue of blocks: memory stays a few blocks plus bigtools' own
    buffers (flat in the track length: benchmarks/README.md, "bigWig writer").

    pybigtools (0.2, 0.3) prints some failures instead of raising them and panics on a failed write
    (a full disk): `close` checks that the writer took every value and that the file's header
    counts them, and turns any failure into one `GoatDNAError`.
    """

    _QUEUE_BLOCKS = 4
    _PIECE = 1 << 16

    def __init__(
        self, path: Path, chrom_sizes: list[tuple[str, int]], zoom_levels: int, shown: Path
    ) -> None:
        import pybigtools

        self.path = path
        self.shown = shown  # the name messages give (path is a temporary one)
        # pybigtools picks the file type from the name, and `atomic_path`'s ends in .tmp
        self._writing = path.with_name(f"{path.name}.bw")
        self.zoom_levels = zoom_levels
        self._chroms = dict(chrom_sizes)
        self._queue: queue.Queue[tuple[str, np.ndarray, np.ndarray] | None] = queue.Queue(
            self._QUEUE_BLOCKS
        )
        self._sent = 0  # values put on the queue
        self._taken_all = False  # the writer read the end marker
        self._failure: BaseException | None = None
        self._writer = pybigtools.open(str(self._writing), "w")
        # started by the first value: a track without any never runs the writer (which cannot
        # write an empty bigWig)
        self._thread = threading.Thread(target=self._write, name="bigwig-writer", daemon=True)

    def _items(self) -> Iterator[tuple[str, int, int, float]]:
        while True:
            block = self._queue.get()
            if block is None:
                self._taken_all = True
                return
            contig, starts, values = block
            ends = (starts + 1).tolist()
            yield from zip(
                repeat(contig, starts.size), starts.tolist(), ends, values.tolist(), strict=True
            )

    def _write(self) -> None:
        try:
            self._writer.write(self._chroms, self._items())
        except BaseException as err:  # a Rust panic arrives as a BaseException
            self._failure = err

    def _put(self, block: tuple[str, np.ndarray, np.ndarray] | None) -> bool:
        """Queue ``block``; False when the writer thread has stopped (it takes no more)."""
        if self._thread.ident is None:
            self._thread.start()
        while self._thread.is_alive():
            try:
                self._queue.put(block, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    def add(self, contig: str, positions: np.ndarray, values: np.ndarray) -> None:
        # queued in pieces of _PIECE values (copies, so a caller's large block is not kept
        # alive by the queue): the writer thread turns one piece at a time into Python tuples
        for lo in range(0, positions.size, self._PIECE):
            piece = (
                contig,
                positions[lo : lo + self._PIECE].copy(),
                values[lo : lo + self._PIECE].astype(np.float64),
            )
            if not self._put(piece):
                self.close()  # raises the writer's failure
            self._sent += piece[1].size

    def close(self) -> None:
        """Finish the file; raises `GoatDNAError` if pybigtools did not write all of it."""
        self._end()
        problem = self._problem()
        if problem is not None:
            full = _nearly_full(self.path)  # before the partial file goes and frees its space
            self._writing.unlink(missing_ok=True)
            if full:
                raise disk_full_error(self.shown, None, "rerun the command")
            raise GoatDNAError(f"writing bigWig {self.shown}: {problem}")
        if self.zoom_levels < _zoom_count(self._writing):
            _cap_zoom_levels(self._writing, self.zoom_levels)
        os.replace(self._writing, self.path)

    def abort(self) -> None:
        """Stop after an error elsewhere: the writer ends early and its file is removed."""
        self._end()
        self._writing.unlink(missing_ok=True)

    def _end(self) -> None:
        """The end marker, then wait for the writer thread to finish the file."""
        if self._thread.is_alive():
            self._put(None)
            self._thread.join()
        else:
            self._writer.close()

    def _problem(self) -> str | None:
        if self._failure is not None:
            return f"pybigtools failed ({str(self._failure).splitlines()[0] or 'no message'})"
        if not self._sent:
            return "no base of the regions has a value (all N?); a bigWig needs one, use .bedGraph"
        if not self._taken_all:
            return "pybigtools stopped before the last value (see its message above)"
        covered = _bases_covered(self._writing)
        if covered != self._sent:
            return f"the file counts {covered} bases, {self._sent:,} were written"
        return None


def _nearly_full(path: Path) -> bool:
    """Under 1 MiB free beside ``path`` or in the temporary folder (where bigtools buffers):
    pybigtools reports a full disk only as a panic, so a failed write is read this way."""
    free = [free_bytes(folder) for folder in (path.parent, Path(tempfile.gettempdir()))]
    return any(f is not None and f < 1 << 20 for f in free)


# The 64-byte bbi header (Kent et al. 2010, Bioinformatics 26:2204, supplement): magic u32,
# version u16, zoomLevels u16, chromTreeOffset, fullDataOffset, fullIndexOffset u64, fieldCount,
# definedFieldCount u16, autoSqlOffset, totalSummaryOffset u64, uncompressBufSize u32,
# extensionOffset u64; the total summary starts with basesCovered u64. Read here to check
# pybigtools' work and to cap the zoom levels.
_BBI_HEADER = struct.Struct("<IHHQQQHHQQIQ")
_BIGWIG_MAGIC = 0x888FFC26


def _header(path: Path) -> tuple[int, ...]:
    with open(path, "rb") as handle:
        fields = _BBI_HEADER.unpack(handle.read(_BBI_HEADER.size))
    if fields[0] != _BIGWIG_MAGIC:
        raise GoatDNAError(f"{path}: not a bigWig (magic {fields[0]:#x})")
    return fields


def _zoom_count(path: Path) -> int:
    return int(_header(path)[2])


def _bases_covered(path: Path) -> int | None:
    try:
        summary_offset = _header(path)[9]
        with open(path, "rb") as handle:
            handle.seek(summary_offset)
            return int(struct.unpack("<Q", handle.read(8))[0])
    except (OSError, struct.error, GoatDNAError):
        return None


def _cap_zoom_levels(path: Path, levels: int) -> None:
    """Keep only the ``levels`` finest zoom levels: readers (UCSC, IGV, pyBigWig, bigtools) read
    ``zoomLevels`` zoom headers, so the coarser levels' records are left unreferenced and
    zoomed-out views are summarised from the finest level kept (or from the bases, for 0)."""
    with open(path, "r+b") as handle:
        handle.seek(6)
        handle.write(struct.pack("<H", levels))
        handle.flush()


class TrackWriter:
    """Writes one track file at ``path`` (a temporary name: `open_track` renames it when done)."""

    def __init__(
        self,
        path: Path,
        kind: str,
        chrom_sizes: list[tuple[str, int]],
        name: str,
        zoom_levels: int = DEFAULT_ZOOM_LEVELS,
        shown: Path | None = None,  # the output's own name, for messages
    ) -> None:
        self._bw: _BigWigStream | None = None
        self._text: TextIO | None = None
        if kind == "bigwig":
            self._bw = _BigWigStream(path, chrom_sizes, zoom_levels, shown or path)
        else:
            text = open(path, "w")  # noqa: SIM115 - closed in close()
            self._text = text
            text.write(f'track type=bedGraph name="{name}" description="{name}"\n')

    def add(self, contig: str, start: int, values: np.ndarray) -> None:
        """Values of bases start, start+1, ... of ``contig``; NaN bases are left out."""
        if self._bw is not None:
            kept = np.flatnonzero(~np.isnan(values))
            if kept.size:
                self._bw.add(contig, kept + start, values[kept])
            return
        assert self._text is not None, "TrackWriter.add after close()"
        for lo, hi in _runs(
            values
        ):  # 64k lines at a time, so the text never holds more than a few MB
            for a in range(lo, hi, 1 << 16):
                b = min(a + (1 << 16), hi)
                lines = [
                    f"{contig}\t{p}\t{p + 1}\t{v:.7g}\n"
                    for p, v in zip(range(start + a, start + b), values[a:b].tolist(), strict=True)
                ]
                self._text.write("".join(lines))

    def close(self) -> None:
        """Finish the file (a bigWig is checked here: `GoatDNAError` if it is incomplete)."""
        if self._bw is not None:
            bw, self._bw = self._bw, None
            bw.close()
        if self._text is not None:
            self._text.close()
            self._text = None

    def abort(self) -> None:
        """Stop writing after an error elsewhere (the caller removes the file)."""
        if self._bw is not None:
            bw, self._bw = self._bw, None
            bw.abort()
        self.close()


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
        writer = TrackWriter(tmp, kind, chrom_sizes, name, zoom_levels, shown=path)
        try:
            yield writer
        except BaseException:
            writer.abort()
            raise
        writer.close()
