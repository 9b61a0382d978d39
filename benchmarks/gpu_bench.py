"""125M GOAT vs RoPE training throughput on one GPU: tokens/s, MFU and peak memory.

Runs from a plain checkout (``python benchmarks/gpu_bench.py``: the repository root is put on
``sys.path``, no ``pip install`` needed). Builds the 125M models from
configs/{goat,rope}-125m.yaml at each ``--seq-lens`` (the GOAT prior's training length follows
seq_len) and times real optimizer steps in bf16 autocast with fp32 master weights (what
Lightning's ``bf16-mixed`` does): ``--accumulate`` micro-batches of ``--tokens`` tokens each,
forward + next-base cross-entropy + backward, global-norm clipping at 1.0 and fused AdamW with
the warmup/cosine schedule. Attention uses flash-attn when it is installed, else PyTorch SDPA
(``model.attention: auto``); what actually ran is recorded: the backend of every layer and the
SDPA kernels dispatched (flash / efficient / cuDNN / math, probed on one eager step).

Both models of a seq_len are built side by side; after ``--warmup`` untimed steps each, the
timed blocks of ``--steps`` steps alternate GOAT, RoPE / RoPE, GOAT for ``--repeats`` rounds, so
neither profits from running second; tokens/s is reported from the fastest and the median block.
Peak memory is each model's own steady-state training peak: the CUDA peak over its blocks minus
what was allocated when the block started, plus its own parameters and optimizer state (the
other model's resident state is not counted). MFU = tokens/s x `goatdna.model.flops_per_token`
/ the GPU's dense bf16 peak (`goatdna.training.throughput.PEAK_FLOPS`; ``--peak-flops``).

``--compile``: ``torch._dynamo.reset()`` before each seq_len, ``torch.compile(dynamic=False)``
for both models (equally static graphs); the first (compiling) step is timed and reported as
compile time, apart from the step times.

    python benchmarks/gpu_bench.py                  # ~3 minutes on one H200
    python benchmarks/gpu_bench.py --compile --seq-lens 1024
    python benchmarks/gpu_bench.py --cpu-smoke      # the same code on tiny configs, on a CPU

Writes ``<out>/gpu_bench-<gpu>-<date>[-compile].{json,md}`` (``--out``; default ``$OUT`` when set,
else benchmarks/results/) and prints the table. Goals: >= 400k tokens/s at seq_len 1024,
GOAT/RoPE tokens/s >= 1.0, GOAT peak memory <= RoPE's. Without a CUDA device (and without
``--cpu-smoke``) it stops at once with exit status 2.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # a plain checkout: goatdna need not be installed
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402

SDPA_KERNELS = {
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_flash_attention_for_cpu": "flash (cpu)",
    "_scaled_dot_product_efficient_attention": "efficient",
    "_scaled_dot_product_cudnn_attention": "cuDNN",
    "_scaled_dot_product_attention_math": "math",
    "_scaled_dot_product_fused_attention_overrideable": "overrideable",
    "_flash_attn_forward": "flash-attn",
    "flash_attn": "flash-attn",
}


def default_out() -> Path:
    """``$OUT`` when set (a result folder chosen by the caller), else benchmarks/results/."""
    return Path(os.environ["OUT"]) if os.environ.get("OUT") else REPO / "benchmarks" / "results"


def require_cuda() -> torch.device:
    if not torch.cuda.is_available():
        print(
            "gpu_bench.py needs a CUDA GPU (torch.cuda.is_available() is False here); run it on a "
            "GPU machine, or check the script on a CPU with --cpu-smoke",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return torch.device("cuda", torch.cuda.current_device())


def environment(device: torch.device, name: str) -> dict[str, Any]:
    """What ran: versions, device, flash-attn, SDPA backends enabled."""
    try:
        import flash_attn

        flash = getattr(flash_attn, "__version__", "installed")
    except ImportError:
        flash = None
    env: dict[str, Any] = {
        "device": name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "flash_attn": flash,
        "python": sys.version.split()[0],
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(
            capability=f"{props.major}.{props.minor}",
            memory_gib=round(props.total_memory / 2**30, 1),
            sdpa_enabled={
                "flash": torch.backends.cuda.flash_sdp_enabled(),
                "efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
                "cudnn": torch.backends.cuda.cudnn_sdp_enabled(),
                "math": torch.backends.cuda.math_sdp_enabled(),
            },
        )
    return env


def attention_kernels(fn, *args) -> list[str]:
    """The attention kernels one call of ``fn`` dispatches (forward and backward ops)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: set[str] = set()

    class Probe(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.__name__.split(".")[0]
            op = str(func)
            for key, label in SDPA_KERNELS.items():
                if name == key or (key == "flash_attn" and op.startswith("flash_attn")):
                    seen.add(label)
            return func(*args, **(kwargs or {}))

    with Probe():
        fn(*args)
    return sorted(seen) or ["none seen"]


class Contender:
    """One model (GOAT or RoPE) at one seq_len with its optimizer, batches and step function."""

    def __init__(self, scheme: str, seq_len: int, args: argparse.Namespace, device: torch.device):
        from goatdna.model import DNADecoder, flops_per_token, next_token_loss
        from goatdna.training import load_run_config
        from goatdna.training.module import build_optimizer

        self.scheme, self.seq_len, self.device = scheme, seq_len, device
        self.on_cuda = device.type == "cuda"
        overrides = [f"data.seq_len={seq_len}", *args.sets]  # model.train_length follows
        config = load_run_config(REPO / "configs" / f"{scheme}-{args.size}.yaml", overrides)
        self.config = config
        self.micro = max(1, args.tokens // seq_len)
        self.accumulate = args.accumulate
        torch.manual_seed(0)
        self.model = DNADecoder(config.model).to(device)
        self.optimizer, self.scheduler = build_optimizer(
            self.model, config.optim, 10_000, on_cuda=self.on_cuda
        )
        self.fn = (
            torch.compile(self.model, dynamic=False, backend=args.compile_backend)
            if args.compile
            else self.model
        )
        gen = torch.Generator(device=device).manual_seed(0)
        self.batches = [
            torch.randint(0, 4, (self.micro, seq_len + 1), device=device, generator=gen)
            for _ in range(args.accumulate)
        ]  # each (B, L + 1)
        self.loss_fn = next_token_loss
        self.flops_per_token = flops_per_token(config.model, seq_len)
        self.block_seconds: list[float] = []
        self.block_peaks: list[int] = []
        self.compile_seconds: float | None = None
        self.status = "ok"

    def forward_backward(self, tokens: torch.Tensor) -> None:
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.on_cuda):
            logits = self.fn(tokens[:, :-1])  # (B, L, V)
        loss = self.loss_fn(logits, tokens[:, 1:]) / self.accumulate
        loss.backward()

    def step(self) -> None:
        for tokens in self.batches:
            self.forward_backward(tokens)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()

    def resident_bytes(self) -> int:
        """Parameters plus optimizer state: what this model keeps allocated between steps."""
        total = sum(p.numel() * p.element_size() for p in self.model.parameters())
        for state in self.optimizer.state.values():
            total += sum(v.numel() * v.element_size() for v in state.values() if torch.is_tensor(v))
        return total

    @property
    def tokens_per_step(self) -> int:
        return self.accumulate * self.micro * self.seq_len

    def row(self, args: argparse.Namespace) -> dict[str, Any]:
        row: dict[str, Any] = {
            "scheme": self.scheme,
            "seq_len": self.seq_len,
            "micro_batch": self.micro,
            "accumulate": self.accumulate,
            "params": self.model.num_params(),
            "attention_config": self.config.model.attention,
            "attention_backend_per_layer": [b.attn.backend for b in self.model.blocks],
            "status": self.status,
            "compile_seconds": self.compile_seconds,
        }
        if self.status != "ok" or not self.block_seconds:
            return row
        best = min(self.block_seconds) / args.steps
        median = statistics.median(self.block_seconds) / args.steps
        peak = max(self.block_peaks) if self.on_cuda else 0
        row.update(
            blocks=len(self.block_seconds),
            step_seconds_min=best,
            step_seconds_median=median,
            tokens_per_s=self.tokens_per_step / best,
            tokens_per_s_median=self.tokens_per_step / median,
            flops_per_token=self.flops_per_token,
            peak_memory_bytes=peak,
        )
        row["mfu"] = row["tokens_per_s"] * self.flops_per_token / args.peak_flops
        row["mfu_median"] = row["tokens_per_s_median"] * self.flops_per_token / args.peak_flops
        return row


def run_block(c: Contender, steps: int) -> None:
    """``steps`` timed optimizer steps of one contender; its own peak memory during them."""
    if c.status != "ok":
        return
    sync = torch.cuda.synchronize if c.on_cuda else (lambda *a: None)
    try:
        sync(c.device)
        if c.on_cuda:
            start_alloc = torch.cuda.memory_allocated(c.device)
            torch.cuda.reset_peak_memory_stats(c.device)
        t0 = time.perf_counter()
        for _ in range(steps):
            c.step()
        sync(c.device)
        c.block_seconds.append(time.perf_counter() - t0)
        if c.on_cuda:
            above = torch.cuda.max_memory_allocated(c.device) - start_alloc
            c.block_peaks.append(int(above + c.resident_bytes()))
    except torch.cuda.OutOfMemoryError:
        c.status = "out of memory"
        c.optimizer.zero_grad(set_to_none=True)
        if c.on_cuda:
            torch.cuda.empty_cache()


def bench_seq_len(seq_len: int, args: argparse.Namespace, device: torch.device) -> list[dict]:
    if args.compile:
        torch._dynamo.reset()  # fresh caches: each seq_len compiles from scratch, equally
        torch._dynamo.utils.counters.clear()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    pair = [Contender(s, seq_len, args, device) for s in ("goat", "rope")]
    kernels: dict[str, list[str]] = {}
    for c in pair:
        # probe the attention kernels on one eager micro-batch (not timed, gradients dropped)
        probe_fn = c.fn
        c.fn = c.model
        try:
            kernels[c.scheme] = attention_kernels(c.forward_backward, c.batches[0][:1])
        finally:
            c.fn = probe_fn
            c.model.zero_grad(set_to_none=True)
        sync = torch.cuda.synchronize if c.on_cuda else (lambda *a: None)
        try:
            t0 = time.perf_counter()
            c.step()  # compiles under --compile
            sync(c.device)
            if args.compile:
                c.compile_seconds = time.perf_counter() - t0
            for _ in range(args.warmup - 1):
                c.step()
            sync(c.device)
        except torch.cuda.OutOfMemoryError:
            c.status = "out of memory"
    for r in range(args.repeats):
        order = pair if r % 2 == 0 else pair[::-1]
        for c in order:
            run_block(c, args.steps)
    breaks = None
    if args.compile:
        breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    rows = []
    for c in pair:
        row = c.row(args)
        row["sdpa_kernels"] = kernels[c.scheme]
        row["graph_breaks_both_models"] = breaks
        rows.append(row)
        print(json.dumps(row), flush=True)
    del pair
    return rows


def table(rows: list[dict], header: str) -> tuple[str, list[str]]:
    lines = [
        header,
        "",
        "| model | seq_len | micro-batch | tokens/s (best) | tokens/s (median) | MFU | "
        "peak memory GiB | compile s | attention | GOAT/RoPE tokens/s | GOAT/RoPE memory |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    verdicts = []
    for row in rows:
        backends = sorted(set(row["attention_backend_per_layer"]))
        attention = f"{'/'.join(backends)}: {', '.join(row.get('sdpa_kernels', []))}"
        compile_s = f"{row['compile_seconds']:.1f}" if row.get("compile_seconds") else ""
        if row["status"] != "ok":
            lines.append(f"| {row['scheme']} | {row['seq_len']} | {row['micro_batch']} | "
                         f"{row['status']} | | | | {compile_s} | {attention} | | |")  # fmt: skip
            continue
        rope = next(r for r in rows if r["scheme"] == "rope" and r["seq_len"] == row["seq_len"])
        speed = mem = ""
        if row["scheme"] == "goat" and rope.get("status") == "ok":
            s = row["tokens_per_s"] / rope["tokens_per_s"]
            s_med = row["tokens_per_s_median"] / rope["tokens_per_s_median"]
            m = row["peak_memory_bytes"] / max(1, rope["peak_memory_bytes"])
            speed, mem = f"{s:.3f} (median {s_med:.3f})", f"{m:.3f}"
            verdicts.append(f"L={row['seq_len']}: GOAT/RoPE tokens/s {s:.3f} best, {s_med:.3f} "
                            f"median (goal >= 1.0: {'met' if s >= 1.0 else 'NOT met'}), memory "
                            f"{m:.3f} (goal <= 1.0: {'met' if m <= 1.0 else 'NOT met'})")  # fmt: skip
        if row["seq_len"] == 1024:
            ok = row["tokens_per_s"] >= 400_000
            verdicts.append(f"{row['scheme']} L=1024: {row['tokens_per_s']:,.0f} tokens/s "
                            f"(goal >= 400k: {'met' if ok else 'NOT met'})")  # fmt: skip
        lines.append(
            f"| {row['scheme']} | {row['seq_len']} | {row['micro_batch']} | "
            f"{row['tokens_per_s']:,.0f} | {row['tokens_per_s_median']:,.0f} | {row['mfu']:.3f} | "
            f"{row['peak_memory_bytes'] / 2**30:.2f} | {compile_s} | {attention} | {speed} | {mem} |"
        )
    return "\n".join(lines), verdicts


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> Path:  # noqa: PLR0915 (the measurement script, step by step)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seq-lens", default="1024,2048")
    parser.add_argument("--tokens", type=int, default=32_768, help="tokens per micro-batch")
    parser.add_argument("--accumulate", type=int, default=4, help="micro-batches per step")
    parser.add_argument("--warmup", type=int, default=3, help="untimed optimizer steps")
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps per timed block")
    parser.add_argument("--repeats", type=int, default=4, help="timed blocks per model")
    parser.add_argument("--compile", action="store_true", help="torch.compile(dynamic=False)")
    parser.add_argument("--peak-flops", type=float, default=None, help="dense bf16 FLOP/s")
    parser.add_argument("--out", type=Path, default=None, help="result folder (default $OUT)")
    parser.add_argument(
        "--compile-backend", default="inductor", help="torch.compile backend (CPU checks: eager)"
    )
    parser.add_argument(
        "--cpu-smoke",
        action="store_true",
        help="check this script on a CPU: tiny configs, fp32, a few tokens (numbers meaningless)",
    )
    args = parser.parse_args(argv)
    args.size = "125m"
    out = args.out or default_out()
    args.sets = []
    if args.cpu_smoke:
        device = torch.device("cpu")
        args.size, args.tokens, args.accumulate = "tiny", 64, 1
        if args.seq_lens == parser.get_default("seq_lens"):
            args.seq_lens = "32,64"
        args.warmup, args.steps, args.repeats = 1, 1, 2
        args.sets = ["model.n_layers=1", "model.d_model=32", "model.n_heads=2", "model.mlp_hidden=64",
                     "model.goat_modes=2"]  # fmt: skip
        args.peak_flops = args.peak_flops or 1e11
        name = "cpu-smoke"
    else:
        device = require_cuda()
        name = torch.cuda.get_device_name(device)
    args.warmup = max(1, args.warmup)

    from goatdna.training.throughput import gpu_peak_flops

    if args.peak_flops is None:
        args.peak_flops = gpu_peak_flops(name, "bf16-mixed")
        if args.peak_flops is None:
            raise SystemExit(f"unknown GPU {name!r}: pass --peak-flops (dense bf16 FLOP/s)")
    torch.backends.cuda.matmul.allow_tf32 = True
    env = environment(device, name)
    print(json.dumps(env), flush=True)

    t0 = time.perf_counter()
    rows = []
    for seq_len in [int(x) for x in args.seq_lens.split(",")]:
        rows += bench_seq_len(seq_len, args, device)

    header = (
        f"{name}, torch {env['torch']} (CUDA {env['cuda']}), flash-attn {env['flash_attn']}, "
        f"{'bf16 autocast' if device.type == 'cuda' else 'fp32'}, {args.tokens} tokens x {args.accumulate} micro-batches per step, "
        f"{args.repeats} alternating blocks of {args.steps} steps per model after {args.warmup} "
        "warm-up steps" + (", torch.compile(dynamic=False)" if args.compile else "")
    )
    text, verdicts = table(rows, header)
    text += "\n\n" + "\n".join([*verdicts, f"total {time.perf_counter() - t0:.0f} s"]) + "\n"
    print()
    print(text)

    out.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    stem = f"gpu_bench-{slug}-{dt.date.today()}" + ("-compile" if args.compile else "")
    meta = {"environment": env, "args": {k: str(v) for k, v in vars(args).items()}}
    write_atomic(out / f"{stem}.json", json.dumps({**meta, "rows": rows}, indent=2) + "\n")
    write_atomic(out / f"{stem}.md", text)
    print(f"wrote {out / stem}.json and .md")
    return out / f"{stem}.json"


if __name__ == "__main__":
    main()
