"""`goatdna attribute`: throughput per method, and peak memory against the number of sequences.

Side by side in one run, on a randomly initialised 2-block d_model 64 GOAT language model (the
tests' tiny shape; speed and memory do not depend on the weights), target ``loglik``, both
strands:

- throughput: ``--n`` random sequences of ``--length`` bases explained by ``ism`` (exact: the
  KV-cache machinery of `mutagenesis`), ``saliency`` and ``integrated-gradients`` (``--steps``):
  sequences/s and bases/s;
- memory: the whole command (`goatdna.inference.attribute_run.attribute`, .npz output) on N =
  64, 640 and 6400 sequences, each N in a fresh process: peak resident memory above the process's
  state after loading the model and explaining one unit. The .npz is streamed unit by unit, so
  the goal is a peak independent of N (the output itself grows, on disk).

    python benchmarks/attribute_bench.py [--n 32] [--length 200] [--steps 64] [--threads 2] \
        [--memory-ns 64,640,6400]
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
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from goatdna.checkpoint import save_checkpoint  # noqa: E402
from goatdna.configfile import to_dict  # noqa: E402
from goatdna.inference.attribute import (  # noqa: E402
    AttributeOptions,
    attribute_tokens,
    language_model_target,
)
from goatdna.model import DNADecoder, ModelConfig  # noqa: E402

MEMORY_NS = (64, 640, 6400)
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072"}  # as embed_bench: RSS counts live blocks


def _model() -> tuple[DNADecoder, ModelConfig]:
    torch.manual_seed(0)
    config = ModelConfig(positional="goat", n_layers=2, d_model=64, n_heads=2, mlp_hidden=176,
                         train_length=128, goat_modes=4)  # fmt: skip
    return DNADecoder(config).eval(), config


def _tokens(n: int, length: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(0, 4, length).astype(np.uint8) for _ in range(n)]


def throughput(n: int, length: int, steps: int) -> list[dict]:
    model, _ = _model()
    target = language_model_target(model, "loglik")
    rows = []
    for method in ("ism", "saliency", "integrated-gradients"):
        count = max(2, n // 8) if method == "ism" else n  # ISM is 3L passes per sequence
        tokens = _tokens(count, length)
        options = AttributeOptions(method, steps=steps, batch_size=16 if method != "ism" else 64)
        attribute_tokens(target, tokens[:1], options)  # warm-up
        start = time.perf_counter()
        attribute_tokens(target, tokens, options)
        seconds = time.perf_counter() - start
        rows.append({"method": method, "sequences": count, "seconds": round(seconds, 2),
                     "sequences_per_s": round(count / seconds, 2),
                     "bases_per_s": round(count * length / seconds)})  # fmt: skip
    return rows


def _peak_child(n: int, length: int, folder: Path) -> dict:
    """One run of the command in this process (called as a child): the peak above baseline."""
    from goatdna.inference import attribute_run
    from goatdna.inference.attribute_run import AttributeRequest, attribute

    model, config = _model()
    ckpt = save_checkpoint(folder / "lm.ckpt", model, {"model": to_dict(config)})
    fasta = folder / f"seqs{n}.fa"
    with fasta.open("w") as handle:
        for i, t in enumerate(_tokens(n, length)):
            handle.write(f">s{i}\n{''.join('ACGT'[b] for b in t)}\n")
    options = AttributeOptions("saliency", batch_size=16)
    tokens = _tokens(attribute_run.UNIT_SEQUENCES, length)
    attribute_tokens(language_model_target(model, None), tokens, options)  # one unit's work
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    request = AttributeRequest(ckpt, (folder / f"out{n}.npz",), options, sequences=fasta)
    attribute(request, progress=False)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"sequences": n, "bases": n * length, "seconds": round(seconds, 1),
            "output_mb": round((folder / f"out{n}.npz").stat().st_size / 2**20, 1),
            "peak_above_baseline_mb": round((peak - baseline) / 1024, 1)}  # fmt: skip


def memory(length: int, threads: int, sizes: list[int]) -> list[dict]:
    rows = []
    for n in sizes:
        with tempfile.TemporaryDirectory() as folder:
            env = {**os.environ, **MALLOC_ENV, "OMP_NUM_THREADS": str(threads),
                   "PYTHONPATH": str(REPO)}  # fmt: skip
            cmd = [sys.executable, __file__, "--child", str(n), "--length", str(length),
                   "--folder", folder]  # fmt: skip
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return rows


def _table(rows: list[dict]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + " --- |" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--length", type=int, default=200)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--memory-ns", default=",".join(map(str, MEMORY_NS)),
                        help="N values of the memory runs, comma-separated")  # fmt: skip
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.child is not None:
        print(json.dumps(_peak_child(args.child, args.length, args.folder)))
        return
    print(f"torch {torch.__version__}, {args.threads} thread(s), length {args.length}, "
          f"IG steps {args.steps}")  # fmt: skip
    print("\nthroughput (loglik target, both strands)\n")
    print(_table(throughput(args.n, args.length, args.steps)))
    print("\npeak memory of `attribute` (saliency, .npz) against N, each in a fresh process\n")
    sizes = [int(n) for n in args.memory_ns.split(",")]
    print(_table(memory(args.length, args.threads, sizes)))


if __name__ == "__main__":
    main()
