"""probe vs LoRA vs full fine-tuning of one backbone: trainable parameters, checkpoint size, step
time, peak memory and the validation metric at equal steps, side by side in one run.

    python benchmarks/finetune_modes_bench.py [--workdir /tmp/goatdna_modes_bench] [--runs demo/runs]
        [--pretrain-steps 200] [--label gc] [--epochs 2] [--max-train 600] [--seeds 0,1,2]
        [--threads 1] [--lora-lr 1e-3]

1. prepares the synthetic genome and makes a window task with a planted signal
   (``goatdna make-task``; ``--label gc``: GC-content classes, ``repeat``: soft-masked repeats);
2. pretrains the tiny GOAT decoder (``configs/goat-tiny.yaml``; or takes ``--runs DIR/goat``);
3. fine-tunes it in ``probe``, ``lora`` (peft defaults: rank 8, alpha 8, on every q/k/v/o and gate/up/down projection)
   and ``full`` mode for the same epochs, batch and seeds, each run in its own process so its
   peak resident memory (``os.wait4``'s ru_maxrss) is its own;
4. prints one Markdown table: trainable parameters (and % of full), best.ckpt bytes (a resumable
   checkpoint: weights + AdamW moments) and its weights alone, the median seconds per optimizer
   step between logged rows (validation left out; probe steps run on cached embeddings, its
   embedding pass is in the wall time), wall seconds, peak RSS, and the best-by-validation
   checkpoint's val/test MCC as mean +- sd over seeds.

LoRA trains adapters at ``--lora-lr`` (10x full fine-tuning's default backbone rate, the usual
LoRA practice); the head's rate is the same in every mode.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODES = ("probe", "lora", "full")


def child(spec_path: Path) -> None:
    """One fine-tune, in this process: ``spec`` is the FinetuneConfig as a dict and the run dir."""
    import torch

    from goatdna.configfile import from_dict
    from goatdna.training.finetune import finetune
    from goatdna.training.finetune_config import FinetuneConfig

    spec = json.loads(spec_path.read_text())
    torch.set_num_threads(spec["threads"])
    config = from_dict(FinetuneConfig, spec["config"])
    start = time.perf_counter()
    summary = finetune(config, spec["run"], force=True)
    summary["bench_wall"] = time.perf_counter() - start
    Path(spec["run"], "bench.json").write_text(json.dumps(summary))


def step_seconds(metrics_csv: Path) -> float:
    """Median seconds per optimizer step between consecutive logged rows without validation."""
    with metrics_csv.open() as fh:
        rows = list(csv.DictReader(fh))
    rates = []
    for before, after in zip(rows, rows[1:], strict=False):
        if after["val_loss"]:  # validation ran inside this interval
            continue
        steps = int(after["step"]) - int(before["step"])
        rates.append((float(after["elapsed_s"]) - float(before["elapsed_s"])) / steps)
    return statistics.median(rates) if rates else float("nan")


def weight_bytes(ckpt: Path) -> int:
    import torch

    state = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
    return sum(v.numel() * v.element_size() for v in state.values())


def run_mode(work: Path, config: dict, mode: str, seed: int, threads: int) -> dict:
    run = work / "ft" / f"{mode}-{seed}"
    spec = work / "ft" / f"{mode}-{seed}.json"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(json.dumps({"config": config, "run": str(run), "threads": threads}))
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS=str(threads))
    proc = subprocess.Popen([sys.executable, __file__, "--child", str(spec)], env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{mode} seed {seed} failed ({proc.returncode})")
    summary = json.loads((run / "bench.json").read_text())
    best = run / "checkpoints" / "best.ckpt"
    return {
        "mode": mode,
        "seed": seed,
        "trainable": summary["trainable_params"],
        "ckpt_bytes": best.stat().st_size,
        "weight_bytes": weight_bytes(best),
        "step_s": step_seconds(run / "metrics.csv"),
        "wall_s": summary["bench_wall"],
        "peak_rss_mib": usage.ru_maxrss / 1024,  # KiB on Linux
        "val_mcc": summary["val"]["mcc"],
        "test_mcc": summary["test"]["mcc"],
        "steps": summary["steps"],
    }


def mean_sd(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def print_table(results: list[dict], seeds: str) -> None:
    """The Markdown table: one row per mode, numbers over seeds."""
    full = [r for r in results if r["mode"] == "full"]
    print()
    print("| mode | trainable params | % of full | best.ckpt | its weights | % of full's | "
          "s/step | wall s | peak RSS MiB | val MCC | test MCC |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for mode in MODES:
        rows = [r for r in results if r["mode"] == mode]
        r0 = rows[0]
        print(f"| {mode} | {r0['trainable']:,} | {100 * r0['trainable'] / full[0]['trainable']:.2f} | "
              f"{r0['ckpt_bytes'] / 1e6:.2f} MB | {r0['weight_bytes'] / 1e6:.3f} MB | "
              f"{100 * r0['ckpt_bytes'] / full[0]['ckpt_bytes']:.1f} | "
              f"{statistics.median(r['step_s'] for r in rows):.3f} | "
              f"{statistics.median(r['wall_s'] for r in rows):.0f} | "
              f"{max(r['peak_rss_mib'] for r in rows):.0f} | "
              f"{mean_sd([r['val_mcc'] for r in rows])} | {mean_sd([r['test_mcc'] for r in rows])} |")  # fmt: skip
    print(f"\n{r0['steps']} optimizer steps per run, seeds {seeds}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/goatdna_modes_bench"))
    parser.add_argument("--genome-length", type=int, default=2_000_000)
    parser.add_argument("--runs", type=Path, default=None, help="demo runs dir (goat/)")
    parser.add_argument("--pretrain-steps", type=int, default=200)
    parser.add_argument("--label", choices=("gc", "repeat"), default="gc")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--max-train", type=int, default=600)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--lora-lr", type=float, default=1e-3)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child)
        return

    sys.path.insert(0, str(REPO))
    from finetune_bench import pretrain

    from goatdna.configfile import to_dict
    from goatdna.data_prep import PrepareOptions, SyntheticGenomeConfig, prepare_synthetic
    from goatdna.data_prep.tasks import WindowTaskOptions, make_window_task
    from goatdna.training.finetune_config import FinetuneConfig

    work = args.workdir
    shards = work / "shards"
    if not (shards / "manifest.json").is_file():
        config = SyntheticGenomeConfig(total_length=args.genome_length)
        prepare_synthetic(shards, config, PrepareOptions(progress=False))
    task_dir = work / f"task-{args.label}"
    make_window_task(shards, task_dir, WindowTaskOptions(label=args.label, max_train=args.max_train),
                     force=True)  # fmt: skip
    if args.runs is not None:
        backbone = args.runs / "goat" / "checkpoints" / "best.ckpt"
    else:
        backbone = pretrain("goat", shards, work / "runs", args.pretrain_steps)

    results = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        for mode in MODES:
            config = FinetuneConfig(seed=seed)
            config.task.train = str(task_dir / "train.csv")
            config.task.val = str(task_dir / "val.csv")
            config.task.test = str(task_dir / "test.csv")
            config.backbone.checkpoint = str(backbone)
            config.backbone.mode = mode  # type: ignore[assignment]
            if mode == "lora":
                config.optim.backbone_lr = args.lora_lr
            config.trainer.epochs = args.epochs
            config.trainer.progress_bar = False
            config.trainer.log_every = 1  # a row per step: s/step between validations
            config.trainer.accelerator = "cpu"
            row = run_mode(work, to_dict(config), mode, seed, args.threads)
            results.append(row)
            print(f"done: {mode} seed {seed}: val mcc {row['val_mcc']:.3f} "
                  f"in {row['wall_s']:.0f} s", flush=True)  # fmt: skip

    print_table(results, args.seeds)
    (work / "modes_bench.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
