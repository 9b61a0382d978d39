"""Activation memory of one 125M-shaped layer: GOAT's packed q'/k' layout against the old one.

Counts the bytes autograd keeps for backward (unique storages reached by saved tensors, weights
included) in one forward of a 1-layer decoder of the 125M shape (d_model 768, 12 heads of 64,
SwiGLU 2048) over ``--tokens`` tokens, per token: GOAT as it is now (q', k' packed in the
projection's (B, L, H, D) memory, transposed views for SDPA), GOAT with the old layout emulated
(the same q', k' copied into contiguous (B, H, L, D) memory) and RoPE. Also checks that both
layouts give bitwise-equal logits. Deterministic (no timing); runs in a few seconds on a CPU.

    python benchmarks/layout_bench.py [--tokens 1024]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from goatdna.model import DNADecoder, GoatPrior, ModelConfig  # noqa: E402


def saved_bytes(model: torch.nn.Module, idx: torch.Tensor) -> tuple[int, torch.Tensor]:
    """Bytes of the distinct storages autograd saves during ``model(idx)``, and the logits."""
    storages: dict[int, int] = {}

    def keep(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        logits = model(idx)
    return sum(storages.values()), logits.detach()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=1024)
    args = parser.parse_args()
    config = ModelConfig(
        positional="goat",
        n_layers=1,
        train_length=args.tokens,
        attention="sdpa",
    )
    idx = torch.randint(0, 4, (1, args.tokens), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    goat = DNADecoder(config)
    packed, logits = saved_bytes(goat, idx)

    pack = GoatPrior.pack

    def old_layout(self, *a):
        q, k = pack(self, *a)
        return q.contiguous(), k.contiguous()  # (B, H, L, d_h) memory, as before the change

    GoatPrior.pack = old_layout
    try:
        old, old_logits = saved_bytes(goat, idx)
    finally:
        GoatPrior.pack = pack
    torch.manual_seed(0)
    rope_model = DNADecoder(replace(config, positional="rope"))
    rope, _ = saved_bytes(rope_model, idx)
    weights = 4 * (rope_model.num_params() - goat.num_params())

    n = args.tokens
    print(f"1 layer of the 125M shape, {n} tokens, fp32; bytes saved for backward per token")
    print(
        f"(weights included: GOAT's smaller q/k projections save {weights / n:,.0f} B/token of them)\n"
    )
    print("| model | saved B/token | vs GOAT packed |")
    print("| --- | ---: | ---: |")
    for name, value in (
        ("GOAT, q'/k' in (B, L, H, D) memory (now)", packed),
        ("GOAT, q'/k' in (B, H, L, D) memory (before)", old),
        ("RoPE", rope),
    ):
        print(f"| {name} | {value / n:,.0f} | {(value - packed) / n:+,.0f} |")
    equal = torch.equal(logits, old_logits)
    print(f"\nlogits of both GOAT layouts bitwise equal: {equal}")


if __name__ == "__main__":
    main()
