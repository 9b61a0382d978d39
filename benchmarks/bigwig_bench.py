"""score-track's bigWig writer alone: peak memory and values/s by track length.

`write_tracks` ends by reading the spool back 1M values at a time and pushing them through
`open_track(...).add` (`goatdna.inference.tracks._assemble`); this does the same with synthetic
all-negative values (log-probabilities' range, 0.1% NaN), one contig, each size in a fresh
subprocess, and reports peak RSS (ru_maxrss), its growth over the RSS just before writing, and
values per second. Side by side in the same run: libBigWig (pyBigWig's ``addEntries`` with the
same blocks, the writer score-track used before, whose summaries were wrong) for the speed ratio,
and the bedGraph writer as the flat-memory baseline.

    python benchmarks/bigwig_bench.py [--sizes 1,10,40] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from goatdna.io.bigwig import open_track  # noqa: E402

BLOCK = 1 << 20  # values per add(), as Spool.read hands them to _assemble
VARIANTS = ("pybigtools (goatdna)", "pybigtools, --zoom-levels 0", "libBigWig (before)", "bedGraph")


def _blocks(n: int):
    rng = np.random.default_rng(0)
    for lo in range(0, n, BLOCK):
        values = -rng.gamma(2.0, 0.7, min(BLOCK, n - lo)).astype(np.float32)
        values[rng.random(values.size) < 1e-3] = np.nan
        yield lo, values


def _current_rss_mib() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(size_mbp: int, variant: str, folder: Path) -> None:
    n = size_mbp * 1_000_000
    chroms = [("chr1", n)]
    import pyBigWig  # imported before measuring in every variant, so the baselines match

    before = _current_rss_mib()
    start = time.perf_counter()
    if variant == "libBigWig (before)":
        bw = pyBigWig.open(str(folder / "b.bw"), "w")
        bw.addHeader(chroms, maxZooms=10)
        for lo, values in _blocks(n):
            keep = np.flatnonzero(~np.isnan(values))
            bw.addEntries("chr1", (keep + lo).tolist(), values=values[keep].astype(np.float64),
                          span=1)  # fmt: skip
        bw.close()
    else:
        out = folder / ("t.bedGraph" if variant == "bedGraph" else "t.bw")
        zooms = 0 if "0" in variant else 10
        with open_track(out, chroms, "bench", zooms) as writer:
            for lo, values in _blocks(n):
                writer.add("chr1", lo, values)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    size = sum(p.stat().st_size for p in folder.iterdir())
    print(json.dumps({"mbp": size_mbp, "variant": variant, "before": before, "peak": peak,
                      "seconds": seconds, "bytes": size}))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,40")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1], Path(os.environ["BENCH_DIR"]))
        return
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        for variant in VARIANTS:
            with tempfile.TemporaryDirectory() as folder:
                env = {**os.environ, "BENCH_DIR": folder}
                done = subprocess.run(
                    [sys.executable, __file__, "--child", str(size), variant],
                    capture_output=True, text=True, env=env, check=True,
                )  # fmt: skip
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(
        "| writer | values | seconds | M values/s | RSS before MiB | peak MiB | growth MiB | file MiB |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(
            f"| {r['variant']} | {r['mbp']} M | {r['seconds']:.1f} | {r['mbp'] / r['seconds']:.2f} "
            f"| {r['before']:.0f} | {r['peak']:.0f} | {r['peak'] - r['before']:.0f} "
            f"| {r['bytes'] / 2**20:.0f} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
