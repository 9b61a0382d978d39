"""Operations per training step (forward + backward) of the 125M GOAT and RoPE decoders.

What a GPU pays per step beyond the FLOPs is mostly launches: every ATen op that computes
something is one (or a few) kernel launches of a few microseconds each, whatever its size. So the
number of such ops per step says how much the model's small ops (GOAT's per-position terms,
splits, copies) cost a GPU, where matmuls and attention are fast, and it can be counted on a CPU.

Counted with ``torch.profiler`` over one forward + next-token loss + backward (no optimizer: its
launches depend on fused/foreach choices, not on the model), after one warm-up step:

* ``aten ops``: every ``aten::`` call, including views and the calls nested inside others;
* ``launching ops``: the innermost ``aten::`` calls (no ``aten::`` call inside them) that are not
  pure metadata (views, reshapes, empty allocations): on a GPU each is a kernel launch;
* ``CUDA kernels`` (``--device cuda`` only): the kernels the profiler saw run on the GPU, under
  bf16 autocast as training runs there.

The count does not depend on the sequence length (``--seq-len``, default 64, only sets the work).
Run: ``python benchmarks/kernel_count.py`` (CPU, about a minute at the 125M shape);
``--out DIR`` also writes kernel_count.md and kernel_count.json there (gpu_check.sh does).
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path

import torch
import torch.nn.functional as F
import yaml
from torch.profiler import ProfilerActivity, profile

from goatdna.model import DNADecoder, ModelConfig

REPO = Path(__file__).resolve().parent.parent
METADATA = {
    "aten::view", "aten::_unsafe_view", "aten::as_strided", "aten::transpose", "aten::t",
    "aten::permute", "aten::expand", "aten::slice", "aten::narrow", "aten::select",
    "aten::unsqueeze", "aten::squeeze", "aten::reshape", "aten::_reshape_alias", "aten::alias",
    "aten::detach", "aten::unflatten", "aten::unbind", "aten::split", "aten::split_with_sizes",
    "aten::chunk", "aten::diagonal", "aten::resolve_conj", "aten::resolve_neg", "aten::empty",
    "aten::empty_strided", "aten::empty_like", "aten::new_empty_strided", "aten::lift_fresh",
    "aten::_local_scalar_dense", "aten::item", "aten::numpy_T", "aten::contiguous",
    "aten::view_as_real", "aten::view_as_complex", "aten::flatten",
}  # fmt: skip
"""Ops that only describe a tensor (or allocate it): no kernel on a GPU."""


def model_config(size: str, positional: str) -> ModelConfig:
    with open(REPO / "configs" / f"{positional}-{size}.yaml") as f:
        return ModelConfig(**{**yaml.safe_load(f)["model"], "attention": "sdpa"})


def count(positional: str, size: str, device: str, seq_len: int) -> dict[str, int]:
    torch.manual_seed(0)
    model = DNADecoder(model_config(size, positional)).to(device)
    idx = torch.randint(0, 4, (1, seq_len), device=device)
    autocast = (
        torch.autocast("cuda", dtype=torch.bfloat16)
        if device == "cuda"
        else contextlib.nullcontext()
    )

    def step() -> None:
        with autocast:
            logits = model(idx)[:, :-1]
            loss = F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]).float(), idx[:, 1:].reshape(-1)
            )
        loss.backward()
        model.zero_grad(set_to_none=True)

    step()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        step()
        if device == "cuda":
            torch.cuda.synchronize()
    events = prof.events()
    aten = [e for e in events if e.name.startswith("aten::")]
    launching = [
        e
        for e in aten
        if e.name not in METADATA and not any(c.name.startswith("aten::") for c in e.cpu_children)
    ]
    result = {"aten ops": len(aten), "launching ops": len(launching)}
    if device == "cuda":
        result["CUDA kernels"] = sum(
            1 for e in events if e.device_type == torch.autograd.DeviceType.CUDA
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="125m", help="configs/<scheme>-<size>.yaml: 125m, tiny")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--out", type=Path, help="also write kernel_count.md/.json here")
    args = parser.parse_args()
    if args.device == "cpu":
        torch.set_num_threads(1)
    counts = {p: count(p, args.size, args.device, args.seq_len) for p in ("goat", "rope")}
    columns = list(counts["goat"])
    lines = [
        f"ops per training step (forward + backward), {args.size} shape, {args.device}, "
        f"torch {torch.__version__}",
        "",
        "| model | " + " | ".join(columns) + " |",
        "| --- | " + " | ".join("---:" for _ in columns) + " |",
    ]
    lines += [
        f"| {p} | " + " | ".join(f"{c[k]:,}" for k in columns) + " |" for p, c in counts.items()
    ]
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "kernel_count.md").write_text(table + "\n")
        (args.out / "kernel_count.json").write_text(json.dumps(counts, indent=1) + "\n")


if __name__ == "__main__":
    main()
