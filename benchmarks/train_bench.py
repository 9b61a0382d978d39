"""Training step time: tiny GOAT vs tiny RoPE, alternated in one run.

One training step is what the training loop does per optimizer step
(`goatdna.training.loop.optimizer_step`): forward, next-base cross-entropy,
backward, global-norm clipping at 1.0 and a fused-or-not AdamW update with the warmup/cosine
schedule. The two models are built from configs/{goat,rope}-tiny.yaml (same shape; only the
positional scheme differs) and timed in alternating blocks so that load from other processes
hits both alike. The median block time per step is reported.

    python benchmarks/train_bench.py                      # CPU, fp32, the tiny configs
    python benchmarks/train_bench.py --set data.seq_len=512

Goal: GOAT step time <= 1.02x RoPE's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from goatdna.model import DNADecoder, next_token_loss
from goatdna.training import load_run_config
from goatdna.training.module import build_optimizer

REPO = Path(__file__).resolve().parents[1]


def make_step(config, device: torch.device):
    """A closure running one optimizer step on a fixed random batch; returns the loss."""
    torch.manual_seed(config.seed)
    model = DNADecoder(config.model).to(device)
    optimizer, scheduler = build_optimizer(
        model, config.optim, config.trainer.max_steps, on_cuda=device.type == "cuda"
    )
    b, n = config.data.micro_batch_size, config.data.seq_len
    tokens = torch.randint(0, 4, (b, n + 1), device=device)  # (B, L + 1)

    def step() -> float:
        loss = next_token_loss(model(tokens[:, :-1]), tokens[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.optim.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        return float(loss.detach())

    return step, model.num_params()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blocks", type=int, default=5, help="alternating blocks per model")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per block")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per model first")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch default)")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cpu")

    steps, params, configs = {}, {}, {}
    for scheme in ("goat", "rope"):
        configs[scheme] = load_run_config(REPO / "configs" / f"{scheme}-tiny.yaml", args.overrides)
        steps[scheme], params[scheme] = make_step(configs[scheme], device)
        for _ in range(args.warmup):
            steps[scheme]()

    block_times: dict[str, list[float]] = {"goat": [], "rope": []}
    for block in range(args.blocks):
        order = ("goat", "rope") if block % 2 == 0 else ("rope", "goat")
        for scheme in order:
            t0 = time.perf_counter()
            for _ in range(args.steps):
                steps[scheme]()
            block_times[scheme].append((time.perf_counter() - t0) / args.steps)

    c = configs["goat"]
    tokens = c.data.micro_batch_size * c.data.seq_len
    median = {s: statistics.median(t) for s, t in block_times.items()}
    ratio = median["goat"] / median["rope"]
    print(
        f"tiny configs: {c.model.n_layers} layers x d_model {c.model.d_model}, {c.model.n_heads} "
        f"heads, seq_len {c.data.seq_len}, micro-batch {c.data.micro_batch_size}; "
        f"{torch.get_num_threads()} threads, fp32 CPU; {args.blocks} alternating blocks of "
        f"{args.steps} steps"
    )
    print()
    print("| model | params | step ms (median) | min..max block ms | tokens/s | vs RoPE |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for scheme in ("goat", "rope"):
        t = block_times[scheme]
        print(
            f"| {scheme} | {params[scheme]:,} | {median[scheme] * 1e3:.1f} | "
            f"{min(t) * 1e3:.1f}..{max(t) * 1e3:.1f} | {tokens / median[scheme]:,.0f} | "
            f"{median[scheme] / median['rope']:.3f}x |"
        )
    print()
    verdict = "met" if ratio <= 1.02 else "NOT met"
    print(f"GOAT / RoPE step time: {ratio:.3f} (goal <= 1.02: {verdict})")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "block_seconds": block_times,
                    "median_seconds": median,
                    "ratio": ratio,
                    "params": params,
                    "tokens_per_step": tokens,
                    "threads": torch.get_num_threads(),
                    "overrides": args.overrides,
                },
                indent=2,
            )  # fmt: skip
            + "\n"
        )


if __name__ == "__main__":
    main()
