"""RMSNorm alone: goatdna's closed-form CPU backward against torch's and transformers' norms.

Times, at the peer benchmark's mid shape (1 x 1024 positions x 256, CPU fp32, one thread), one
norm forward + backward (an upstream gradient of the output's shape), three ways:

* ``goatdna``: `goatdna.model.norm.RMSNorm` (torch's fused forward kernel, the closed-form
  gradient as its backward);
* ``nn.RMSNorm``: torch's module, which on the CPU records ``rms_norm``'s decomposition for
  autograd (what goatdna ran before, and what the peer benchmark's bare decoder ran);
* ``llama``: transformers' ``LlamaRMSNorm`` (float32 upcast, pow, mean, rsqrt, two muls).

Each is timed as the input's ``clone`` plus the norm, minus the clone alone, in alternating
rounds (CPU time, median of the rounds), so the numbers are the norm's own cost. It also checks
that the three agree on outputs and gradients.

    python benchmarks/norm_bench.py [--rounds 150]
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
from torch import Tensor, nn  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaRMSNorm  # noqa: E402

from goatdna.model.norm import RMSNorm  # noqa: E402

B, L, WIDTH, EPS = 1, 1024, 256, 1e-5


def variants() -> dict[str, nn.Module]:
    torch.manual_seed(0)
    ours = RMSNorm(WIDTH, eps=EPS)
    with torch.no_grad():
        ours.weight.uniform_(0.5, 1.5)
    torch_norm = nn.RMSNorm(WIDTH, eps=EPS)
    llama = LlamaRMSNorm(WIDTH, eps=EPS)
    for norm in (torch_norm, llama):
        norm.load_state_dict(ours.state_dict())
    return {"goatdna": ours, "nn.RMSNorm": torch_norm, "llama": llama}


def check(norms: dict[str, nn.Module]) -> None:
    """Outputs and both gradients agree with nn.RMSNorm's (to fp32 rounding)."""
    x = torch.randn(B, L, WIDTH) * 2.0
    g = torch.randn(B, L, WIDTH)
    results = {}
    for name, norm in norms.items():
        xi = x.clone().requires_grad_(True)
        out = norm(xi)
        gx, gw = torch.autograd.grad(out, (xi, norm.weight), g)
        results[name] = (out.detach(), gx, gw)
    for name, got in results.items():
        for a, b, what in zip(got, results["nn.RMSNorm"], ("output", "dx", "dw"), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-4, msg=f"{name}: {what}")


def step(norm: nn.Module | None) -> Callable[[], None]:
    x = torch.randn(B, L, WIDTH)
    upstream = torch.randn(B, L, WIDTH)

    def run() -> None:
        xi = x.clone().requires_grad_(True)
        if norm is not None:
            y: Tensor = norm(xi)
            y.backward(upstream)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=150)
    args = parser.parse_args()
    torch.set_num_threads(1)
    norms = variants()
    check(norms)
    steps = {name: step(norm) for name, norm in norms.items()} | {"none": step(None)}
    names = list(steps)
    times = alternate(steps, args.rounds, reps=1).seconds
    base = statistics.median(times["none"])
    cost = {n: 1e3 * (statistics.median(t) - base) for n, t in times.items()}
    print("| RMSNorm of (1, 1024, 256), forward + backward | ms | / nn.RMSNorm |")
    print("| --- | ---: | ---: |")
    for name in names[:-1]:
        print(f"| {name} | {cost[name]:.3f} | {cost[name] / cost['nn.RMSNorm']:.2f} |")


if __name__ == "__main__":
    main()
