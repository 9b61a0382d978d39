"""GOAT's in-window gap: tiny GOAT variants vs RoPE on held-out real human DNA, equal steps.

Prepares the shared 1 Mbp of GRCh37 chr20 (``../shared/data``) once into ``--out/shards``
(train: the first 85%, val: 5%, test: the last 10% = 100 kbp), trains every variant of the tiny
configs (``configs/{goat,rope}-tiny.yaml``, 256-base windows) for the same number of optimizer
steps, and scores each on the SAME held-out test windows at 1x, 4x and 16x the training length
(`goatdna.analysis.evaluate.evaluate_model`: every test base scored once per context length).
Prints one table: NLL in nats/base and bits/base, and each run's difference from RoPE trained
with the same seed and steps (negative: better than RoPE).

Variants (the issue's questions), in running order: RoPE, GOAT ``goat_init`` zero and alibi on
every seed (the spread between seeds is the noise level); then one change at a time on the
``--ablate-init`` base (by default the init with the lower mean 1x NLL): the prior's learning
rate (``optim.prior_lr_scale``), ``goat_modes`` (head dim 32: 4, 6, 10), the prior MLP width
(``goat_mlp_hidden``), ``goat_learn_freqs`` (the first ``--ablations`` of them, first seed);
finally training length: RoPE and that GOAT init again at ``--long-factor`` x the steps.

Resumable: each finished run writes ``--out/results/<name>.json`` and a rerun skips it (delete
the file to redo one). The issue's full version is ``--steps 800 --long-factor 3``.

    python benchmarks/gap_sweep.py --out /tmp/gap [--steps 400] [--seeds 1234,4321]
        [--ablations 7] [--long-factor 2] [--threads 1] [--table-only]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from bench_runs import train_and_score

from goatdna.analysis.evaluate import bits_per_base
from goatdna.atomic import atomic_write_text
from goatdna.data_prep import PrepareOptions, prepare_genome
from goatdna.training.config import load_run_config

ROOT = Path(__file__).resolve().parents[1]
FASTA = ROOT.parent / "shared" / "data" / "grch37_chr20_1000001-2000000.fa.gz"
TRAIN_LENGTH = 256
MULTIPLES = (1, 4, 16)


@dataclass(frozen=True)
class Variant:
    name: str
    positional: str  # which configs/<positional>-tiny.yaml
    overrides: tuple[str, ...]  # --set style keys on top of it
    seed: int
    steps: int

    def key(self) -> str:
        return f"{self.name.replace(' ', '-')}_s{self.seed}_{self.steps}"


MAIN = (
    ("rope", "rope", ()),
    ("goat-zero", "goat", ("model.goat_init=zero",)),
    ("goat-alibi", "goat", ("model.goat_init=alibi",)),
)
ABLATIONS = (  # most telling first: a sweep cut short still answers the main questions
    ("prior-lr x10", ("optim.prior_lr_scale=10",)),
    ("modes 4", ("model.goat_modes=4",)),
    ("modes 10", ("model.goat_modes=10",)),
    ("mlp 128", ("model.goat_mlp_hidden=128",)),
    ("learn freqs", ("model.goat_learn_freqs=true",)),
    ("prior-lr x3", ("optim.prior_lr_scale=3",)),
    ("mlp 8", ("model.goat_mlp_hidden=8",)),
)


def main_variants(steps: int, seeds: list[int]) -> list[Variant]:
    """RoPE, GOAT zero and GOAT alibi on every seed."""
    return [Variant(n, p, o, seed, steps) for seed in seeds for n, p, o in MAIN]


def better_init(results: list[dict]) -> str:
    """``zero`` or ``alibi``: the GOAT init with the lower mean 1x NLL over the seeds."""

    def mean_1x(init: str) -> float:
        nll = [r["nll"]["1"] for r in results if r["name"] == f"goat-{init}"]
        return sum(nll) / len(nll)

    return min(("zero", "alibi"), key=mean_1x)


def long_variants(init: str, steps: int, seed: int) -> list[Variant]:
    """RoPE and the better GOAT init again, for more steps (does the gap close or open?)."""
    return [
        Variant("rope", "rope", (), seed, steps),
        Variant(f"goat-{init}", "goat", (f"model.goat_init={init}",), seed, steps),
    ]


def ablation_variants(init: str, steps: int, seed: int) -> list[Variant]:
    """One change at a time on top of GOAT with ``init``."""
    base = f"model.goat_init={init}"
    return [Variant(f"goat-{init} {n}", "goat", (base, *o), seed, steps) for n, o in ABLATIONS]


def run_config(variant: Variant) -> Any:
    every = str(variant.steps)  # validate and checkpoint once, at the end
    overrides = [
        *variant.overrides,
        f"trainer.max_steps={variant.steps}",
        f"trainer.eval_every={every}",
        f"trainer.ckpt_every={every}",
        "trainer.progress_bar=false",
        "trainer.tensorboard=false",
        f"seed={variant.seed}",
    ]
    return load_run_config(ROOT / "configs" / f"{variant.positional}-tiny.yaml", overrides)


def run_variant(
    variant: Variant, shards: Path, out: Path, eval_tokens: int | None, train_missing: bool
) -> dict | None:
    """Train, score on the test split, write results/<key>.json; reuse it when present."""
    result_path = out / "results" / f"{variant.key()}.json"
    if result_path.is_file():
        return json.loads(result_path.read_text())
    if not train_missing:
        return None
    config = run_config(variant)
    run_dir = out / "runs" / variant.key()
    run = train_and_score(
        config, shards, run_dir, variant.key(), TRAIN_LENGTH, MULTIPLES, eval_tokens
    )
    result = {
        "name": variant.name,
        "positional": variant.positional,
        "overrides": list(variant.overrides),
        "seed": variant.seed,
        "steps": variant.steps,
        **run.timings(),
        "nll": {str(r.context_length // TRAIN_LENGTH): r.nll for r in run.scores},
        "bases": {str(r.context_length // TRAIN_LENGTH): r.bases for r in run.scores},
    }
    result_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(result_path, json.dumps(result, indent=2) + "\n")
    print(f"    done in {run.train_seconds:.0f} s train; NLL {result['nll']}", flush=True)
    return result


def table(results: list[dict]) -> str:
    """One markdown table; differences are against RoPE with the same seed and steps."""
    rope = {(r["seed"], r["steps"]): r for r in results if r["positional"] == "rope"}
    head = "| variant | seed | steps | train s |"
    rule = "| --- | ---: | ---: | ---: |"
    for m in MULTIPLES:
        head += f" {m}x nats | {m}x bits | {m}x vs RoPE |"
        rule += " ---: | ---: | ---: |"
    lines = [head, rule]
    for r in results:
        ref = rope.get((r["seed"], r["steps"]))
        row = f"| {r['name']} | {r['seed']} | {r['steps']} | {r['train_seconds']:.0f} |"
        for m in MULTIPLES:
            nll = r["nll"][str(m)]
            diff = "" if ref is None else f"{100 * (nll / ref['nll'][str(m)] - 1):+.2f}%"
            row += f" {nll:.4f} | {bits_per_base(nll):.4f} | {diff} |"
        lines.append(row)
    return "\n".join(lines)


def prepared_shards(out: Path) -> Path:
    shards = out / "shards"
    if not (shards / "manifest.json").is_file():
        options = PrepareOptions(
            test_fraction=0.1, workers=1, progress=False, cache_dir=out / "cache"
        )
        prepare_genome(FASTA, shards, options)
    return shards


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="work folder (resumable)")
    parser.add_argument("--steps", type=int, default=400, help="optimizer steps per variant")
    parser.add_argument("--seeds", default="1234,4321", help="seeds of the main contrast")
    parser.add_argument(
        "--ablate-init",
        default="auto",
        choices=("auto", "zero", "alibi"),
        help="GOAT init the ablations and the long run build on (auto: better mean 1x NLL)",
    )
    parser.add_argument(
        "--ablations", type=int, default=len(ABLATIONS), help="run the first N ablations"
    )
    parser.add_argument(
        "--long-factor", type=int, default=2, help="RoPE and GOAT at this x steps (0: skip)"
    )
    parser.add_argument("--eval-tokens", type=int, default=None, help="cap per context length")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--table-only", action="store_true", help="print the table of finished runs, train none"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    shards = prepared_shards(args.out)
    train_missing = not args.table_only

    def run(variants: list[Variant]) -> list[dict]:
        done = [run_variant(v, shards, args.out, args.eval_tokens, train_missing) for v in variants]
        return [r for r in done if r is not None]

    results = run(main_variants(args.steps, seeds))
    init = args.ablate_init
    if init == "auto":
        if not results:
            raise SystemExit("no finished main-contrast runs yet")
        init = better_init(results)
    results += run(ablation_variants(init, args.steps, seeds[0])[: args.ablations])
    if args.long_factor > 0:
        results += run(long_variants(init, args.steps * args.long_factor, seeds[0]))
    print(
        f"\nheld-out test split: {results[0]['bases']['1']:,} bases per context length "
        f"(train length {TRAIN_LENGTH}); ablations and long runs build on goat-{init}; "
        "vs RoPE: NLL / NLL(RoPE, same seed and steps) - 1\n"
    )
    print(table(results))


if __name__ == "__main__":
    main()
