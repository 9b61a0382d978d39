"""How fast is `goatdna prepare` next to the floor of just reading the bases?

Makes a multi-contig FASTA (default 100 Mbp, 60-column lines, lowercase repeat runs, N gaps),
indexes it once, warms the page cache, then times side by side in one run:

* floor: pyfaidx fetches every contig in 16 Mbp chunks and maps the letters through a numpy
  lookup table (`tokens.BYTE_LUT`) -- the least any prepare must do;
* prepare: `prepare_genome` end to end (validation, tokens, per-record counts and sha256, the
  source sha256, writing train/val/test.bin and the manifest), for each --workers value.

Prints Mbp/s, the ratio to the floor (goal >= 0.5) and the projected time for hg38 (3.1 Gbp).
Usage: python benchmarks/prepare_bench.py [--mbp 100] [--workers 1,2] [--repeats 3] [--dir D]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyfaidx

from goatdna.data_prep import PrepareOptions, prepare_genome
from goatdna.data_prep.tokens import BYTE_LUT

HG38_BASES = 3.1e9
CHUNK = 1 << 24


def make_fasta(path: Path, total: int, n_contigs: int, seed: int = 0) -> None:
    """Random bases, ~50% in lowercase runs of 50..5000 bp, ~1% N in gaps of 1..50 kb."""
    rng = np.random.default_rng(seed)
    upper = np.frombuffer(b"ACGT", dtype=np.uint8)
    lengths = np.full(n_contigs, total // n_contigs)
    lengths[0] += total - lengths.sum()
    with open(path, "wb") as handle:
        for i, length in enumerate(lengths):
            seq = upper[rng.integers(0, 4, length)]
            # lowercase runs: alternate upper/lower segments with random lengths
            seg = rng.integers(50, 5000, length // 500 + 2)
            bounds = np.cumsum(seg)
            bounds = bounds[bounds < length]
            flags = np.zeros(length + 1, dtype=np.int8)
            np.add.at(flags, bounds, 1)
            lower = (np.cumsum(flags[:length]) % 2).astype(bool)
            seq[lower] |= 0x20  # ASCII lowercase
            for _ in range(max(1, length // 5_000_000)):
                gap = int(rng.integers(1_000, 50_000))
                start = int(rng.integers(0, length - gap))
                seq[start : start + gap] = ord("N")
            handle.write(f">chr{i + 1}\n".encode())
            full = length // 60 * 60
            body = seq[:full].reshape(-1, 60)
            lines = np.concatenate([body, np.full((body.shape[0], 1), 10, np.uint8)], axis=1)
            handle.write(lines.tobytes())
            if full < length:
                handle.write(seq[full:].tobytes() + b"\n")


def floor(path: Path) -> float:
    """Seconds to fetch every base with pyfaidx and map it through the numpy lookup table."""
    faidx = pyfaidx.Faidx(str(path))
    start = time.perf_counter()
    checksum = 0
    for name, rec in faidx.index.items():
        for lo in range(0, rec.rlen, CHUNK):
            hi = min(rec.rlen, lo + CHUNK)
            text = faidx.fetch(name, lo + 1, hi).seq
            tokens = BYTE_LUT[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]
            checksum += int(tokens[-1])
    elapsed = time.perf_counter() - start
    faidx.close()
    return elapsed


def prepare_once(path: Path, out: Path, workers: int) -> float:
    if out.exists():
        shutil.rmtree(out)
    options = PrepareOptions(workers=workers, progress=False)
    start = time.perf_counter()
    prepare_genome(path, out, options)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mbp", type=float, default=100.0, help="FASTA size in Mbp")
    parser.add_argument("--contigs", type=int, default=8)
    parser.add_argument("--workers", default="1,2", help="comma-separated --workers values")
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs")
    parser.add_argument("--dir", type=Path, default=None, help="scratch directory")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="prepare_bench_", dir=args.dir))
    try:
        total = int(args.mbp * 1e6)
        fasta = scratch / "bench.fa"
        t0 = time.perf_counter()
        make_fasta(fasta, total, args.contigs)
        pyfaidx.Faidx(str(fasta)).close()  # build the .fai once, outside the timings
        fasta.read_bytes()  # warm the page cache for both sides
        print(
            f"FASTA: {total / 1e6:.0f} Mbp in {args.contigs} contigs, "
            f"{fasta.stat().st_size / 1e6:.0f} MB, made in {time.perf_counter() - t0:.1f}s; "
            f"{os.cpu_count()} CPUs; best of {args.repeats}"
        )
        floor_s = min(floor(fasta) for _ in range(args.repeats))
        rows = [("floor: pyfaidx fetch + numpy LUT", floor_s)]
        for workers in (int(w) for w in args.workers.split(",")):
            best = min(prepare_once(fasta, scratch / "out", workers) for _ in range(args.repeats))
            rows.append((f"prepare --workers {workers}", best))
        floor_rate = total / 1e6 / floor_s
        print()
        print("| method | seconds | Mbp/s | ratio to floor | projected hg38 (3.1 Gbp) |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for label, seconds in rows:
            rate = total / 1e6 / seconds
            hg38 = HG38_BASES / 1e6 / rate
            print(
                f"| {label} | {seconds:.2f} | {rate:.0f} | {rate / floor_rate:.2f} | "
                f"{hg38:.0f} s ({hg38 / 60:.1f} min) |"
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
