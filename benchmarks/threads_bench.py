"""Demo-like CPU work at 1 vs 2 torch threads, alternated in one run (`goatdna.runtime`'s default).

The demo's three kinds of torch work on the tiny GOAT config (configs/goat-tiny.yaml): a training
step (forward, loss, backward, clipping, AdamW), a validation forward over a batch of windows
(no grad), and a decoding step of the GC study (one position for a batch of samples, cached).
Each thread count runs the same blocks in turn, so load from other processes hits both alike; the
median block time per unit is reported with the ratio to one thread.

    python benchmarks/threads_bench.py                  # 1 and 2 threads
    python benchmarks/threads_bench.py --threads 1,2,4

Run it while the machine is as busy as it will be when the demo runs: on an oversubscribed CPU,
two OpenMP threads per process wait on each other (spin, then sleep) and lose to one.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from train_bench import make_step  # the one training step the training benchmark times

from goatdna.analysis.generate import sample_batch
from goatdna.model import DNADecoder
from goatdna.training import load_run_config

REPO = Path(__file__).resolve().parents[1]


def work(config) -> dict[str, Callable[[], object]]:
    """name -> one unit of each kind of demo work, on fixed random inputs."""
    train_step, _ = make_step(config, torch.device("cpu"))
    torch.manual_seed(0)
    model = DNADecoder(config.model).eval()
    windows = torch.randint(0, 4, (config.data.val_batch_size, config.data.seq_len))  # (B, L)
    prompt = torch.randint(0, 4, (8, 64))  # (samples, prompt length)
    uniforms = torch.rand(8, 16)  # (samples, new bases)

    def validate() -> object:
        with torch.inference_mode():
            return model(windows)

    def decode() -> object:  # the GC study's decoding: a prefill, then 16 cached steps
        return sample_batch(model, prompt, uniforms)

    return {"train step": train_step, "validation batch": validate, "decode 16 bases": decode}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", default="1,2", help="thread counts to compare")
    parser.add_argument("--blocks", type=int, default=5, help="alternating blocks per count")
    parser.add_argument("--units", type=int, default=3, help="timed units per block")
    args = parser.parse_args()
    counts = [int(t) for t in args.threads.split(",")]
    config = load_run_config(REPO / "configs" / "goat-tiny.yaml")
    kinds = work(config)
    times: dict[tuple[str, int], list[float]] = {(k, c): [] for k in kinds for c in counts}
    for fn in kinds.values():  # warm-up: allocator, kernels
        fn()
    for _ in range(args.blocks):
        for count in counts:
            torch.set_num_threads(count)
            for name, fn in kinds.items():
                start = time.perf_counter()
                for _ in range(args.units):
                    fn()
                times[name, count].append((time.perf_counter() - start) / args.units)
    print(f"| work | {' | '.join(f'{c} thread(s), s' for c in counts)} | ratio to 1 thread |")
    print("| --- |" + " ---: |" * (len(counts) + 1))
    for name in kinds:
        medians = [statistics.median(times[name, c]) for c in counts]
        ratios = ", ".join(f"{medians[0] / m:.2f}x" for m in medians[1:])
        print(f"| {name} | {' | '.join(f'{m:.4f}' for m in medians)} | {ratios} |")


if __name__ == "__main__":
    main()
