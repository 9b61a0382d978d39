"""Does `goatdna prepare` (and training's data path over its output) scale to a whole genome?

For each genome size (default 0.3 and 3.1 Gbp, hg38's size) the benchmark, in a temporary folder:

1. writes a multi-contig FASTA: a block of the synthetic genome (`goatdna.data_prep.synthetic`,
   ``--block-mbp`` Mbp, 60-column lines, soft-masked repeats and N gaps) is generated once and
   tiled into contigs of ``--contig-mbp`` Mbp, so that writing 3.1 Gbp costs disk time, not the
   generator's (the bases repeat; prepare's work does not depend on their variety);
2. measures the read+LUT floor: read the file in 16 MiB blocks and map it through the token table
   with one ``bytes.translate`` (line breaks deleted), single process, page cache warm;
3. builds the `.fai` index (timed apart: once per FASTA), then runs `prepare_genome` in a fresh
   process (default workers) and reports wall time, Mbp/s, the
   ratio to the floor and the peak RSS of the main process and of the largest worker;
4. in another fresh process builds the training window index over train.bin
   (`build_window_index`, ``--seq-len`` + 1 bases, no N) and reports its time, its arrays' size
   and the process's peak RSS, then draws random micro-batches through `WindowSampler.draw` +
   `read_windows` (what each data-loader item does) and reports windows/s against what one H200
   consumes at 400k tokens/s.

Usage: python benchmarks/prepare_scale_bench.py [--sizes 0.3,3.1] [--dir D] [--keep]
(3.1 Gbp needs about 7 GB free in --dir: the FASTA plus the shards.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from goatdna.data_prep.synthetic import SyntheticGenomeConfig, synthetic_fasta_bytes
from goatdna.io.fasta import TRANSLATE_TABLE

H200_TOKENS_PER_S = 400_000
READ_BLOCK = 1 << 24
LINE = 60

# Peak RSS of a process is VmHWM (its own address space since exec); getrusage's ru_maxrss
# would also carry the high-water mark of the benchmark process that forked it.
_HWM = """
def hwm_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
"""

_PREPARE_CHILD = (
    _HWM
    + """
import json, resource, sys, time
from pathlib import Path
from goatdna.data_prep import PrepareOptions, prepare_genome
from goatdna.io.fasta import open_fasta
fasta, out = Path(sys.argv[1]), Path(sys.argv[2])
t0 = time.perf_counter()
open_fasta(fasta, out / "cache", lambda m: None)
fai = time.perf_counter() - t0
t0 = time.perf_counter()
prepare_genome(fasta, out, PrepareOptions(progress=False))
wall = time.perf_counter() - t0
workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"fai": fai, "wall": wall, "rss_main_kib": hwm_kib(), "rss_worker_kib": workers}))
"""
)

_WINDOWS_CHILD = (
    _HWM
    + """
import json, sys, time
import numpy as np
from goatdna.data_prep import ShardedGenome
from goatdna.training.windows import WindowSampler, build_window_index, read_windows
out, seq_len, batch, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
genome = ShardedGenome(out)
tokens = genome.tokens("train")
records = [(r.offset, r.length) for r in genome.records("train")]
rss_imports = hwm_kib()
t0 = time.perf_counter()
index = build_window_index(tokens, records, seq_len + 1)
build = time.perf_counter() - t0
rss_index = hwm_kib()
arrays = index.starts.nbytes + index.counts.nbytes + index.cum_counts.nbytes
sampler = WindowSampler(index, seed=0, batch_size=batch)
t0 = time.perf_counter()
for step in range(steps):
    starts, flips = sampler.draw(step, 0)
    read_windows(tokens, starts, index.window, flips)
draw = time.perf_counter() - t0
print(json.dumps({
    "build": build, "bases": int(tokens.size), "windows": index.total,
    "intervals": int(index.starts.size), "index_bytes": arrays, "rss_index_kib": rss_index, "rss_imports_kib": rss_imports,
    "windows_per_s": steps * batch / draw,
    "rss_end_kib": hwm_kib(),
}))
"""
)


def synthetic_block(block_bases: int, seed: int) -> bytes:
    """``block_bases`` synthetic bases as 60-column FASTA lines (header removed)."""
    config = SyntheticGenomeConfig(total_length=block_bases, n_contigs=1, seed=seed)
    data = synthetic_fasta_bytes(config)
    return data[data.index(b"\n") + 1 :]


def write_genome(path: Path, total: int, block: bytes, block_bases: int, contig: int) -> int:
    """Contigs of ``contig`` bases (the last one shorter) tiled from ``block``; returns contigs."""
    reps_per_contig = max(1, contig // block_bases)
    n_blocks = max(1, round(total / block_bases))
    written = n = 0
    with open(path, "wb") as handle:
        while written < n_blocks:
            reps = min(reps_per_contig, n_blocks - written)
            n += 1
            handle.write(f">chr{n}\n".encode())
            for _ in range(reps):
                handle.write(block)
            written += reps
    return n


def read_lut_floor(path: Path) -> tuple[float, int]:
    """Seconds to read ``path`` and translate it to tokens (headers included: a lower bound)."""
    bases = 0
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as handle:
        while block := handle.read(READ_BLOCK):
            bases += len(block.translate(TRANSLATE_TABLE, b"\n"))
    return time.perf_counter() - t0, bases


def read_hash_floor(path: Path) -> float:
    """Seconds to read ``path`` and sha256 it twice (prepare hashes each record's tokens and the
    source file): the share of prepare's work that is integrity, not translation."""
    first, second = hashlib.sha256(), hashlib.sha256()
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as handle:
        while block := handle.read(READ_BLOCK):
            first.update(block)
            second.update(block)
    return time.perf_counter() - t0


def child(code: str, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], check=True, capture_output=True, text=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_size(gbp: float, root: Path, block: bytes, block_bases: int, args) -> dict:
    folder = root / f"genome_{gbp:g}gbp"
    folder.mkdir(parents=True, exist_ok=True)
    fasta = folder / "genome.fa"
    t0 = time.perf_counter()
    contigs = write_genome(fasta, int(gbp * 1e9), block, block_bases, int(args.contig_mbp * 1e6))
    write_s = time.perf_counter() - t0
    floor_s, floor_bases = read_lut_floor(fasta)
    hash_s = read_hash_floor(fasta)
    prep = child(_PREPARE_CHILD, str(fasta), str(folder / "out"))
    win = child(
        _WINDOWS_CHILD, str(folder / "out"), str(args.seq_len), str(args.batch), str(args.steps)
    )
    if not args.keep:
        shutil.rmtree(folder)
    mbp = floor_bases / 1e6
    return {
        "gbp": gbp,
        "contigs": contigs,
        "write_s": write_s,
        "floor_mbps": mbp / floor_s,
        "hash_mbps": mbp / hash_s,
        "fai_s": prep["fai"],
        "prepare_s": prep["wall"],
        "prepare_mbps": mbp / prep["wall"],
        "ratio": floor_s / prep["wall"],
        "rss_main_mib": prep["rss_main_kib"] / 1024,
        "rss_worker_mib": prep["rss_worker_kib"] / 1024,
        "index_s": win["build"],
        "index_mib": win["index_bytes"] / 2**20,
        "intervals": win["intervals"],
        "index_rss_mib": win["rss_index_kib"] / 2**10,
        "imports_rss_mib": win["rss_imports_kib"] / 2**10,
        "windows_per_s": win["windows_per_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="0.3,3.1", help="genome sizes in Gbp, comma-separated")
    parser.add_argument("--block-mbp", type=float, default=12.0)
    parser.add_argument("--contig-mbp", type=float, default=120.0)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=8, help="windows per micro-batch")
    parser.add_argument("--steps", type=int, default=500, help="micro-batches drawn")
    parser.add_argument("--dir", type=Path, default=None, help="temporary folder (default /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the files")
    args = parser.parse_args()
    block_bases = int(args.block_mbp * 1e6) // LINE * LINE
    t0 = time.perf_counter()
    block = synthetic_block(block_bases, seed=0)
    print(f"synthetic generator: {block_bases / 1e6:.1f} Mbp in {time.perf_counter() - t0:.1f} s")
    root = Path(tempfile.mkdtemp(prefix="goatdna-scale-", dir=args.dir))
    need = H200_TOKENS_PER_S / args.seq_len
    rows = []
    try:
        for gbp in (float(s) for s in args.sizes.split(",")):
            rows.append(run_size(gbp, root, block, block_bases, args))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print(
        "| genome | contigs | .fai build | prepare wall | prepare Mbp/s | read+LUT floor Mbp/s | ratio | "
        "read+2x sha256 Mbp/s | "
        "peak RSS main / worker | index build | index arrays | index peak RSS (after imports) | "
        f"random windows/s (B={args.batch}) | vs H200 need ({need:.0f}/s) |"
    )
    print("|" + " --- |" * 14)
    for r in rows:
        print(
            f"| {r['gbp']:g} Gbp | {r['contigs']} | {r['fai_s']:.1f} s | {r['prepare_s']:.1f} s | "
            f"{r['prepare_mbps']:.0f} | {r['floor_mbps']:.0f} | {r['ratio']:.2f} | "
            f"{r['hash_mbps']:.0f} | "
            f"{r['rss_main_mib']:.0f} / {r['rss_worker_mib']:.0f} MiB | {r['index_s']:.1f} s | "
            f"{r['index_mib']:.2f} MiB ({r['intervals']:,} intervals) | "
            f"{r['index_rss_mib']:.0f} MiB ({r['imports_rss_mib']:.0f}) | "
            f"{r['windows_per_s']:,.0f} | "
            f"{r['windows_per_s'] / need:.1f}x |"
        )


if __name__ == "__main__":
    main()
