"""Analysis speed: KV-cached generation vs recomputing the prefix, and evaluation throughput.

Side by side in one run, on randomly initialised models of the tiny config's shape (speed does
not depend on the weights):

- generate: 200-nt prompts, 200 new bases, a batch of rows; ``forward_cached`` steps against a
  full forward over the growing prefix each step (what decoding would cost without the cache);
- evaluate: scored bases per second of `evaluate_context` at 1x, 2x, 4x the training length.

    python benchmarks/analysis_bench.py [--rows 32] [--new 200] [--threads 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from goatdna.analysis.evaluate import evaluate_context
from goatdna.analysis.generate import SamplingOptions, generate_continuations
from goatdna.configfile import from_dict, load_yaml
from goatdna.model import DNADecoder, ModelConfig


class _Rec:
    def __init__(self, offset: int, length: int) -> None:
        self.offset, self.length = offset, length


def _model(positional: str) -> DNADecoder:
    data = load_yaml("configs/goat-tiny.yaml")["model"]
    data["positional"] = positional
    torch.manual_seed(0)
    return DNADecoder(from_dict(ModelConfig, data, "model")).eval()


def _recompute_generate(model: DNADecoder, prompts: torch.Tensor, new: int) -> float:
    """Greedy decoding with a full forward over the prefix at every step (no cache)."""
    seq = prompts
    start = time.perf_counter()
    with torch.inference_mode():
        for _ in range(new):
            nxt = model(seq)[:, -1, :4].argmax(-1, keepdim=True)  # (B, 1)
            seq = torch.cat([seq, nxt], dim=1)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--new", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--eval-tokens", type=int, default=65536)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved cached-decoding rounds")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    prompt_strs = ["".join(rng.choice(list("ACGT"), 200)) for _ in range(args.rows)]
    prompts = torch.tensor([["ACGT".index(c) for c in p] for p in prompt_strs])
    tokens = rng.integers(0, 4, size=args.eval_tokens * 4 + 10).astype(np.uint8)
    records = [_Rec(0, tokens.size)]

    print(f"generate: {args.rows} rows x {args.new} new bases after 200-nt prompts; "
          f"torch threads {args.threads}")  # fmt: skip
    print(
        "| model | KV cache (bases/s) | cached time / RoPE's | recompute (bases/s) | cache speed-up |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    schemes = ("goat", "rope", "alibi", "nope")
    models = {positional: _model(positional) for positional in schemes}
    options = SamplingOptions(max_new_tokens=args.new, temperature=0, batch_size=args.rows)
    cached: dict[str, float] = {p: float("inf") for p in schemes}
    for model in models.values():  # warm-up
        generate_continuations(model, prompt_strs[:2], SamplingOptions(max_new_tokens=4))
    for _ in range(args.rounds):  # interleaved rounds, best of each: load hits every scheme alike
        for positional, model in models.items():
            start = time.perf_counter()
            generate_continuations(model, prompt_strs, options)
            cached[positional] = min(cached[positional], time.perf_counter() - start)
    n = args.rows * args.new
    for positional, model in models.items():
        full = _recompute_generate(model, prompts, args.new)
        print(
            f"| {positional} | {n / cached[positional]:,.0f} | "
            f"{cached[positional] / cached['rope']:.2f} | {n / full:,.0f} | "
            f"{full / cached[positional]:.1f}x |"
        )

    print(f"\nevaluate: {args.eval_tokens:,} scored bases per context length")
    print("| model | context | bases/s |")
    print("| --- | ---: | ---: |")
    for positional in ("goat", "rope"):
        model = _model(positional)
        for mult in (1, 2, 4):
            length = 256 * mult
            start = time.perf_counter()
            res = evaluate_context(model, tokens, records, length, 256, args.eval_tokens)
            elapsed = time.perf_counter() - start
            print(f"| {positional} | {length:,} | {res.bases / elapsed:,.0f} |")


if __name__ == "__main__":
    main()
