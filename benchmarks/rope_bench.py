"""RoPE's rotation alone: goatdna's complex rotation against the rotate-half formula.

Times, at the peer benchmark's mid shape (1 x 4 heads x 1024 positions x 64, CPU fp32, one
thread), the rotation of a query as the attention hands it over (a transposed view of the
projection's output), forward alone and forward + backward, three ways:

* ``rotate-half``: ``x*cos + rotate_half(x)*sin``, transformers' Llama formula (what goatdna ran
  before: neg, cat, two muls and an add);
* ``complex``: one complex multiply in autograd's own backward;
* ``goatdna``: `RotaryEmbedding` itself (the complex multiply with the inverse rotation as its
  backward, `goatdna.model.rope._Rotate`).

Each is timed as the projection plus the rotation, minus the projection alone, all in
alternating rounds (CPU time, median of the rounds), so the numbers are the rotation's own cost.
It also checks that every variant gives the rotate-half formula's ``q . k`` and gradients.

    python benchmarks/rope_bench.py [--rounds 150]
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
from peer_bench import alternate  # noqa: E402  (this folder: the rounds peer_bench times)
from torch import Tensor  # noqa: E402

from goatdna.model.rope import RotaryEmbedding, _rotate  # noqa: E402

B, L, H, D, WIDTH = 1, 1024, 4, 64, 256


def variants(rope: RotaryEmbedding) -> dict[str, Callable[[Tensor], Tensor]]:
    pos = range(L)
    rotation, _ = rope.rotations(pos, torch.device("cpu"), torch.float32)
    f64 = torch.float64
    theta = rope.base ** (-torch.arange(0, D, 2, dtype=f64) / D)
    angles = torch.arange(L, dtype=f64)[:, None] * theta
    cos = torch.cat([angles.cos()] * 2, -1).float()
    sin = torch.cat([angles.sin()] * 2, -1).float()
    half = D // 2

    def rotate_half(x: Tensor) -> Tensor:
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin

    return {
        "rotate-half": rotate_half,
        "complex": lambda x: _rotate(x, rotation),  # goatdna's forward, autograd's own backward
        "goatdna": lambda x: rope(x, pos),
        "none": lambda x: x,
    }


def check(funcs: dict[str, Callable[[Tensor], Tensor]], proj: torch.nn.Linear) -> None:
    """Every variant's q.k and the projection's gradients equal the rotate-half formula's."""
    x = torch.randn(B, L, WIDTH)
    results = {}
    for name, f in funcs.items():
        if name == "none":
            continue
        proj.zero_grad()
        q = proj(x).view(B, L, H, D).transpose(1, 2)
        k = proj(x.flip(1)).view(B, L, H, D).transpose(1, 2)
        dots = f(q) @ f(k).transpose(-1, -2)
        dots.sin().sum().backward()
        assert proj.weight.grad is not None
        results[name] = (dots.detach(), proj.weight.grad.clone())
    ref_dots, ref_grad = results["rotate-half"]
    for name, (dots, grad) in results.items():
        torch.testing.assert_close(dots, ref_dots, rtol=1e-4, atol=1e-3, msg=f"{name}: q.k")
        torch.testing.assert_close(grad, ref_grad, rtol=1e-3, atol=1e-2, msg=f"{name}: grad")


def step(f: Callable[[Tensor], Tensor], proj: torch.nn.Linear, train: bool) -> Callable[[], None]:
    x = torch.randn(B, L, WIDTH, requires_grad=train)
    upstream = torch.randn(B, H, L, D)

    def run() -> None:
        with torch.set_grad_enabled(train):
            y = f(proj(x).view(B, L, H, D).transpose(1, 2))
            if train:
                y.backward(upstream)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=150)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    proj = torch.nn.Linear(WIDTH, H * D, bias=False)
    funcs = variants(RotaryEmbedding(D))
    check(funcs, proj)
    names = list(funcs)
    print("| rotation of (1, 4, 1024, 64) | forward (ms) | forward + backward (ms) |")
    print("| --- | ---: | ---: |")
    cost: dict[bool, dict[str, float]] = {}
    for train in (False, True):
        steps = {name: step(f, proj, train) for name, f in funcs.items()}
        times = alternate(steps, args.rounds, reps=1).seconds
        base = statistics.median(times["none"])
        cost[train] = {n: 1e3 * (statistics.median(t) - base) for n, t in times.items()}
    for name in names[:-1]:
        print(f"| {name} | {cost[False][name]:.3f} | {cost[True][name]:.3f} |")


if __name__ == "__main__":
    main()
