"""Is torch's CPU SDPA kernel the floor? Causal attention three ways at the peer benchmark's shape.

The peer benchmark's goal GOAT <= 0.95x Llama asks, on a machine where Llama's training step is
only 1-3% above the bare SDPA decoder's (benchmarks/README.md, peers), for a trunk faster than the
bare decoder's. Matmuls and SDPA are ~87% of that step, so the only place left is the kernels
themselves. This measures whether another way of computing the same causal attention beats
``F.scaled_dot_product_attention``'s default CPU kernel (flash attention for CPU) at the mid
shape (1 x 4 heads x 1024 positions x 64, CPU fp32, one thread), forward with no autograd and
forward + backward:

* ``sdpa``: ``F.scaled_dot_product_attention(q, k, v, is_causal=True)``, what goatdna, the bare
  decoder and Llama all call;
* ``math``: the same call under ``sdpa_kernel(SDPBackend.MATH)``, torch's composite
  reference (the L x L logits in memory);
* ``blocked``: queries in blocks of ``--block`` rows, each block's logits against only the keys
  it can see (one MKL matmul, a masked softmax, one matmul), so most of the masked half is
  never computed; autograd's backward.

Each variant is checked against ``sdpa`` first (outputs and input gradients), then timed in
alternating rounds (`peer_bench.alternate`: CPU time, median of rounds).

    python benchmarks/sdpa_floor_bench.py [--rounds 41] [--block 256]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from peer_bench import alternate, fix_malloc_thresholds  # noqa: E402  (this folder)
from torch import Tensor  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

B, H, L, D = 1, 4, 1024, 64  # peer_bench's mid shape: batch 1 x 1024, 4 heads of 64

Attention = Callable[[Tensor, Tensor, Tensor], Tensor]


def sdpa(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def math_backend(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def blocked(block: int) -> Attention:
    """Causal attention by query blocks: block [s, e) attends to keys [0, e) only."""

    def attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        length, scale = q.shape[-2], q.shape[-1] ** -0.5
        outputs = []
        for start in range(0, length, block):
            stop = min(start + block, length)
            logits = torch.matmul(q[..., start:stop, :] * scale, k[..., :stop, :].transpose(-1, -2))
            visible = torch.ones(stop - start, stop, dtype=torch.bool).tril(start)
            probs = logits.masked_fill(~visible, float("-inf")).softmax(-1)
            outputs.append(torch.matmul(probs, v[..., :stop, :]))
        return torch.cat(outputs, dim=-2)  # (B, H, L, D)

    return attention


def inputs() -> tuple[Tensor, Tensor, Tensor, Tensor]:
    generator = torch.Generator().manual_seed(0)
    q, k, v, upstream = (torch.randn(B, H, L, D, generator=generator) for _ in range(4))
    return q, k, v, upstream


def check(variants: dict[str, Attention]) -> None:
    """Every variant's output and q/k/v gradients agree with sdpa's (to fp32 rounding)."""
    q, k, v, upstream = inputs()
    results = {}
    for name, attention in variants.items():
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        out = attention(*leaves)
        results[name] = (out.detach(), *torch.autograd.grad(out, leaves, upstream))
    for name, got in results.items():
        for a, b, what in zip(got, results["sdpa"], ("output", "dq", "dk", "dv"), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4, msg=f"{name}: {what}")


def forward_step(attention: Attention) -> Callable[[], None]:
    q, k, v, _ = inputs()

    def run() -> None:
        with torch.no_grad():
            attention(q, k, v)

    return run


def train_step(attention: Attention) -> Callable[[], None]:
    q, k, v, upstream = inputs()
    leaves = [t.requires_grad_(True) for t in (q, k, v)]

    def run() -> None:
        attention(*leaves).backward(upstream)
        for t in leaves:
            t.grad = None

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--block", type=int, default=256, help="query rows per block (blocked)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    fix_malloc_thresholds()
    variants = {"sdpa": sdpa, "math": math_backend, "blocked": blocked(args.block)}
    check(variants)
    print(
        f"causal attention, {B} x {H} heads x {L} x {D}, CPU fp32, 1 thread, {args.rounds} rounds"
    )
    print("| variant | forward ms | x sdpa | forward + backward ms | x sdpa |")
    print("| --- | ---: | ---: | ---: | ---: |")
    forward = alternate({n: forward_step(a) for n, a in variants.items()}, args.rounds, 1)
    train = alternate({n: train_step(a) for n, a in variants.items()}, args.rounds, 1)
    for name in variants:
        cells = []
        for timings in (forward, train):
            ms = statistics.median(timings.seconds[name]) * 1e3
            per_round = zip(timings.seconds[name], timings.seconds["sdpa"], strict=True)
            ratio = statistics.median(a / b for a, b in per_round)
            cells += [f"{ms:.1f}", f"{ratio:.2f}"]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
