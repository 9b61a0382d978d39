"""The track writers of `goatdna.io.bigwig` (score-track, attribute and mutagenesis write through
them): a bigWig's header summary and every zoom level equal numpy's over the written values
(all-negative tracks, NaN gaps, regions ending off a zoom boundary), read back with readers other
than the writer (pyBigWig's libBigWig, and the header parsed here), and a failed write leaves no
file behind."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pybigtools
import pyBigWig
import pytest

from goatdna.errors import GoatDNAError
from goatdna.io.bigwig import open_track

REPO = Path(__file__).resolve().parents[1]
CHROMS = [("chrA", 5000), ("chrB", 90), ("chrC", 720_000)]


def _tracks() -> dict[str, tuple[int, np.ndarray]]:
    """Per contig: first base and float32 values (NaN = no value), every value negative."""
    rng = np.random.default_rng(7)
    a = -(rng.random(1003 - 100) * 6 + 0.25).astype(np.float32)  # ends at 1003: off every zoom
    a[200:210] = np.nan  # an N stretch inside a zoom record
    b = -np.arange(1, 18, dtype=np.float32)  # 17 bases, shorter than the finest zoom record
    c = -(rng.gamma(2.0, 1.5, 700_001 - 7) + 1e-3).astype(np.float32)  # 3 zoom levels
    c[400_000:400_500] = np.nan
    return {"chrA": (100, a), "chrB": (5, b), "chrC": (7, c)}


def _write(
    path: Path, zoom_levels: int = 10, block: int = 7777
) -> dict[str, tuple[int, np.ndarray]]:
    tracks = _tracks()
    with open_track(path, CHROMS, "test", zoom_levels) as writer:
        for contig, (first, values) in tracks.items():
            for lo in range(0, values.size, block):  # blocks that cut zoom records anywhere
                writer.add(contig, first + lo, values[lo : lo + block])
    return tracks


def _total_summary(path: Path) -> tuple[int, float, float, float, float]:
    """basesCovered, min, max, sum, sumSquares from the file's own bytes (bbi header: the
    totalSummaryOffset u64 at byte 44), not through any bigWig library."""
    data = path.read_bytes()
    assert struct.unpack_from("<I", data, 0)[0] == 0x888FFC26
    (offset,) = struct.unpack_from("<Q", data, 44)
    return struct.unpack_from("<Qdddd", data, offset)


def _written(tracks: dict[str, tuple[int, np.ndarray]]) -> np.ndarray:
    every = np.concatenate([values for _, values in tracks.values()]).astype(np.float64)
    return every[~np.isnan(every)]


def test_header_summary_equals_numpy_for_an_all_negative_track(tmp_path: Path) -> None:
    out = tmp_path / "t.bw"
    tracks = _write(out)
    values = _written(tracks)
    covered, low, high, total, squares = _total_summary(out)
    assert covered == values.size
    assert low == values.min() and high == values.max() < 0  # libBigWig wrote max 2.2e-308
    assert total == pytest.approx(values.sum(), rel=1e-9)
    assert squares == pytest.approx((values**2).sum(), rel=1e-9)
    with pyBigWig.open(str(out)) as bw:  # libBigWig reading (its writing is what was wrong)
        assert bw.chroms() == dict(CHROMS)
        for contig, (first, expected) in tracks.items():
            got = np.array(bw.values(contig, first, first + expected.size), dtype=np.float32)
            np.testing.assert_array_equal(got, expected)
            ok = expected[~np.isnan(expected)].astype(np.float64)
            mean = bw.stats(contig, first, first + expected.size, type="mean", exact=True)[0]
            assert mean == pytest.approx(ok.mean(), rel=1e-6)


def test_every_zoom_record_equals_numpy_over_its_bases(tmp_path: Path) -> None:
    out = tmp_path / "t.bw"
    tracks = _write(out)
    with pybigtools.open(str(out)) as bw:
        levels = bw.zooms()
        assert levels == [160, 640, 2560]  # bigtools: 160 bp, x4 while a level has enough records
        for level in levels:
            for contig, (first, values) in tracks.items():
                records = list(bw.zoom_records(level, contig))
                covered = 0
                last_end = first
                for start, end, stats in records:
                    assert start >= last_end and end - start <= level  # disjoint, in order
                    last_end = end
                    piece = values[start - first : end - first].astype(np.float64)
                    piece = piece[~np.isnan(piece)]
                    assert stats["bases_covered"] == piece.size > 0, (level, contig, start)
                    assert stats["min_val"] == pytest.approx(piece.min(), abs=0)
                    assert stats["max_val"] == pytest.approx(piece.max(), abs=0)
                    # the format stores float32 sums
                    assert stats["sum"] == pytest.approx(piece.sum(), rel=2e-6)
                    assert stats["sum_squares"] == pytest.approx((piece**2).sum(), rel=2e-6)
                    covered += piece.size
                assert covered == np.count_nonzero(~np.isnan(values)), (level, contig)
                assert last_end == first + values.size  # the last record ends with the data
    # a browser's zoomed-out summaries (pyBigWig reads them from the zoom levels, exact=False)
    with pyBigWig.open(str(out)) as bw:
        first, values = tracks["chrC"]
        ok = values[~np.isnan(values)].astype(np.float64)
        end = first + values.size
        assert bw.stats("chrC", first, end, type="mean")[0] == pytest.approx(ok.mean(), rel=1e-5)
        assert bw.stats("chrC", first, end, type="max")[0] == pytest.approx(ok.max(), rel=1e-6)
        assert bw.stats("chrC", first, end, type="min")[0] == pytest.approx(ok.min(), rel=1e-6)
        # the last 100 bp of chrA: the corrupt last record read -1.115 for -1.328
        first, values = tracks["chrA"]
        tail = values[-100:].astype(np.float64)
        end = first + values.size
        assert bw.stats("chrA", end - 100, end, type="mean", exact=True)[0] == pytest.approx(
            tail.mean(), rel=1e-6
        )


def test_zoom_levels_keeps_the_finest_levels(tmp_path: Path) -> None:
    full, two, none = tmp_path / "full.bw", tmp_path / "two.bw", tmp_path / "none.bw"
    _write(full)
    tracks = _write(two, zoom_levels=2)
    _write(none, zoom_levels=0)
    with pybigtools.open(str(full)) as a, pybigtools.open(str(two)) as b:
        assert b.zooms() == a.zooms()[:2]
        assert list(b.zoom_records(640, "chrC")) == list(a.zoom_records(640, "chrC"))
    first, values = tracks["chrC"]
    ok = values[~np.isnan(values)].astype(np.float64)
    end = first + values.size
    with pybigtools.open(str(none)) as bw:
        assert bw.zooms() == []
    with pyBigWig.open(str(none)) as bw, pyBigWig.open(str(full)) as ref:
        np.testing.assert_array_equal(
            np.array(bw.values("chrC", first, end)), np.array(ref.values("chrC", first, end))
        )
        # no zoom levels: the reader summarises from the bases
        assert bw.stats("chrC", first, end, type="mean")[0] == pytest.approx(ok.mean(), rel=1e-9)


def test_an_error_while_writing_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "t.bw"
    with pytest.raises(RuntimeError, match="stop"), open_track(out, CHROMS, "t", 10) as writer:
        writer.add("chrA", 0, np.full(5000, -1.0, dtype=np.float32))
        raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []


def test_a_track_with_no_value_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "t.bw"
    no_value = pytest.raises(GoatDNAError, match="no base of the regions has a value")
    with no_value, open_track(out, CHROMS, "t", 10) as writer:
        writer.add("chrA", 0, np.full(50, np.nan, dtype=np.float32))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("disk", ["file-size limit", "full"])
def test_a_write_that_fails_midway_is_one_error_and_no_file(tmp_path: Path, disk: str) -> None:
    """The file-size limit makes every write past 64 KiB fail (EFBIG), as a full disk would;
    with no space left beside the output (free_bytes 0) it reads as a full disk."""
    out = tmp_path / "t.bw"
    full = "bigwig.free_bytes = lambda _path: 0" if disk == "full" else ""
    script = textwrap.dedent(
        f"""
        import resource, signal
        from pathlib import Path
        import numpy as np
        from goatdna.errors import GoatDNAError
        from goatdna.io import bigwig
        {full}
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16))
        values = -np.random.default_rng(0).random(1 << 20).astype(np.float32)
        try:
            with bigwig.open_track(Path({str(out)!r}), [("chrA", 1 << 21)], "t") as w:
                for lo in range(0, values.size, 1 << 16):
                    w.add("chrA", lo, values[lo : lo + (1 << 16)])
        except GoatDNAError as err:
            print("error:", err)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "RUST_BACKTRACE": "0"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    start = f"error: disk full while writing {out} " if full else f"error: writing bigWig {out}: "
    assert len(lines) == 1 and lines[0].startswith(start), done.stdout
    assert list(tmp_path.iterdir()) == []
