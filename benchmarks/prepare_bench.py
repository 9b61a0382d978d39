"""How fast is `goatdna prepare` next to the floor of just reading the bases?

Makes a multi-contig FASTA (default 100 Mbp, 60-column lines, lowercase repeat runs, N gaps),
indexes it once, warms the page cache, then times side by side in one run:

* chunked floor: the file read in 16 MiB chunks and mapped through the token table with one
  ``bytes.translate`` that also drops the newlines -- the least any prepare must do (the ratio
  column is relative to it; goal >= 0.1 and >= 200 Mbp/s);
* pyfaidx floor: pyfaidx fetches every contig in 16 Mbp chunks and maps the letters through a
  numpy lookup table (`tokens.BYTE_LUT`), the floor this benchmark used before;
* prepare: `prepare_genome` end to end in this process (validation, tokens, per-record counts
  and sha256, the source sha256, writing train/val/test.bin and the manifest), per --workers,
  and with ``--workers 1`` once more with each record's sha256 and counts computed inline
  instead of in the helper thread that overlaps them with reading (`RecordDigest`; before);
* the CLI: ``goatdna prepare FASTA --out D --workers 1`` as a whole process, and the same
  process's start-up alone (``goatdna --help``), which a command-line timing also pays.

Rounds alternate the methods (so load from other processes hits all alike); each row is the
best round. Prints Mbp/s, the ratio to the chunked floor and the projected time for hg38, in
wall-clock seconds and in CPU seconds (this process's threads, or the child process's): on a
busy machine the CPU seconds estimate what one idle core would take.
Usage: python benchmarks/prepare_bench.py [--mbp 100] [--workers 1,2] [--repeats 3] [--dir D]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyfaidx

from goatdna.data_prep import PrepareOptions, prepare_genome
from goatdna.data_prep import prepare as prepare_module
from goatdna.io.fasta import LINE_BREAKS, TRANSLATE_TABLE
from goatdna.io.tokens import BYTE_LUT

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


def chunked_floor(path: Path) -> float:
    """Seconds to read the file in 16 MiB chunks and translate them, newlines dropped."""
    start = time.perf_counter()
    checksum = 0
    with open(path, "rb", buffering=0) as handle:
        while chunk := handle.read(CHUNK):
            tokens = chunk.translate(TRANSLATE_TABLE, LINE_BREAKS)
            checksum += tokens[-1] if tokens else 0
    return time.perf_counter() - start


def cli_once(args: list[str]) -> float:
    goatdna = Path(sys.executable).with_name("goatdna")
    command = [str(goatdna)] if goatdna.exists() else [sys.executable, "-m", "goatdna.cli.app"]
    start = time.perf_counter()
    subprocess.run(command + args, check=True, capture_output=True)
    return time.perf_counter() - start


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(run: Callable[[], float]) -> tuple[float, float]:
    """(wall seconds ``run`` reports, CPU seconds of this process and its children meanwhile)."""
    cpu, children = time.process_time(), _children_cpu()
    wall = run()
    return wall, time.process_time() - cpu + _children_cpu() - children


def cli_prepare(path: Path, out: Path) -> float:
    shutil.rmtree(out, ignore_errors=True)
    return cli_once(["prepare", str(path), "--out", str(out), "--workers", "1"])


def prepare_once(path: Path, out: Path, workers: int, inline: bool = False) -> float:
    if out.exists():
        shutil.rmtree(out)
    options = PrepareOptions(workers=workers, progress=False)
    digest = prepare_module.RecordDigest
    if inline:  # the helper thread off: hash and count in the reading thread (before)
        prepare_module.RecordDigest = lambda background=False: digest(False)  # type: ignore[misc]
    try:
        start = time.perf_counter()
        prepare_genome(path, out, options)
        return time.perf_counter() - start
    finally:
        prepare_module.RecordDigest = digest  # type: ignore[misc]


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
        methods: dict[str, Callable[[], float]] = {
            "chunked floor: 16 MiB reads + bytes.translate": lambda: chunked_floor(fasta),
            "pyfaidx floor: fetch + numpy LUT": lambda: floor(fasta),
        }
        for workers in (int(w) for w in args.workers.split(",")):
            methods[f"prepare --workers {workers}"] = lambda w=workers: prepare_once(
                fasta, scratch / "out", w
            )
        methods["prepare --workers 1, digest inline (before)"] = lambda: prepare_once(
            fasta, scratch / "out", 1, inline=True
        )
        methods["goatdna prepare --workers 1 (whole process)"] = lambda: cli_prepare(
            fasta, scratch / "cli"
        )
        methods["goatdna --help (start-up alone)"] = lambda: cli_once(["--help"])
        best = dict.fromkeys(methods, (float("inf"), float("inf")))
        for _ in range(args.repeats):
            for label, run in methods.items():
                wall, cpu = timed(run)
                best[label] = (min(best[label][0], wall), min(best[label][1], cpu))
        floor_s, floor_cpu = best["chunked floor: 16 MiB reads + bytes.translate"]
        rows = [(label, t) for label, t in best.items() if "start-up" not in label]
        startup, startup_cpu = best["goatdna --help (start-up alone)"]
        mbp = total / 1e6
        print()
        print(
            "| method | seconds | Mbp/s | ratio to floor | projected hg38 (3.1 Gbp) "
            "| CPU seconds | Mbp per CPU s | CPU ratio to floor |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for label, (seconds, cpu) in rows:
            hg38 = HG38_BASES / 1e6 / (mbp / seconds)
            print(
                f"| {label} | {seconds:.2f} | {mbp / seconds:.0f} | {floor_s / seconds:.2f} | "
                f"{hg38:.0f} s ({hg38 / 60:.1f} min) | {cpu:.2f} | {mbp / cpu:.0f} | "
                f"{floor_cpu / cpu:.2f} |"
            )
        print(f"| goatdna --help (start-up alone) | {startup:.2f} | | | | {startup_cpu:.2f} | | |")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
