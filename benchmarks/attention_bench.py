"""Attention cost on CPU: plain causal SDPA vs RoPE+SDPA vs GOAT packed+SDPA vs GOAT explicit bias.

Each case runs forward + backward of one attention layer's core (batch 1, 12 heads, head dim 64;
GOAT's q/k carry d_c = 46 content dims and the prior packs the other 18) through the model's own
code (``GoatPrior.pack``, ``RotaryEmbedding``, ``attention.attend``, ``explicit_attention``) at
L = 1K, 4K, 8K, all in one run, and prints times and peak memory with ratios to plain SDPA.
Goals (issue 3): GOAT packed <= 1.10x RoPE's time and <= 1.05x its peak memory at every L; the
explicit bias shows its O(L^2) memory.

Peak memory, and why this way: ATen's CPU allocations bypass Python (tracemalloc cannot see them)
and torch keeps no CPU allocator statistics. So every (case, L) runs in a fresh subprocess that
builds its inputs, runs one warm-up step (kernel choice, position caches), resets the kernel's
peak-RSS counter (``echo 5 > /proc/self/clear_refs`` resets ``VmHWM``, Linux >= 4.0), runs one
forward + backward and reports ``VmHWM - VmRSS`` measured just before it: the extra resident
memory at the peak, i.e. every page ATen touched, activations and gradients included. The worker
runs with ``MALLOC_MMAP_THRESHOLD_=65536`` so glibc gives freed tensors back to the kernel at once
and resident memory follows live memory. (Without clear_refs the fallback is ``ru_maxrss`` minus
the RSS before, exact when the step's peak is the process's peak.) Times are the minimum over the
measured step and a few more in the same process (the CPU may be shared; the minimum is the least
disturbed).

Run: ``python benchmarks/attention_bench.py`` (about 2-3 minutes on 2 cores; ``--quick`` for 1K).
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

CASES = ("sdpa", "rope", "goat", "explicit")
LABELS = {
    "sdpa": "plain causal SDPA",
    "rope": "RoPE + SDPA",
    "goat": "GOAT packed + SDPA",
    "explicit": "GOAT explicit bias",
}
LENGTHS = (1024, 4096, 8192)
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


def worker(case: str, length: int, repeats: int) -> dict:
    """One (case, L) in this fresh process: peak extra memory of the first step, then timings."""
    import torch

    from goatdna.model.attention import attend, explicit_attention
    from goatdna.model.goat import GoatPrior
    from goatdna.model.rope import RotaryEmbedding

    torch.manual_seed(0)
    # Denormal floats (exp of very negative logits: any real prior makes some) cost x86 CPUs
    # ~100x per operation; GPUs do not pay this. Flush them in every case for a fair comparison.
    torch.set_flush_denormal(True)
    B, H, L, dh = 1, HEADS, length, HEAD_DIM
    prior = GoatPrior(H, dh, MODES, train_length=1024, init="alibi")
    with torch.no_grad():  # every term active, as after training
        for p in (prior.alpha, prior.beta, prior.sink, prior.mlp_b1, prior.mlp_w2):
            p.normal_(0, 0.1)
    dc = prior.content_dim
    qk_dim = dc if case in ("goat", "explicit") else dh
    q = torch.randn(B, H, L, qk_dim, requires_grad=True)  # (B, H, L, d_qk)
    k = torch.randn(B, H, L, qk_dim, requires_grad=True)
    v = torch.randn(B, H, L, dh, requires_grad=True)  # (B, H, L, d_h)
    grad_out = torch.randn(B, H, L, dh)
    rope = RotaryEmbedding(dh)
    pos = range(L)

    def step() -> None:
        if case == "sdpa":
            out = attend(q, k, v, "sdpa")
        elif case == "rope":
            out = attend(rope(q, pos), rope(k, pos), v, "sdpa")
        elif case == "goat":
            qp, kp = prior.pack(q, k, pos, pos)
            out = attend(qp, kp, v, "sdpa")
        else:
            logits = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(dc)  # (B, H, L, L)
            out = explicit_attention(logits + prior.log_prior(pos, pos), v)
        out.backward(grad_out)
        for t in (q, k, v, *prior.parameters()):
            t.grad = None

    step()  # warm-up: kernels chosen, position caches filled (not part of the steady state)
    rss_before = _status_kib("VmRSS")
    reset = _reset_peak()
    start = time.perf_counter()
    step()
    times = [time.perf_counter() - start]
    if reset:
        peak_kib = _status_kib("VmHWM") - rss_before
    else:  # pragma: no cover - kernels without clear_refs
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    for _ in range(repeats - 1):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return {"case": case, "L": L, "time_s": min(times), "peak_bytes": peak_kib * 1024}


def _available_bytes() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def _explicit_estimate(length: int) -> int:
    """Rough peak of the explicit case: about 4 (H, L, L) float32 tensors alive at once."""
    return 4 * HEADS * length * length * 4


def run_case(case: str, length: int, repeats: int) -> dict | None:
    if case == "explicit" and _explicit_estimate(length) * 1.25 > _available_bytes():
        print(f"  skip {case} L={length}: needs ~{_explicit_estimate(length) / 2**30:.1f} GiB")
        return None
    cmd = [sys.executable, __file__, "--worker", case, str(length), str(repeats)]
    # a fixed mmap threshold makes glibc return every freed block >= 64 KiB to the kernel, so
    # resident memory tracks live tensors (no heap reuse hiding the second step's peak)
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--worker", nargs=3, metavar=("CASE", "L", "REPEATS"), help=argparse.SUPPRESS
    )
    parser.add_argument("--quick", action="store_true", help="L = 1K only")
    args = parser.parse_args()
    if args.worker:
        case, length, repeats = args.worker
        print(json.dumps(worker(case, int(length), int(repeats))))
        return

    import torch

    lengths = (1024,) if args.quick else LENGTHS
    repeats = {1024: 5, 4096: 3, 8192: 1}  # timed steps after the warm-up
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch 1, {HEADS} heads, "
        f"head dim {HEAD_DIM}, GOAT d_c {HEAD_DIM - 2 * MODES - 2}, fp32, forward + backward"
    )
    results: dict[tuple[str, int], dict] = {}
    for length in lengths:
        for case in CASES:
            result = run_case(case, length, repeats.get(length, 3))
            if result is not None:
                results[(case, length)] = result
                print(
                    f"  {LABELS[case]:<20} L={length:<5} {result['time_s'] * 1e3:9.1f} ms "
                    f"{result['peak_bytes'] / 2**20:9.1f} MiB",
                    flush=True,
                )

    header = "| L | case | fwd+bwd ms | x SDPA time | peak MiB | x SDPA memory |"
    lines = [header, "|---|---|---:|---:|---:|---:|"]
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
