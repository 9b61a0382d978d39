"""125M GOAT vs RoPE training throughput on one GPU: tokens/s, MFU and peak memory.

Builds the 125M models from configs/{goat,rope}-125m.yaml at seq_len 1024 and 2048 (the GOAT
prior's training length follows seq_len), and times real optimizer steps in bf16 autocast with
fp32 master weights (what Lightning's ``bf16-mixed`` does): ``--accumulate`` micro-batches of
``--tokens`` tokens each, forward + next-base cross-entropy + backward, global-norm clipping at
1.0 and fused AdamW with the warmup/cosine schedule. Attention uses flash-attn when it is
installed, else PyTorch SDPA (``model.attention: auto``). GOAT and RoPE alternate per seq_len.

After ``--warmup`` untimed steps the CUDA peak-memory counter is reset, so "peak memory" is the
steady-state training peak. MFU = tokens/s x `goatdna.model.flops_per_token` / the GPU's dense
bf16 peak (`goatdna.training.callbacks.PEAK_FLOPS`; ``--peak-flops`` overrides it).

    python benchmarks/gpu_bench.py                 # ~2-3 minutes on one H200
    python benchmarks/gpu_bench.py --compile       # also try torch.compile

Writes benchmarks/results/gpu_bench-<gpu>-<date>.{json,md} and prints the table.
Goals: >= 400k tokens/s at seq_len 1024, GOAT/RoPE tokens/s >= 1.0, GOAT peak memory <= RoPE's.
Without a CUDA device it stops at once with exit status 2.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def require_cuda() -> torch.device:
    if not torch.cuda.is_available():
        print(
            "gpu_bench.py needs a CUDA GPU (torch.cuda.is_available() is False here); run it on a "
            "GPU machine: python benchmarks/gpu_bench.py",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return torch.device("cuda", torch.cuda.current_device())


def bench_one(scheme: str, seq_len: int, args: argparse.Namespace, device: torch.device) -> dict:
    from goatdna.model import GoatDNA, flops_per_token, next_token_loss
    from goatdna.training import load_run_config
    from goatdna.training.module import build_optimizer

    on_cuda = device.type == "cuda"
    if on_cuda:
        torch.cuda.empty_cache()
    overrides = [f"data.seq_len={seq_len}", f"model.train_length={seq_len}"]
    config = load_run_config(REPO / "configs" / f"{scheme}-{args.size}.yaml", overrides)
    micro = max(1, args.tokens // seq_len)
    torch.manual_seed(0)
    model = GoatDNA(config.model).to(device)
    optimizer, scheduler = build_optimizer(model, config.optim, 10_000, on_cuda=on_cuda)

    def sync() -> None:
        if on_cuda:
            torch.cuda.synchronize(device)

    step_fn = model
    if args.compile:
        step_fn = torch.compile(model)
    gen = torch.Generator(device=device).manual_seed(0)
    batches = [
        torch.randint(0, 4, (micro, seq_len + 1), device=device, generator=gen)  # (B, L + 1)
        for _ in range(args.accumulate)
    ]

    def step() -> None:
        for tokens in batches:
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=on_cuda):
                logits = step_fn(tokens[:, :-1])  # (B, L, V)
            loss = next_token_loss(logits, tokens[:, 1:]) / args.accumulate
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()

    row = {
        "scheme": scheme,
        "seq_len": seq_len,
        "micro_batch": micro,
        "accumulate": args.accumulate,
        "params": model.num_params(),
        "attention": config.model.attention,
    }
    try:
        for _ in range(args.warmup):
            step()
        sync()
        if on_cuda:
            torch.cuda.reset_peak_memory_stats(device)
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        sync()
        seconds = time.perf_counter() - start
    except torch.cuda.OutOfMemoryError:
        row.update(status="out of memory")
        return row
    tokens = args.steps * args.accumulate * micro * seq_len
    tokens_per_s = tokens / seconds
    row.update(
        status="ok",
        step_seconds=seconds / args.steps,
        tokens_per_s=tokens_per_s,
        flops_per_token=flops_per_token(config.model, seq_len),
        peak_memory_bytes=int(torch.cuda.max_memory_allocated(device)) if on_cuda else 0,
    )
    row["mfu"] = tokens_per_s * row["flops_per_token"] / args.peak_flops
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seq-lens", default="1024,2048")
    parser.add_argument("--tokens", type=int, default=32_768, help="tokens per micro-batch")
    parser.add_argument("--accumulate", type=int, default=4, help="micro-batches per step")
    parser.add_argument("--warmup", type=int, default=5, help="untimed optimizer steps")
    parser.add_argument("--steps", type=int, default=15, help="timed optimizer steps")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--peak-flops", type=float, default=None, help="dense bf16 FLOP/s")
    parser.add_argument(
        "--cpu-smoke",
        action="store_true",
        help="check this script on a CPU: tiny configs, fp32, a few tokens (numbers meaningless)",
    )
    args = parser.parse_args()
    args.size = "125m"
    if args.cpu_smoke:
        device = torch.device("cpu")
        args.size, args.seq_lens, args.tokens, args.accumulate = "tiny", "64,128", 256, 2
        args.warmup, args.steps, args.peak_flops = 1, 2, args.peak_flops or 1e11
        name = "cpu-smoke"
    else:
        device = require_cuda()
        name = torch.cuda.get_device_name(device)

    from goatdna.training.callbacks import gpu_peak_flops

    if args.peak_flops is None:
        args.peak_flops = gpu_peak_flops(name, "bf16-mixed")
        if args.peak_flops is None:
            raise SystemExit(f"unknown GPU {name!r}: pass --peak-flops (dense bf16 FLOP/s)")
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        import flash_attn  # noqa: F401

        kernel = "flash-attn"
    except ImportError:
        kernel = "torch SDPA"

    t0 = time.perf_counter()
    rows = []
    for seq_len in [int(x) for x in args.seq_lens.split(",")]:
        for scheme in ("goat", "rope"):
            row = bench_one(scheme, seq_len, args, device)
            rows.append(row)
            print(json.dumps(row), flush=True)

    lines = [
        f"{name}, {kernel}, bf16 autocast, {args.tokens} tokens x {args.accumulate} micro-batches "
        f"per step, {args.steps} timed steps after {args.warmup}"
        + (", torch.compile" if args.compile else ""),
        "",
        "| model | seq_len | micro-batch | tokens/s | MFU | peak memory GiB | GOAT/RoPE tokens/s "
        "| GOAT/RoPE memory |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    verdicts = []
    for row in rows:
        if row["status"] != "ok":
            lines.append(f"| {row['scheme']} | {row['seq_len']} | {row['micro_batch']} | "
                         f"{row['status']} | | | | |")  # fmt: skip
            continue
        rope = next(r for r in rows if r["scheme"] == "rope" and r["seq_len"] == row["seq_len"])
        speed = mem = ""
        if row["scheme"] == "goat" and rope.get("status") == "ok":
            s = row["tokens_per_s"] / rope["tokens_per_s"]
            m = row["peak_memory_bytes"] / max(1, rope["peak_memory_bytes"])
            speed, mem = f"{s:.3f}", f"{m:.3f}"
            verdicts.append(f"L={row['seq_len']}: GOAT/RoPE tokens/s {s:.3f} (goal >= 1.0: "
                            f"{'met' if s >= 1.0 else 'NOT met'}), memory {m:.3f} (goal <= 1.0: "
                            f"{'met' if m <= 1.0 else 'NOT met'})")  # fmt: skip
        if row["seq_len"] == 1024:
            ok = row["tokens_per_s"] >= 400_000
            verdicts.append(f"{row['scheme']} L=1024: {row['tokens_per_s']:,.0f} tokens/s "
                            f"(goal >= 400k: {'met' if ok else 'NOT met'})")  # fmt: skip
        lines.append(
            f"| {row['scheme']} | {row['seq_len']} | {row['micro_batch']} | "
            f"{row['tokens_per_s']:,.0f} | {row['mfu']:.3f} | "
            f"{row['peak_memory_bytes'] / 2**30:.2f} | {speed} | {mem} |"
        )
    lines += ["", *verdicts, f"total {time.perf_counter() - t0:.0f} s"]
    table = "\n".join(lines)
    print()
    print(table)

    if args.cpu_smoke:
        return  # nothing worth keeping
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = f"gpu_bench-{re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')}-{dt.date.today()}"
    meta = {"gpu": name, "kernel": kernel, "torch": torch.__version__, "args": vars(args)}
    (RESULTS / f"{stem}.json").write_text(json.dumps({**meta, "rows": rows}, indent=2) + "\n")
    (RESULTS / f"{stem}.md").write_text(table + "\n")
    print(f"wrote {RESULTS / stem}.json and .md")


if __name__ == "__main__":
    main()
