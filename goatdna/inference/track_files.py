"""The files of `goatdna score-track`: the resumable spool of finished values and the
bigWig/bedGraph writers that turn it into tracks.

Values are spooled block by block while the regions are scored (`Spool`, ``.OUT.partial/``) and
written as tracks only when every block is there (`open_track`, a temporary name renamed into
place), so an interrupted run leaves no output file and ``--resume`` loses no finished block.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TextIO

import numpy as np

from goatdna.atomic import atomic_path, atomic_write_text
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


class Spool:
    """Finished values on disk, so an interrupted run can continue (``--resume``).

    ``.<out name>.partial/`` beside the output holds one raw float32 file per quantity (the values
    of every region in order, NaN = no value) and ``state.json``: what the run was asked
    (``fingerprint``), how many stream blocks are complete and how many values they hold. Blocks
    are appended and ``state.json`` is replaced after each, so after a crash the files are cut back
    to the last complete block. The output files are made from the spool at the end, then it goes.

    On several devices a rank whose blocks do not continue the spool writes them to a spool of
    their own, ``run-<first block>/`` inside it (same layout); `absorb_runs` appends such runs to
    the main spool once they line up, so a resumed run keeps every rank's finished blocks.
    """

    VERSION = 1

    def __init__(
        self, folder: Path, what: Sequence[str], fingerprint: dict[str, Any], first: int = 0
    ) -> None:
        self.dir = folder
        self.what = tuple(what)
        self.fingerprint = fingerprint
        self.first = first  # global index of this spool's first block (a run's; 0 for the main)
        self.blocks = 0
        self.values = 0
        self._files: dict[str, Any] = {}

    @classmethod
    def for_output(cls, out: Path, what: Sequence[str], fingerprint: dict[str, Any]) -> Spool:
        return cls(out.with_name(f".{out.name}.partial"), what, fingerprint)

    def _path(self, what: str) -> Path:
        return self.dir / f"values.{what}.f32"

    def open(self, resume: bool, message: Callable[[str], None]) -> list[range]:
        """Start (or with ``resume`` continue) the spool; returns the finished global blocks
        (its own complete blocks first, then other runs that do not line up yet)."""
        state_path = self.dir / "state.json"
        if resume and state_path.is_file():
            problem = self._load()
            if problem is not None:
                raise GoatDNAError(f"--resume: {problem}; rerun without --resume to start over")
            self._open_files()
            finished = [range(0, self.blocks), *self.absorb_runs()]
            message(
                f"resuming: {sum(len(r) for r in finished)} block(s) already scored "
                f"({self.values:,} bases in order)"
            )
            return finished
        if resume:
            message(f"--resume: no partial track at {self.dir}; starting from the beginning")
        self.start()
        return [range(0, 0)]

    def start(self) -> None:
        """An empty spool (whatever was in its folder goes)."""
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        for what in self.what:
            self._path(what).touch()
        self._save()
        self._open_files()

    def _load(self) -> str | None:
        """Read ``state.json`` and cut the values back to it; None, or why it cannot be used."""
        state_path = self.dir / "state.json"
        try:
            state = json.loads(state_path.read_text())
        except (OSError, ValueError):
            state = {}
        if state.get("version") != self.VERSION or state.get("fingerprint") != self.fingerprint:
            changed = sorted(
                key
                for key in set(self.fingerprint) | set(state.get("fingerprint") or {})
                if (state.get("fingerprint") or {}).get(key) != self.fingerprint.get(key)
            )
            return (
                f"the partial track in {self.dir} was made with other inputs "
                f"({', '.join(changed) or 'format'} differ)"
            )
        self.blocks, self.values = int(state["blocks"]), int(state["values"])
        for what in self.what:
            path = self._path(what)
            if not path.is_file() or path.stat().st_size < self.values * 4:
                return f"{path} is missing or shorter than {state_path.name} says"
            with open(path, "r+b") as handle:
                handle.truncate(self.values * 4)
        return None

    def _open_files(self) -> None:
        self._files = {what: open(self._path(what), "ab") for what in self.what}  # noqa: SIM115

    def _save(self) -> None:
        state = {
            "version": self.VERSION,
            "fingerprint": self.fingerprint,
            "blocks": self.blocks,
            "values": self.values,
        }
        atomic_write_text(self.dir / "state.json", json.dumps(state, indent=1))

    def append(self, values: dict[str, np.ndarray]) -> None:
        """One complete block: values first, then the state that counts them."""
        for what, handle in self._files.items():
            handle.write(values[what].astype("<f4").tobytes())
            handle.flush()
            os.fsync(handle.fileno())
        self.blocks += 1
        self.values += next(iter(values.values())).size
        self._save()

    def run(self, first: int) -> Spool:
        """A new, empty spool for blocks ``first``, ``first + 1``, ... (another rank's)."""
        run = Spool(self.dir / f"run-{first:09d}", self.what, self.fingerprint, first)
        run.start()
        return run

    def absorb_runs(self) -> list[range]:
        """Append the runs that continue this spool (in order); returns the others' blocks.

        A run that is empty, unreadable or already counted here (a crash between appending it
        and removing it) is removed.
        """
        runs = []
        for folder in sorted(self.dir.glob("run-*")):
            run = Spool(folder, self.what, self.fingerprint, int(folder.name[len("run-") :]))
            if run.first < self.first + self.blocks or run._load() is not None or not run.blocks:
                run.remove()
            else:
                runs.append(run)
        waiting = []
        for run in sorted(runs, key=lambda r: r.first):
            if run.first != self.first + self.blocks:
                waiting.append(range(run.first, run.first + run.blocks))
                continue
            for what, handle in self._files.items():
                with open(run._path(what), "rb") as source:
                    shutil.copyfileobj(source, handle)
                handle.flush()
                os.fsync(handle.fileno())
            self.blocks += run.blocks
            self.values += run.values
            self._save()
            run.remove()
        return waiting

    def read(self, what: str, chunk: int = 1 << 20) -> Iterator[np.ndarray]:
        """The spooled values of one quantity, in order, ``chunk`` at a time."""
        with open(self._path(what), "rb") as handle:
            while True:
                data = handle.read(chunk * 4)
                if not data:
                    return
                yield np.frombuffer(data, dtype="<f4")

    def close(self) -> None:
        for handle in self._files.values():
            handle.close()
        self._files = {}

    def remove(self) -> None:
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)
