"""Attention cost on CPU: plain causal SDPA vs RoPE+SDPA vs GOAT packed+SDPA vs GOAT explicit bias.

Each case runs forward + backward of one attention layer's core (batch 1, 12 heads, head dim 64;
GOAT's q/k carry d_c = 46 content dims and its prior, ALiBi-initialised with every other term
switched on, packs the other 18) through the model's own code (``GoatPrior.pack``,
``RotaryEmbedding``, ``attention.attend``, ``attention.explicit_attention``) at L = 1K, 4K, 8K, all
in one run, and prints times and peak memory with ratios to plain SDPA. Goals: GOAT
packed <= 1.10x RoPE's time and <= 1.05x its peak memory at every L; the explicit bias shows its
O(L^2) memory.

Peak memory, and why this way: ATen's CPU allocations bypass Python (tracemalloc cannot see them)
and torch keeps no CPU allocator statistics, so the kernel's own count of resident pages is used.
Before every measured step the worker resets the peak-RSS counter (``echo 5 >
/proc/self/clear_refs`` resets ``VmHWM``, Linux >= 4.0) and reads ``VmRSS``; after the step,
``VmHWM - VmRSS(before)`` is the extra resident memory at the step's peak: every page ATen touched,
activations and gradients included. Workers run with ``MALLOC_MMAP_THRESHOLD_=65536`` so glibc
hands every freed block of 64 KiB or more back to the kernel at once: resident memory then
follows live tensors, and one step's leftovers cannot hide the next step's peak. (Without
clear_refs the fallback is ``ru_maxrss`` minus the RSS before, exact for the process's largest
step.)

Time, and why interleaved: the CPU may be shared, and load drifts over seconds. For each L, one
fresh process runs the three kernel-friendly cases round-robin (a warm-up step each, then rounds of
sdpa, rope, goat) and keeps each case's minimum time and largest peak. The explicit case runs
alone in its own process (its L x L tensors would otherwise dominate the process), with a warm-up
step up to 4K and a single measured step at 8K, where the step (minutes, gigabytes) dwarfs any
one-time cost; it is skipped when /proc/meminfo says the memory is not there.

Threads: one per process by default. On a shared CPU, OpenMP's barriers stall whenever a worker
thread is descheduled, which slows the many small ops of any positional scheme by 10x or more
(measured here: GOAT's prior MLP forward + backward at L = 1K, 5 ms on one thread, 68 ms on two)
while barely touching the big SDPA kernels, so multi-thread ratios mostly measure the neighbours.
``--threads 0`` uses torch's default. Denormals are flushed in every case (exp of very negative
logits makes them; x86 pays ~100x per such op, GPUs do not).

Run: ``python benchmarks/attention_bench.py`` (about 4-5 minutes on 2 shared cores, mostly the 8K
explicit step; ``--quick`` for L = 1K only).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable

FAST_CASES = ("sdpa", "rope", "goat")
CASES = (*FAST_CASES, "explicit")
LABELS = {
    "sdpa": "plain causal SDPA",
    "rope": "RoPE + SDPA",
    "goat": "GOAT packed + SDPA",
    "explicit": "GOAT explicit bias",
}
LENGTHS = (1024, 4096, 8192)
ROUNDS = {1024: 5, 4096: 3, 8192: 3}  # measured rounds per L (after one warm-up step per case)
WARM_UP_MAX_LENGTH = 4096  # explicit case only: beyond this its one step is all we can afford
HEADS, HEAD_DIM, MODES = 12, 64, 8


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def measure(step: Callable[[], None]) -> tuple[float, int]:
    """(seconds, peak extra resident bytes) of one call of ``step``."""
    rss_before = _status_kib("VmRSS")
    reset = _reset_peak()
    start = time.perf_counter()
    step()
    seconds = time.perf_counter() - start
    if reset:
        peak_kib = _status_kib("VmHWM") - rss_before
    else:  # pragma: no cover - kernels without clear_refs
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    return seconds, peak_kib * 1024


def make_steps(length: int, cases: tuple[str, ...]) -> dict[str, Callable[[], None]]:
    """One forward + backward closure per case, inputs allocated up front (not in the peak)."""
    import torch

    from goatdna.model.attention import attend, explicit_attention
    from goatdna.model.goat import GoatPrior
    from goatdna.model.rope import RotaryEmbedding

    torch.manual_seed(0)
    torch.set_flush_denormal(True)
    B, H, L, dh = 1, HEADS, length, HEAD_DIM
    prior = GoatPrior(H, dh, MODES, train_length=1024, init="alibi")
    with torch.no_grad():  # every term active, as after training
        for p in (prior.alpha, prior.beta, prior.sink, prior.mlp_b1, prior.mlp_w2):
            p.normal_(0, 0.1)
    dc = prior.content_dim
    rope = RotaryEmbedding(dh)
    pos = range(L)
    grad_out = torch.randn(B, H, L, dh)
    steps = {}
    for case in cases:
        qk_dim = dc if case in ("goat", "explicit") else dh
        q = torch.randn(B, H, L, qk_dim, requires_grad=True)  # (B, H, L, d_qk)
        k = torch.randn(B, H, L, qk_dim, requires_grad=True)
        v = torch.randn(B, H, L, dh, requires_grad=True)  # (B, H, L, d_h)

        def step(case=case, q=q, k=k, v=v) -> None:
            if case == "sdpa":
                out = attend(q, k, v, "sdpa")
            elif case == "rope":
                out = attend(rope(q, pos), rope(k, pos), v, "sdpa")
            elif case == "goat":
                out = attend(*prior.pack(q, k, pos, pos), v, "sdpa")
            else:
                logits = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(dc)  # (B, H, L, L)
                out = explicit_attention(logits + prior.log_prior(pos, pos), v)
            out.backward(grad_out)
            for t in (q, k, v, *prior.parameters()):
                t.grad = None

        steps[case] = step
    return steps


def worker(kind: str, length: int, threads: int) -> list[dict]:
    """``fast``: sdpa/rope/goat interleaved; ``explicit``: the L x L reference alone."""
    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    cases = FAST_CASES if kind == "fast" else ("explicit",)
    steps = make_steps(length, cases)
    times: dict[str, list[float]] = {c: [] for c in cases}
    peaks: dict[str, list[int]] = {c: [] for c in cases}
    if kind == "fast":
        for case in cases:
            steps[case]()  # warm-up: kernels chosen, position caches filled
        for _ in range(ROUNDS[length]):
            for case in cases:
                seconds, peak = measure(steps[case])
                times[case].append(seconds)
                peaks[case].append(peak)
    else:
        if length <= WARM_UP_MAX_LENGTH:
            steps["explicit"]()
        seconds, peak = measure(steps["explicit"])
        times["explicit"].append(seconds)
        peaks["explicit"].append(peak)
    return [
        {"case": c, "L": length, "time_s": min(times[c]), "peak_bytes": max(peaks[c])}
        for c in cases
    ]


def _available_bytes() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def _explicit_estimate(length: int) -> int:
    """Rough peak of the explicit case: about 4 (H, L, L) float32 tensors alive at once."""
    return 4 * HEADS * length * length * 4


def run_worker(kind: str, length: int, threads: int) -> list[dict]:
    if kind == "explicit" and _explicit_estimate(length) * 1.25 > _available_bytes():
        print(f"  skip explicit L={length}: needs ~{_explicit_estimate(length) / 2**30:.1f} GiB")
        return []
    cmd = [sys.executable, __file__, "--worker", kind, str(length), str(threads)]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="L = 1K only")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads per process (0: torch's default)"
    )
    args = parser.parse_args()
    if args.worker:
        kind, length, threads = args.worker
        print(json.dumps(worker(kind, int(length), int(threads))))
        return

    import torch

    lengths = (1024,) if args.quick else LENGTHS
    threads = args.threads or torch.get_num_threads()
    print(
        f"torch {torch.__version__}, {threads} thread(s) per process, load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs, batch 1, {HEADS} heads, "
        f"head dim {HEAD_DIM}, GOAT d_c {HEAD_DIM - 2 * MODES - 2}, fp32, forward + backward"
    )
    results: dict[tuple[str, int], dict] = {}
    for length in lengths:
        for kind in ("fast", "explicit"):
            for r in run_worker(kind, length, args.threads):
                results[(r["case"], length)] = r
                print(
                    f"  {LABELS[r['case']]:<20} L={length:<5} {r['time_s'] * 1e3:9.1f} ms "
                    f"{r['peak_bytes'] / 2**20:9.1f} MiB",
                    flush=True,
                )

    lines = [
        "| L | case | fwd+bwd ms | x SDPA time | peak MiB | x SDPA memory |",
        "|---|---|---:|---:|---:|---:|",
    ]
    verdicts = []
    for length in lengths:
        base = results.get(("sdpa", length))
        for case in CASES:
            r = results.get((case, length))
            if r is None or base is None:
                lines.append(f"| {length} | {LABELS[case]} | skipped | | | |")
                continue
            lines.append(
                f"| {length} | {LABELS[case]} | {r['time_s'] * 1e3:.1f} | "
                f"{r['time_s'] / base['time_s']:.2f} | {r['peak_bytes'] / 2**20:.1f} | "
                f"{r['peak_bytes'] / base['peak_bytes']:.2f} |"
            )
        goat, rope = results.get(("goat", length)), results.get(("rope", length))
        if goat and rope:
            t = goat["time_s"] / rope["time_s"]
            m = goat["peak_bytes"] / rope["peak_bytes"]
            verdicts.append(
                f"L={length}: GOAT/RoPE time {t:.2f}x ({'ok' if t <= 1.10 else 'MISSED'} <= 1.10), "
                f"peak memory {m:.2f}x ({'ok' if m <= 1.05 else 'MISSED'} <= 1.05)"
            )
    print()
    print("\n".join(lines))
    print()
    print("\n".join(verdicts))


if __name__ == "__main__":
    main()
