"""GOAT's ablations at CPU scale: which terms of the prior matter, against RoPE, on real DNA.

The paper leaves these ablations open; this is the small version of them (docs/ablations.md).
Every arm is the same tiny decoder (2 layers, d_model 64, 2 heads of 32 dims, training length
128, GOAT with R = 4 modes: d_p = 10, d_c = 22) trained for the same optimizer steps on the
shared 1 Mbp of GRCh37 chr20 (``../shared/data``, prepared once into ``--out/shards`` as
`benchmarks/gap_sweep.py` does: test split = the last 10%), then scored on the SAME held-out
test windows at 1x, 4x and 16x the training length (`goatdna.analysis.evaluate.evaluate_model`,
with its 95% bootstrap interval over the windows). Arms (`ARMS`):

* ``rope``; ``goat`` (goatdna's prior, `configs/goat-125m.yaml`'s default); ``goat authors``
  (goat-attention's parameterisation: shared key MLP with its hidden-size rule and M = 8 modes,
  softplus slopes seeded at ALiBi's, d_p = 2R + 1, float32 features);
* one term removed from ``goat`` at a time: ``no directional`` (b_r = 0), ``no key mlp``
  (g_h = 0), ``no sink`` (no first-token bump);
* ``goat equal content``: each head grown by d_p, so its content dims equal RoPE's 32;
* ``goat equal params``: ``goat`` with the SwiGLU hidden size raised so the total parameter
  count matches RoPE's (within one hidden unit per layer; `equal_params_hidden`).

Across seeds: the mean and a t interval (95%, n - 1 degrees of freedom) of each arm's NLL and of
its paired difference from RoPE with the same seed. Resumable: each finished run writes
``--out/results/<arm>_s<seed>.json``; a rerun skips it.

    python benchmarks/ablation_study.py --out /tmp/ablations [--steps 300] [--seeds 1,2,3]
        [--threads 1] [--docs docs/assets] [--quick]

``--quick`` (a smoke test of the whole pipeline: 3 steps, 2 arms, 1 seed, few eval tokens).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_runs import train_and_score  # noqa: E402  (train, then score the test split)
from gap_sweep import prepared_shards  # noqa: E402  (the same prepared chr20 sample)

from goatdna.analysis.evaluate import bits_per_base  # noqa: E402
from goatdna.atomic import atomic_write_bytes, atomic_write_text  # noqa: E402
from goatdna.checkpoint import load_checkpoint  # noqa: E402
from goatdna.model import DNADecoder, GoatPrior, ModelConfig  # noqa: E402
from goatdna.training.config import RunConfig, load_run_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TRAIN_LENGTH = 128
MULTIPLES = (1, 4, 16)
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
"""Student t 97.5% quantiles by degrees of freedom (seeds - 1); 1.96 beyond."""

TINY = (
    "model.n_layers=2", "model.d_model=64", "model.n_heads=2", "model.mlp_hidden=176",
    "model.goat_modes=4", f"data.seq_len={TRAIN_LENGTH}", "data.micro_batch_size=16",
    "data.val_max_windows=32",
)  # fmt: skip
AUTHORS = (
    "model.goat_key_mlp=shared", "model.goat_mlp_hidden=null", "model.goat_abs_modes=8",
    "model.goat_slope=softplus", "model.goat_init=seeded", "model.goat_alignment_slot=false",
    "model.goat_split_key_bias=false", "model.goat_features=float32",
)  # fmt: skip


@dataclass(frozen=True)
class Arm:
    name: str
    positional: str  # which configs/<positional>-tiny.yaml
    overrides: tuple[str, ...]  # --set style keys on top of it and TINY


ARMS = (
    Arm("goat", "goat", ()),
    Arm("rope", "rope", ()),
    Arm("goat authors", "goat", AUTHORS),
    Arm("goat no directional", "goat", ("model.goat_directional=false",)),
    Arm("goat no key mlp", "goat", ("model.goat_key_mlp=none",)),
    Arm("goat no sink", "goat", ("model.goat_sink=false",)),
    Arm("goat equal content", "goat", ("model.goat_equal_content=true",)),
    Arm("goat equal params", "goat", ("EQUAL_PARAMS",)),
)


def _parameters(config: ModelConfig) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in DNADecoder(config).parameters())


def run_config(arm: Arm, seed: int = 1, steps: int = 300) -> RunConfig:
    every = str(steps)  # validate and checkpoint once, at the end
    fixed = [
        *TINY,
        f"trainer.max_steps={steps}",
        f"trainer.eval_every={every}",
        f"trainer.ckpt_every={every}",
        f"optim.warmup_steps={max(1, steps // 10)}",
        "trainer.progress_bar=false",
        "trainer.tensorboard=false",
        f"seed={seed}",
    ]
    overrides = [o for o in arm.overrides if o != "EQUAL_PARAMS"]
    config = load_run_config(ROOT / "configs" / f"{arm.positional}-tiny.yaml", fixed + overrides)
    if "EQUAL_PARAMS" in arm.overrides:
        hidden = equal_params_hidden(config.model)
        config = load_run_config(
            ROOT / "configs" / f"{arm.positional}-tiny.yaml",
            [*fixed, *overrides, f"model.mlp_hidden={hidden}"],
        )
    return config


def equal_params_hidden(goat: ModelConfig) -> int:
    """The SwiGLU hidden size that gives ``goat`` RoPE's parameter count (the nearest integer).

    GOAT projects only d_c of each head's query/key dims (its d_p come from the prior), which
    saves 2 d_model H d_p weights a layer against RoPE, less the prior's own parameters; each
    hidden unit of the MLP is 3 d_model weights a layer, so the nearest hidden size matches the
    count to within 1.5 d_model n_layers parameters."""
    rope = ModelConfig(**{**goat.__dict__, "positional": "rope"})
    deficit = _parameters(rope) - _parameters(goat)
    return goat.mlp_hidden + round(deficit / (3 * goat.d_model * goat.n_layers))


def model_config(arm: Arm) -> ModelConfig:
    """The arm's model (what tests/test_model_ablations.py checks)."""
    return run_config(arm).model


def _slope(prior: GoatPrior) -> torch.Tensor:
    """slope_h as the prior uses it (softplus of the raw parameter with goat_slope softplus)."""
    return (
        torch.nn.functional.softplus(prior.slope) if prior.slope_fn == "softplus" else prior.slope
    )


def prior_terms(model: DNADecoder) -> dict[str, float] | None:
    """How far training moved each term of the prior from its init, over all layers and heads
    (RMS): a_r, b_r, slope_h L_train, sink_h, and the spread over 1 <= j < L_train of u_h(j)
    (slope + key MLP; the sink excluded). None for a model without a GOAT prior."""
    priors = [b.attn.prior for b in model.blocks if isinstance(b.attn.prior, GoatPrior)]
    if not priors:
        return None

    def rms(tensors: list[torch.Tensor]) -> float:
        flat = torch.cat([t.detach().double().reshape(-1) for t in tensors])
        return float(flat.pow(2).mean().sqrt())

    with torch.no_grad():
        u = [p.key_bias(range(1, p.train_length)).double() for p in priors]  # (H, L - 1)
        return {
            "a_r": rms([p.alpha for p in priors]),
            "b_r": rms([p.beta for p in priors]),
            "slope_x_L": rms([_slope(p) * p.train_length for p in priors]),
            "sink": rms([p.sink for p in priors]),
            "u_spread": rms([x - x.mean(dim=1, keepdim=True) for x in u]),
        }


def run_arm(
    arm: Arm, seed: int, steps: int, shards: Path, out: Path, eval_tokens: int | None
) -> dict[str, Any]:
    """Train, score on the test split, write results/<key>.json; reuse it when present."""
    key = f"{arm.name.replace(' ', '-')}_s{seed}_{steps}"
    result_path = out / "results" / f"{key}.json"
    run_dir = out / "runs" / key
    if result_path.is_file():
        result = json.loads(result_path.read_text())
        if "prior" not in result:  # a run from before the diagnostic: read its checkpoint
            model = load_checkpoint(run_dir / "checkpoints" / "last.ckpt", "cpu").model
            result["prior"] = prior_terms(model)
            atomic_write_text(result_path, json.dumps(result, indent=2) + "\n")
        return result
    config = run_config(arm, seed, steps)
    run = train_and_score(config, shards, run_dir, key, TRAIN_LENGTH, MULTIPLES, eval_tokens)
    result = {
        "arm": arm.name,
        "overrides": list(arm.overrides),
        "mlp_hidden": config.model.mlp_hidden,
        "seed": seed,
        "steps": steps,
        **run.timings(),
        "prior": prior_terms(run.model),
        "scores": {
            str(r.context_length // TRAIN_LENGTH): {
                "nll": r.nll,
                "nll_low": r.nll_low,
                "nll_high": r.nll_high,
                "bases": r.bases,
                "windows": r.windows,
            }  # fmt: skip
            for r in run.scores
        },
    }
    result_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(result_path, json.dumps(result, indent=2) + "\n")
    nll = {m: round(s["nll"], 4) for m, s in result["scores"].items()}
    print(f"    {run.train_seconds:.0f} s train; NLL {nll}", flush=True)
    return result


def mean_interval(values: list[float]) -> tuple[float, float, float]:
    """(mean, low, high): a 95% t interval over the seeds (NaN bounds for one seed)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, math.nan, math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = T975.get(n - 1, 1.96) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def summarize(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per arm and context multiple: NLL over seeds and its paired difference from RoPE."""
    rope = {r["seed"]: r for r in results if r["arm"] == "rope"}
    goat = {r["seed"]: r for r in results if r["arm"] == "goat"}
    rows = []
    for arm in ARMS:
        runs = [r for r in results if r["arm"] == arm.name]
        if not runs:
            continue
        row: dict[str, Any] = {"arm": arm.name, "seeds": [r["seed"] for r in runs],
                               "parameters": runs[0]["parameters"]}  # fmt: skip
        priors = [r["prior"] for r in runs if r.get("prior")]
        row["prior"] = (
            {k: sum(p[k] for p in priors) / len(priors) for k in priors[0]} if priors else None
        )
        for m in map(str, MULTIPLES):
            nll = [r["scores"][m]["nll"] for r in runs]
            diff = [r["scores"][m]["nll"] - rope[r["seed"]]["scores"][m]["nll"]
                    for r in runs if r["seed"] in rope]  # fmt: skip
            window_half = max(
                (r["scores"][m]["nll_high"] - r["scores"][m]["nll_low"]) / 2 for r in runs
            )
            versus_goat = [r["scores"][m]["nll"] - goat[r["seed"]]["scores"][m]["nll"]
                           for r in runs if r["seed"] in goat]  # fmt: skip
            row[m] = {
                "nll": mean_interval(nll),
                "vs_rope": mean_interval(diff) if diff else None,
                "vs_goat": mean_interval(versus_goat) if versus_goat else None,
                "window_half_width": window_half,
            }
        rows.append(row)
    return rows


def _fmt(value: tuple[float, float, float], digits: int = 4, sign: bool = False) -> str:
    mean, low, high = value
    spec = f"+.{digits}f" if sign else f".{digits}f"
    if math.isnan(low):
        return format(mean, spec)
    return f"{mean:{spec}} [{low:{spec}}, {high:{spec}}]"


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: mean NLL (nats/base) [95% t interval over seeds] and the paired difference from
    RoPE per context multiple; the widest per-run 95% window-bootstrap half width."""
    head = "| arm | params |"
    rule = "| --- | ---: |"
    for m in MULTIPLES:
        head += f" {m}x NLL | {m}x vs RoPE |"
        rule += " ---: | ---: |"
    lines = [head, rule]
    for row in rows:
        line = f"| {row['arm']} | {row['parameters']:,} |"
        for m in map(str, MULTIPLES):
            cell = row[m]
            diff = (
                ""
                if cell["vs_rope"] is None or row["arm"] == "rope"
                else _fmt(cell["vs_rope"], sign=True)
            )
            line += f" {_fmt(cell['nll'])} | {diff} |"
        lines.append(line)
    windows = max(row[m]["window_half_width"] for row in rows for m in map(str, MULTIPLES))
    lines.append("")
    lines.append(
        f"Seeds: {', '.join(map(str, rows[0]['seeds']))}. Within one run, the 95% bootstrap "
        f"interval over the test windows is at most +/- {windows:.4f} nats/base (any arm, any "
        f"length); {bits_per_base(1.0):.4f} bits per nat."
    )
    return "\n".join(lines)


def versus_goat_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: each GOAT variant's paired difference from ``goat`` (same seed), per multiple."""
    head = "| arm |" + "".join(f" {m}x vs goat |" for m in MULTIPLES)
    lines = [head, "| --- |" + " ---: |" * len(MULTIPLES)]
    for row in rows:
        if row["arm"] in ("goat", "rope") or row[str(MULTIPLES[0])]["vs_goat"] is None:
            continue
        cells = "".join(f" {_fmt(row[str(m)]['vs_goat'], sign=True)} |" for m in MULTIPLES)
        lines.append(f"| {row['arm']} |{cells}")
    return "\n".join(lines)


def prior_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: how far training moved each prior term (`prior_terms`, mean over seeds)."""
    lines = [
        "| arm | RMS a_r | RMS b_r | RMS slope x L | RMS sink | spread of u(j) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        p = row.get("prior")
        if p:
            lines.append(
                f"| {row['arm']} | {p['a_r']:.4f} | {p['b_r']:.4f} | {p['slope_x_L']:.4f} "
                f"| {p['sink']:.4f} | {p['u_spread']:.4f} |"
            )
    return "\n".join(lines)


def figure(rows: list[dict[str, Any]], path: Path) -> None:
    """NLL and the paired difference from RoPE against the context multiple, with seed intervals."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6), dpi=90)
    for i, row in enumerate(rows):
        x = [m * (1 + 0.03 * (i - len(rows) / 2)) for m in MULTIPLES]  # dodge the error bars
        style = {"marker": "o", "ms": 3, "capsize": 2, "lw": 1.2, "label": row["arm"], "color": f"C{i}",
                 "ls": "--" if row["arm"] == "rope" else "-"}  # fmt: skip
        for axis, key in ((left, "nll"), (right, "vs_rope")):
            cells = [row[str(m)][key] for m in MULTIPLES]
            if any(c is None for c in cells) or (axis is right and row["arm"] == "rope"):
                continue
            mean = [c[0] for c in cells]
            err = [[c[0] - c[1] for c in cells], [c[2] - c[0] for c in cells]]
            if any(math.isnan(e) for e in err[0]):
                axis.plot(x, mean, **{k: v for k, v in style.items() if k != "capsize"})
            else:
                axis.errorbar(x, mean, yerr=err, **style)
    for axis in (left, right):
        axis.set_xscale("log", base=2)
        axis.set_xticks(list(MULTIPLES), [f"{m}x" for m in MULTIPLES])
        axis.set_xlabel(f"context / training length ({TRAIN_LENGTH})")
    left.set_ylabel("test NLL (nats/base)")
    right.set_ylabel("NLL - NLL(RoPE, same seed)")
    right.axhline(0.0, color="grey", lw=0.8)
    left.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="work folder (resumable)")
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps per run")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--eval-tokens", type=int, default=32768, help="cap per context length")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--arms", type=int, default=len(ARMS), help="run the first N arms")
    parser.add_argument(
        "--docs", type=Path, default=None, help="write ablations.{json,png} and the table here"
    )
    parser.add_argument("--only", default=None, help="comma-separated arm names (default: all)")
    parser.add_argument("--name", default="ablations", help="file stem of the --docs outputs")
    parser.add_argument("--quick", action="store_true", help="smoke test: 3 steps, 2 arms, 1 seed")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.seeds, args.arms, args.eval_tokens = 3, "1", 2, 4096
    torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    shards = prepared_shards(args.out)
    arms = ARMS[: args.arms]
    if args.only is not None:
        names = args.only.split(",")
        unknown = sorted(set(names) - {a.name for a in ARMS})
        if unknown:
            parser.error(f"--only: no arm {', '.join(unknown)} (arms: {[a.name for a in ARMS]})")
        arms = tuple(a for a in ARMS if a.name in names)
    results = [
        run_arm(arm, seed, args.steps, shards, args.out, args.eval_tokens)
        for seed in seeds
        for arm in arms
    ]  # seed-major: a study cut short still has every arm on the first seeds
    rows = summarize(results)
    text = "\n\n".join(
        [
            table(rows),
            "Each GOAT variant against `goat` (paired by seed; mean [95% t interval]):",
            versus_goat_table(rows),
            "Learned prior terms (nats; mean over seeds):",
            prior_table(rows),
        ]
    )
    print(text)
    if args.docs is not None:
        args.docs.mkdir(parents=True, exist_ok=True)
        payload = {"steps": args.steps, "train_length": TRAIN_LENGTH, "multiples": MULTIPLES,
                   "eval_tokens": args.eval_tokens, "summary": rows, "runs": results}  # fmt: skip
        atomic_write_text(args.docs / f"{args.name}.json", json.dumps(payload, indent=1) + "\n")
        atomic_write_text(args.docs / f"{args.name}_table.md", text + "\n")
        figure(rows, args.docs / f"{args.name}.png")


if __name__ == "__main__":
    main()
