"""goatdna's decoders against their peers of the same shape: transformers' Llama and a bare decoder.

Four models per shape, built with the same layers, width, heads and SwiGLU width:

* ``goat``: goatdna's `DNADecoder` with GOAT's prior (content dims d_c = d_h - (2R + 2) for q/k);
* ``rope``: goatdna's `DNADecoder` with RoPE;
* ``llama``: transformers' ``LlamaForCausalLM`` (SDPA attention, RoPE, no biases, untied head);
* ``bare``: a nanoGPT-style decoder written here: embedding, [RMSNorm, q/k/v Linear, one causal
  SDPA call with no positions at all, o Linear, RMSNorm, SwiGLU] per layer, RMSNorm, head. It is
  the floor GOAT's design promises: GOAT's prior rides inside that one SDPA call. Its RMSNorms are
  goatdna's (`goatdna.model.norm`: nn.RMSNorm with a closed-form CPU backward), so that goat /
  bare measures what the positions cost and not the norm; Llama keeps its own ``LlamaRMSNorm``.

Parameter counts are printed beside the table to show the shapes match (GOAT's q/k are d_c wide
and its prior adds a few thousand parameters per layer; Llama pads nothing).

Measured, for each shape: a forward (no autograd), a training step (forward, next-token cross
entropy, backward, fused AdamW step), cached greedy generation (goatdna's own KV-cache path;
transformers' ``generate`` for Llama; the bare decoder has no cache and is left out), and the
peak extra resident memory of one forward over a warm model, each model in a fresh subprocess
(``VmHWM`` from /proc/self/status after resetting it through /proc/self/clear_refs, minus the
RSS before the forward: `attention_bench.measure`).

Why CPU time, one thread and alternating blocks: the machine is shared, so wall time measures the
neighbours. ``time.process_time`` counts only this process's CPU; one thread avoids OpenMP
barriers that stall when a worker is descheduled. The models run in blocks, one block of
``--reps`` steps per model per round, the order rotating every round, so load drift hits all of
them alike; a ratio is formed per round (e.g. goat's median step / bare's median step in the same
round) and the table gives the median over rounds, with a 90% bootstrap interval. The default,
61 rounds of one step, narrowed the intervals to about +-1% on this machine, where 11 rounds of
3 left them 5-15% wide. The load average is printed beside it.

Why glibc's heap thresholds are fixed first (``mallopt``; ``--default-malloc`` keeps them
dynamic): by default glibc serves a block above a moving threshold with fresh pages and trims the
heap's free top, so whether a model's temporaries land on memory already mapped or on new pages
(a minor page fault, and the kernel zeroing 4 KiB, per page touched) depends on the order of its
allocations and frees, not on its arithmetic. In one run of the mid shape the bare decoder's
training step took 0 faults, GOAT's 4,500 and RoPE's and Llama's 5,700 (GOAT 1.02x the bare
decoder's CPU time); with the thresholds fixed no model faults at all (GOAT 0.985x). Fixed, every
model reuses its heap as PyTorch's caching allocator does on a GPU. The table reports the minor
faults per step either way.

Run: ``python benchmarks/peer_bench.py`` (about 10 minutes for both shapes; ``--quick`` for a
smoke run). ``--json PATH`` keeps the raw numbers.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from goatdna.model import DNADecoder, ModelConfig
from goatdna.model.norm import RMSNorm

MODELS = ("goat", "rope", "llama", "bare")
GENERATORS = ("goat", "rope", "llama")


@dataclass(frozen=True)
class Shape:
    """One model shape and the token counts it is measured at."""

    name: str
    n_layers: int
    d_model: int
    n_heads: int
    mlp_hidden: int
    goat_modes: int
    batch: int  # forward and training step
    length: int
    prompt: int  # generation
    new_tokens: int
    memory_length: int  # the forward whose peak memory is read (batch 1)


SHAPES = {
    "tiny": Shape("tiny", 4, 128, 4, 352, 6, 4, 256, 64, 64, 4096),  # configs/goat-tiny.yaml
    "mid": Shape("mid", 8, 256, 4, 704, 8, 1, 1024, 64, 64, 4096),  # head dim 64, like 125M
}


# ---------------------------------------------------------------------- the bare decoder
class BareBlock(nn.Module):
    def __init__(self, d: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.heads = heads
        self.attn_norm, self.mlp_norm = RMSNorm(d, eps=1e-5), RMSNorm(d, eps=1e-5)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        B, L, d = x.shape
        h = self.attn_norm(x)
        q, k, v = (
            p(h).view(B, L, self.heads, -1).transpose(1, 2) for p in (self.q, self.k, self.v)
        )
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, L, d_h)
        x = x + self.o(y.transpose(1, 2).reshape(B, L, d))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class BareDecoder(nn.Module):
    """nanoGPT-style decoder with no positions: the cost floor of one SDPA call per layer."""

    def __init__(self, s: Shape, vocab: int = 5) -> None:
        super().__init__()
        self.embed = nn.Embedding(8, s.d_model)
        self.blocks = nn.ModuleList(
            BareBlock(s.d_model, s.n_heads, s.mlp_hidden) for _ in range(s.n_layers)
        )
        self.norm = RMSNorm(s.d_model, eps=1e-5)
        self.head = nn.Linear(s.d_model, vocab, bias=False)

    def forward(self, idx: Tensor) -> Tensor:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


# ---------------------------------------------------------------------- the models
def goat_config(s: Shape, positional: str) -> ModelConfig:
    return ModelConfig(
        positional=positional,  # type: ignore[arg-type]
        n_layers=s.n_layers,
        d_model=s.d_model,
        n_heads=s.n_heads,
        mlp_hidden=s.mlp_hidden,
        goat_modes=s.goat_modes,
        train_length=s.length,
        attention="sdpa",
    )


def build(kind: str, s: Shape) -> nn.Module:
    torch.manual_seed(0)
    if kind in ("goat", "rope"):
        return DNADecoder(goat_config(s, kind))
    if kind == "bare":
        return BareDecoder(s)
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=8,
        hidden_size=s.d_model,
        intermediate_size=s.mlp_hidden,
        num_hidden_layers=s.n_layers,
        num_attention_heads=s.n_heads,
        num_key_value_heads=s.n_heads,
        max_position_embeddings=8192,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        attention_bias=False,
        mlp_bias=False,
        use_cache=False,
    )
    return LlamaForCausalLM._from_config(config, attn_implementation="sdpa")


def logits_of(kind: str, model: nn.Module, idx: Tensor) -> Tensor:
    if kind == "llama":
        return model(input_ids=idx, use_cache=False).logits
    return model(idx)


def forward_step(kind: str, model: nn.Module, idx: Tensor) -> Callable[[], None]:
    def step() -> None:
        with torch.no_grad():
            logits_of(kind, model, idx)

    return step


def train_step(kind: str, model: nn.Module, idx: Tensor) -> Callable[[], None]:
    # fused, as goatdna's training runs AdamW on CUDA: the CPU's per-tensor loop would charge
    # every small tensor (GOAT's prior has 8 per layer) a dozen ops that no GPU run pays
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    def step() -> None:
        logits = logits_of(kind, model, idx)[:, :-1]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), idx[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def generate_step(kind: str, model: nn.Module, prompt: Tensor, new: int) -> Callable[[], None]:
    """Greedy decoding of ``new`` tokens after ``prompt`` through each model's own KV cache."""
    if kind == "llama":

        def step() -> None:
            with torch.no_grad():
                model.generate(
                    prompt,
                    attention_mask=torch.ones_like(prompt),
                    max_new_tokens=new,
                    min_new_tokens=new,
                    do_sample=False,
                    use_cache=True,
                    pad_token_id=0,
                )

        return step
    assert isinstance(model, DNADecoder)

    def step() -> None:
        with torch.no_grad():
            cache = model.new_cache(prompt.shape[0], prompt.shape[1] + new)
            token = model.forward_cached(prompt, cache)[:, -1:].argmax(-1)
            for _ in range(new - 1):
                token = model.forward_cached(token, cache)[:, -1:].argmax(-1)

    return step


# ---------------------------------------------------------------------- timing
def fix_malloc_thresholds() -> bool:
    """Fix glibc's mmap and trim thresholds for this process (module docstring): blocks under
    32 MiB come from the heap, which is never trimmed below 1 GiB free. False where the C
    library is not glibc (the thresholds then stay as they are)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    return bool(
        libc.mallopt(m_mmap_threshold, 32 << 20) and libc.mallopt(m_trim_threshold, 1 << 30)
    )


def cpu_seconds(step: Callable[[], None]) -> tuple[float, int]:
    """CPU seconds of one call and the minor page faults it took."""
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.process_time()
    step()
    seconds = time.process_time() - start
    return seconds, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults


@dataclass
class Timings:
    """Per model: its median CPU seconds per step in each round, and its minor page faults per
    step (median over every step)."""

    seconds: dict[str, list[float]]
    faults: dict[str, float]


def alternate(steps: dict[str, Callable[[], None]], rounds: int, reps: int) -> Timings:
    """Each round: ``reps`` calls per model in a block, the order rotating."""
    for step in steps.values():  # warm-up: caches, allocator, lazy inits
        step()
    names = list(steps)
    medians: dict[str, list[float]] = {name: [] for name in names}
    faults: dict[str, list[int]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            calls = [cpu_seconds(steps[name]) for _ in range(reps)]
            medians[name].append(statistics.median(seconds for seconds, _ in calls))
            faults[name] += [n for _, n in calls]
    return Timings(medians, {name: statistics.median(n) for name, n in faults.items()})


def ratio(medians: dict[str, list[float]], a: str, b: str) -> float:
    """Median over rounds of a's time / b's time in the same round."""
    return statistics.median(x / y for x, y in zip(medians[a], medians[b], strict=True))


def ratio_interval(
    medians: dict[str, list[float]], a: str, b: str, level: float = 0.9, draws: int = 2000
) -> tuple[float, float]:
    """A bootstrap interval (percentile, ``level``) of `ratio` over the rounds: how far the
    median of the per-round ratios moves when the rounds are drawn again. On a shared machine a
    few percent is noise; a goal such as <= 0.95 is met only when the interval's top is below it."""
    import numpy as np

    per_round = np.array([x / y for x, y in zip(medians[a], medians[b], strict=True)])
    rng = np.random.default_rng(0)
    picks = rng.integers(0, per_round.size, size=(draws, per_round.size))
    boot = np.median(per_round[picks], axis=1)
    tail = (1 - level) / 2
    return float(np.quantile(boot, tail)), float(np.quantile(boot, 1 - tail))


def ratio_cell(medians: dict[str, list[float]], a: str, b: str) -> str:
    low, high = ratio_interval(medians, a, b)
    return f"{ratio(medians, a, b):.3f} ({low:.2f}-{high:.2f})"


# ---------------------------------------------------------------------- memory (subprocess)
def memory_child(kind: str, shape: str) -> None:
    """One warm forward, then the peak extra resident memory of the next: print JSON."""
    from attention_bench import measure

    torch.set_num_threads(1)
    s = SHAPES[shape]
    model = build(kind, s).eval()
    idx = torch.randint(0, 4, (1, s.memory_length))
    step = forward_step(kind, model, idx)
    step()
    _, peak = measure(step)
    print(json.dumps({"peak_bytes": peak}))


def memory(kind: str, shape: str) -> int:
    return child_peak(__file__, "--memory-child", kind, shape)


def child_peak(script: str, *args: str) -> int:
    """Run ``script`` with ``args`` in a fresh process whose glibc returns freed blocks at once
    (attention_bench's memory rule): the ``peak_bytes`` of the JSON line it prints last."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}
    done = subprocess.run(
        [sys.executable, script, *args],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return int(json.loads(done.stdout.strip().splitlines()[-1])["peak_bytes"])


# ---------------------------------------------------------------------- the run
@dataclass
class ShapeResult:
    shape: str
    params: dict[str, int]
    forward: Timings
    train: Timings
    generate: Timings
    peak_bytes: dict[str, int]


def run_shape(s: Shape, rounds: int, reps: int) -> ShapeResult:
    models = {kind: build(kind, s) for kind in MODELS}
    params = {kind: sum(p.numel() for p in m.parameters()) for kind, m in models.items()}
    idx = torch.randint(0, 4, (s.batch, s.length))
    for m in models.values():
        m.eval()  # no dropout anywhere; eval keeps transformers from warning about caches
    forward = alternate({k: forward_step(k, m, idx) for k, m in models.items()}, rounds, reps)
    train = alternate({k: train_step(k, m, idx) for k, m in models.items()}, rounds, reps)
    prompt = torch.randint(0, 4, (1, s.prompt))
    generate = alternate(
        {k: generate_step(k, models[k], prompt, s.new_tokens) for k in GENERATORS}, rounds, 1
    )
    peak = {kind: memory(kind, s.name) for kind in MODELS}
    return ShapeResult(s.name, params, forward, train, generate, peak)


RATIOS = (("goat", "bare"), ("goat", "llama"), ("rope", "llama"), ("goat", "rope"))


def table(results: list[ShapeResult], load: tuple[float, float], fixed_heap: bool) -> str:
    heap = "fixed" if fixed_heap else "dynamic (glibc's default)"
    lines = [
        f"load average (1 min) {load[0]:.2f} at the start, {load[1]:.2f} at the end; "
        "CPU time, 1 thread, median of rounds (90% bootstrap interval over the rounds); "
        f"heap thresholds {heap}",
        "",
        "| shape | measure | " + " | ".join(f"{a} / {b}" for a, b in RATIOS) + " | ms per step "
        "(goat, rope, llama, bare) |",
        "| --- | --- | " + " | ".join("---:" for _ in RATIOS) + " | --- |",
    ]
    for r in results:
        for label, timings in (
            ("forward", r.forward),
            ("train step", r.train),
            ("generate", r.generate),
        ):
            medians = timings.seconds
            cells = [
                ratio_cell(medians, a, b) if a in medians and b in medians else "-"
                for a, b in RATIOS
            ]
            ms = ", ".join(
                f"{1e3 * statistics.median(medians[k]):.1f}" if k in medians else "-"
                for k in MODELS
            )
            lines.append(f"| {r.shape} | {label} | " + " | ".join(cells) + f" | {ms} |")
        peak = r.peak_bytes
        cells = [f"{peak[a] / peak[b]:.3f}" for a, b in RATIOS]
        mib = ", ".join(f"{peak[k] / 2**20:.1f}" for k in MODELS)
        lines.append(
            f"| {r.shape} | forward peak memory | " + " | ".join(cells) + f" | {mib} MiB |"
        )
    lines.append("")
    for r in results:
        lines.append(
            f"parameters, {r.shape}: " + ", ".join(f"{k} {v:,}" for k, v in r.params.items())
        )
        faults = ", ".join(
            f"{label} " + " / ".join(f"{t.faults.get(k, 0):.0f}" for k in MODELS)
            for label, t in (("forward", r.forward), ("train step", r.train))
        )
        lines.append(
            f"minor page faults per step, {r.shape} (goat / rope / llama / bare): {faults}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="tiny,mid", help="comma-separated: tiny, mid")
    parser.add_argument("--rounds", type=int, default=61)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="tiny shape, 2 rounds of 1")
    parser.add_argument("--json", help="also write the raw numbers here")
    parser.add_argument(
        "--default-malloc",
        action="store_true",
        help="keep glibc's dynamic heap thresholds (see the module docstring)",
    )
    parser.add_argument(
        "--memory-child", nargs=2, metavar=("MODEL", "SHAPE"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.memory_child:
        memory_child(*args.memory_child)
        return
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    fixed = not args.default_malloc and fix_malloc_thresholds()
    print(
        f"[peer_bench] glibc heap thresholds: {'fixed' if fixed else 'dynamic (default)'}",
        file=sys.stderr,
        flush=True,
    )
    names = ["tiny"] if args.quick else args.shapes.split(",")
    rounds, reps = (2, 1) if args.quick else (args.rounds, args.reps)
    start_load = os.getloadavg()[0]
    results = []
    for name in names:
        print(f"[peer_bench] shape {name}: {SHAPES[name]}", file=sys.stderr, flush=True)
        results.append(run_shape(SHAPES[name], rounds, reps))
    print(table(results, (start_load, os.getloadavg()[0]), fixed))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in results], f, indent=1)


if __name__ == "__main__":
    main()
