"""Embedding throughput at M = 1x and 4x the training length, and peak memory on long sequences.

Side by side in one run, on randomly initialised models of the tiny config's shape (speed and
memory do not depend on the weights):

- throughput: ``--n`` sequences of 4x the training length each, mean-pooled final-norm
  embeddings, chunk length M = 1x and 4x the training length: embeddings/s and bases/s;
- memory: one sequence of 100 kbp, 300 kbp and 1 Mbp (the real chr20 megabase when ../shared/data has
  it, else random bases) embedded with M = 4096 by a 1-block d_model 64 GOAT model (memory
  depends on M and the batch, not on depth; the small model keeps a 1 Mbp run short), each
  length in a fresh process: peak resident memory above the process's state after loading the
  model and embedding one batch of M-long chunks. The goal is a peak independent of the length.

    python benchmarks/embed_bench.py [--n 64] [--threads 2] [--batch-size 8]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from goatdna.configfile import from_dict, load_yaml
from goatdna.inference.embed import EmbedOptions, SequenceRecord, embed_records
from goatdna.model import DNADecoder, ModelConfig

CHR20 = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "grch37_chr20_1000001-2000000.fa.gz"
)
MEMORY_M = 4096
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072"}
"""glibc otherwise raises its mmap threshold after large frees and keeps freed blocks in the heap,
so resident memory would count allocator caching; with a fixed threshold, blocks of 128 KiB and
more go back to the OS when torch frees them and the peak measures what was live."""


def _model(positional: str, **shape: int) -> DNADecoder:
    data = load_yaml("configs/goat-tiny.yaml")["model"]
    data.update(positional=positional, **shape)
    torch.manual_seed(0)
    return DNADecoder(from_dict(ModelConfig, data, "model")).eval()


def _random_tokens(length: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 4, length).astype(np.uint8)


def _genome_tokens(length: int) -> tuple[np.ndarray, str]:
    if CHR20.is_file():
        from goatdna.io.tokens import encode

        with gzip.open(CHR20, "rt") as handle:
            seq = "".join(line.strip() for line in handle if not line.startswith(">"))
        return (encode(seq[:length]) & 0x7F).astype(np.uint8), "chr20"
    return _random_tokens(length, 1), "random"


def throughput(n: int, batch_size: int) -> list[tuple[str, int, float, float]]:
    rows = []
    for positional in ("goat", "rope"):
        model = _model(positional)
        train = model.config.train_length
        records = [SequenceRecord(str(i), _random_tokens(4 * train, i)) for i in range(n)]
        for factor in (1, 4):
            options = EmbedOptions(batch_size=batch_size)
            embed_records(model, records[:batch_size], options, factor * train)  # warm-up
            start = time.perf_counter()
            embed_records(model, records, options, factor * train)
            seconds = time.perf_counter() - start
            rows.append((positional, factor, n / seconds, n * 4 * train / seconds))
    return rows


def _memory_child(length: int, batch_size: int) -> None:
    """Runs in a fresh process: prints JSON {source, peak_mib, seconds}."""
    model = _model("goat", n_layers=1, d_model=64, n_heads=2, mlp_hidden=176)
    tokens, source = _genome_tokens(length)
    options = EmbedOptions(batch_size=batch_size)
    warm = [SequenceRecord("warm", tokens[: MEMORY_M * batch_size])]
    embed_records(model, warm, options, MEMORY_M)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    embed_records(model, [SequenceRecord("long", tokens)], options, MEMORY_M)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"source": source, "peak_mib": (peak - base) / 1024, "seconds": seconds}))


def memory(batch_size: int, threads: int) -> list[tuple[int, dict]]:
    rows = []
    for length in (100_000, 300_000, 1_000_000):
        res = subprocess.run(
            [sys.executable, __file__, "--child", str(length), "--batch-size", str(batch_size),
             "--threads", str(threads)],
            capture_output=True, text=True, check=True, env={**os.environ, **MALLOC_ENV},
        )  # fmt: skip
        rows.append((length, json.loads(res.stdout.strip().splitlines()[-1])))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--memory-only", action="store_true")
    parser.add_argument("--throughput-only", action="store_true")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.child is not None:
        _memory_child(args.child, args.batch_size)
        return
    if not args.memory_only:
        print_throughput(args)
    if not args.throughput_only:
        print_memory(args)


def print_throughput(args: argparse.Namespace) -> None:
    print(f"throughput: {args.n} sequences of 4x the training length, mean pooling, "
          f"batch {args.batch_size}, {args.threads} threads")  # fmt: skip
    print("| model | M | embeddings/s | bases/s | ratio to M=1x |")
    print("| --- | ---: | ---: | ---: | ---: |")
    rows = throughput(args.n, args.batch_size)
    for positional, factor, per_s, bases in rows:
        ref = next(r for r in rows if r[0] == positional and r[1] == 1)[3]
        print(f"| {positional}-tiny | {factor}x | {per_s:.1f} | {bases:,.0f} | {bases / ref:.2f} |")


def print_memory(args: argparse.Namespace) -> None:
    print(f"\npeak memory above the loaded model, one sequence, M = {MEMORY_M}, 1-block GOAT:")
    print("| sequence | bases | peak MiB | seconds | bases/s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for length, row in memory(args.batch_size, args.threads):
        print(f"| {row['source']} | {length:,} | {row['peak_mib']:.1f} | {row['seconds']:.1f} | "
              f"{length / row['seconds']:,.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
