"""goatdna against the authors' GOAT module (goat-attention 0.1.1) at the paper's genome.py shape.

Two parts, in one run:

* **layer**: genome.py's attention, ``GoatAttention.for_gpt(embed_dim=512, num_heads=8,
  kv_num_heads=8, dropout=0.0, pos_rank=2, abs_rank=8, prior_init="seeded",
  training_seq_len=1024)`` called as ``attn(x, x, x, need_weights=False, is_causal=True)``,
  against ``goatdna.model.from_goat_attention`` of that very module (same parameters, same
  function: the two outputs are first checked to agree to 1e-5, or the run stops). Timed: the
  forward with no autograd, and forward + backward (into the input and every parameter); read:
  the peak extra resident memory of one forward, each layer in a fresh process.
* **model**: genome.py's GPT built from those modules (tests/genome_gpt.py: pre-LN LayerNorm,
  GELU MLP x4 with biases, tied embeddings, the model tests/test_model_goat_conformance.py checks
  against goatdna's), goatdna's `DNADecoder` from configs/goat-paper-dna.yaml's model section
  holding the same weights (checked to give the same logits to 1e-5), and goatdna's bare SDPA
  decoder: that same config with ``positional: nope`` (the same trunk, one causal SDPA call per
  layer and no positions: the floor GOAT's design promises). Timed: one training step
  (forward, next-token cross entropy, backward, fused AdamW: peer_bench's ``train_step``).

Goals (issue 41.5): goatdna <= 0.9x the authors' time for the layer's forward and forward +
backward, its forward peak memory <= theirs, and goatdna's whole-model training step <= 1.02x the
bare decoder's. A goal counts as met only when the top of the ratio's 90% interval is under it.

Timing is peer_bench's: CPU time of this process, one thread, glibc's heap thresholds fixed,
interleaved rounds with the order rotating, the per-round ratio's median with a bootstrap interval
over rounds, the load average printed beside it (peer_bench's docstring says why each).

Run: ``OMP_NUM_THREADS=1 python benchmarks/authors_bench.py`` (batch 1 x 1,024 bases, a few
minutes on a loaded CPU; ``--shape 8x1024`` is genome.py's own micro-batch; ``--quick`` is a
seconds-long smoke run at d_model 64). ``--json PATH`` keeps the raw numbers.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from peer_bench import (
    Timings,
    alternate,
    child_peak,
    fix_malloc_thresholds,
    ratio,
    ratio_interval,
    train_step,
)
from torch import nn

from goatdna.model import DNADecoder, ModelConfig, from_goat_attention

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the reference model the conformance test checks
from genome_gpt import (  # noqa: E402
    GENOME_PY_GOAT,
    GenomeGPT,
    genome_goat_attention,
    goatdna_from_genome_gpt,
)

TRAIN = 1024  # genome.py's --seq_len: GoatAttention's training_seq_len and goatdna's train_length
TOL = 1e-5


@dataclasses.dataclass(frozen=True)
class Setup:
    batch: int
    length: int
    d: int = 512
    heads: int = 8
    layers: int = 8


QUICK = Setup(1, 64, 64, 4, 2)


# ---------------------------------------------------------------------- the layer
def build_layers(s: Setup) -> dict[str, nn.Module]:
    torch.manual_seed(0)
    theirs = genome_goat_attention(s.d, s.heads, TRAIN)
    return {"authors": theirs, "goatdna": from_goat_attention(theirs)}


def layer_out(kind: str, layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    if kind == "authors":
        return layer(x, x, x, need_weights=False, is_causal=True)[0]
    return layer(x)


def check_same_layer(layers: dict[str, nn.Module], x: torch.Tensor) -> None:
    """The timing compares one function: both layers' outputs agree to `TOL` (else ValueError)."""
    with torch.no_grad():
        outs = [layer_out(kind, layer, x) for kind, layer in layers.items()]
    try:
        torch.testing.assert_close(outs[0], outs[1], atol=TOL, rtol=TOL)
    except AssertionError as e:
        raise ValueError(f"the layers compute different functions: {e}") from None


def layer_forward(kind: str, layer: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    def step() -> None:
        with torch.no_grad():
            layer_out(kind, layer, x)

    return step


def layer_backward(kind: str, layer: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    """Forward + backward into the input (as inside a model) and every parameter."""
    x = x.detach().clone().requires_grad_(True)
    grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(1))

    def step() -> None:
        layer_out(kind, layer, x).backward(grad)
        x.grad = None
        for p in layer.parameters():
            p.grad = None

    return step


def layer_memory_child(kind: str, batch: int, length: int, d: int, heads: int) -> None:
    """One warm forward, then the peak extra resident memory of the next: print JSON."""
    from attention_bench import measure

    torch.set_num_threads(1)
    layer = build_layers(Setup(batch, length, d, heads))[kind].eval()
    x = torch.randn(batch, length, d)
    step = layer_forward(kind, layer, x)
    step()
    _, peak = measure(step)
    print(json.dumps({"peak_bytes": peak}))


def profile_layers(layers: dict[str, nn.Module], x: torch.Tensor, top: int = 8) -> str:
    """Each layer's forward + backward under torch.profiler: the ops with the most self CPU
    time, to say where a ratio comes from (one call after a warm-up; indicative, not timed)."""
    from torch.profiler import ProfilerActivity, profile

    parts = []
    for kind, layer in layers.items():
        step = layer_backward(kind, layer, x)
        step()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=top)
        parts.append(f"{kind}: forward + backward, top ops by self CPU time\n{table}")
    return "\n".join(parts)


# ---------------------------------------------------------------------- the models
def paper_config(s: Setup) -> ModelConfig:
    """configs/goat-paper-dna.yaml's model section, at ``s``'s width and depth when not its own."""
    from goatdna.training import load_run_config

    config = load_run_config(ROOT / "configs" / "goat-paper-dna.yaml", []).model
    return dataclasses.replace(
        config, d_model=s.d, n_heads=s.heads, n_layers=s.layers, mlp_hidden=4 * s.d
    )


def build_models(s: Setup) -> dict[str, nn.Module]:
    torch.manual_seed(0)
    gpt = GenomeGPT(s.d, s.heads, TRAIN, s.layers, kv_num_heads=s.heads, **GENOME_PY_GOAT)
    config = paper_config(s)
    goat = goatdna_from_genome_gpt(gpt, config)
    idx = torch.randint(0, 5, (1, 64), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        try:
            torch.testing.assert_close(goat(idx), gpt.eval()(idx), atol=TOL, rtol=TOL)
        except AssertionError as e:
            raise ValueError(f"the models compute different functions: {e}") from None
    torch.manual_seed(0)
    bare = DNADecoder(dataclasses.replace(config, positional="nope"))
    return {"authors": gpt, "goatdna": goat, "bare": bare}


# ---------------------------------------------------------------------- the run
def cell(medians: dict[str, list[float]], a: str, b: str) -> tuple[str, float]:
    """``ratio (low-high)`` and the interval's top."""
    low, high = ratio_interval(medians, a, b)
    return f"{ratio(medians, a, b):.3f} ({low:.2f}-{high:.2f})", high


def verdict(top: float, goal: float) -> str:
    return "met" if top < goal else "not met"


def ms(t: Timings, kinds: tuple[str, ...]) -> str:
    return ", ".join(f"{1e3 * statistics.median(t.seconds[k]):.1f}" for k in kinds)


def table(
    s: Setup,
    forward: Timings,
    backward: Timings,
    peak: dict[str, int],
    train: Timings,
    params: dict[str, int],
    load: tuple[float, float],
    fixed: bool,
) -> str:
    heap = "fixed" if fixed else "dynamic (glibc's default)"
    lines = [
        f"shape: batch {s.batch} x {s.length} bases, d_model {s.d}, {s.heads} heads, "
        f"{s.layers} layers; load average (1 min) {load[0]:.2f} at the start, {load[1]:.2f} at "
        f"the end; CPU time, 1 thread, median of rounds (90% bootstrap interval); heap {heap}",
        "",
        "| part | measure | ratio (90% interval) | goal | verdict | ms per step or MiB |",
        "| --- | --- | ---: | ---: | --- | --- |",
    ]
    for label, t in (("forward", forward), ("forward + backward", backward)):
        text, top = cell(t.seconds, "goatdna", "authors")
        lines.append(
            f"| layer | {label}: goatdna / authors | {text} | <= 0.9 | {verdict(top, 0.9)} "
            f"| goatdna, authors: {ms(t, ('goatdna', 'authors'))} |"
        )
    # a tiny forward (--quick) may fit in pages already resident: no peak to divide by
    mem = peak["goatdna"] / peak["authors"] if peak["authors"] else None
    mem_cells = f"{mem:.3f} | <= 1 | {verdict(mem, 1.0 + 1e-9)}" if mem else "- | <= 1 | -"
    lines.append(
        f"| layer | forward peak memory: goatdna / authors | {mem_cells} | goatdna, authors: "
        f"{peak['goatdna'] / 2**20:.1f}, {peak['authors'] / 2**20:.1f} MiB |"
    )
    kinds = ("goatdna", "authors", "bare")
    for a, b, goal in (("goatdna", "bare", 1.02), ("goatdna", "authors", None)):
        text, top = cell(train.seconds, a, b)
        goal_cell, verdict_cell = (f"<= {goal}", verdict(top, goal)) if goal else ("-", "-")
        lines.append(
            f"| model | training step: {a} / {b} | {text} | {goal_cell} | {verdict_cell} "
            f"| goatdna, authors, bare: {ms(train, kinds)} |"
        )
    text, _ = cell(train.seconds, "authors", "bare")
    lines.append(f"| model | training step: authors / bare | {text} | - | - | |")
    lines += [
        "",
        "parameters: " + ", ".join(f"{k} {v:,}" for k, v in params.items()),
        "minor page faults per step (goatdna / authors / bare): "
        + "; ".join(
            f"{label} " + " / ".join(f"{t.faults[k]:.0f}" for k in kinds if k in t.faults)
            for label, t in (("layer fwd", forward), ("layer fwd+bwd", backward), ("train", train))
        ),
    ]
    return "\n".join(lines)


def parse_shape(text: str) -> tuple[int, int]:
    batch, length = (int(n) for n in text.lower().split("x"))
    return batch, length


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="1x1024", help="BATCHxLENGTH (genome.py's: 8x1024)")
    parser.add_argument("--layer-rounds", type=int, default=41)
    parser.add_argument("--model-rounds", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="d_model 64, 2 layers, 2 rounds")
    parser.add_argument("--json", help="also write the raw numbers here")
    parser.add_argument(
        "--default-malloc",
        action="store_true",
        help="keep glibc's dynamic heap thresholds (peer_bench's docstring)",
    )
    parser.add_argument(
        "--profile", action="store_true", help="only profile the two layers' ops and exit"
    )
    parser.add_argument("--memory-child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        kind, *sizes = args.memory_child
        layer_memory_child(kind, *(int(n) for n in sizes))
        return
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    fixed = not args.default_malloc and fix_malloc_thresholds()
    s = QUICK if args.quick else Setup(*parse_shape(args.shape))
    layer_rounds, model_rounds = (2, 2) if args.quick else (args.layer_rounds, args.model_rounds)
    start_load = os.getloadavg()[0]
    print(f"[authors_bench] {s}, load {start_load:.2f}", file=sys.stderr, flush=True)

    layers = build_layers(s)
    x = torch.randn(s.batch, s.length, s.d, generator=torch.Generator().manual_seed(0))
    for layer in layers.values():
        layer.eval()
    check_same_layer(layers, x)
    if args.profile:
        print(profile_layers(layers, x))
        return
    forward = alternate({k: layer_forward(k, m, x) for k, m in layers.items()}, layer_rounds, 1)
    backward = alternate({k: layer_backward(k, m, x) for k, m in layers.items()}, layer_rounds, 1)
    sizes = (str(s.batch), str(s.length), str(s.d), str(s.heads))
    peak = {k: child_peak(__file__, "--memory-child", k, *sizes) for k in layers}
    print("[authors_bench] layer done", file=sys.stderr, flush=True)

    models = build_models(s)
    params = {k: sum(p.numel() for p in m.parameters()) for k, m in models.items()}
    idx = torch.randint(0, 5, (s.batch, s.length), generator=torch.Generator().manual_seed(3))
    for m in models.values():
        m.train()  # dropout 0 everywhere: train mode only marks what a training step runs in
    train = alternate({k: train_step(k, m, idx) for k, m in models.items()}, model_rounds, 1)
    load = (start_load, os.getloadavg()[0])
    print(table(s, forward, backward, peak, train, params, load, fixed))
    if args.json:
        raw = {
            "setup": dataclasses.asdict(s),
            "load": load,
            "layer_forward": dataclasses.asdict(forward),
            "layer_backward": dataclasses.asdict(backward),
            "layer_peak_bytes": peak,
            "train": dataclasses.asdict(train),
            "params": params,
        }
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1)


if __name__ == "__main__":
    main()
