"""Fine-tuning on the shipped window task: GOAT vs RoPE vs random init vs k-mer logistic regression.

    python benchmarks/finetune_bench.py [--workdir /tmp/goatdna_ft_bench] [--pretrain-steps 200]
        [--runs demo/runs] [--threads 1] [--probe-epochs 10] [--full-epochs 2]

1. prepares the synthetic genome (``goatdna prepare --synthetic``) and makes the ``repeat`` task
   (``goatdna make-task``: 200-nt windows, label 1 when >= half soft-masked; train/val/test from
   the genome's own splits);
2. pretrains tiny GOAT and tiny RoPE decoders (``configs/{goat,rope}-tiny.yaml``, like the demo;
   or takes ``--runs DIR`` holding ``goat/`` and ``rope/`` from ``goatdna demo``), and builds a
   randomly initialised backbone of the tiny GOAT shape;
3. fine-tunes each backbone in ``probe`` and ``full`` mode, and fits a k-mer-count logistic
   regression (numpy), all on the same files, one after the other in this process;
4. prints one Markdown table: test accuracy, MCC, AUROC of the best-by-validation checkpoint and
   wall seconds (fine-tuning only; probe includes computing the embeddings).
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ k-mer baseline (numpy)
def kmer_features(sequences: list[str], k: int) -> np.ndarray:
    """Frequencies of the 4^k k-mers (k-mers holding N skipped), one row per sequence."""
    lut = np.full(256, 4, dtype=np.int64)
    for i, base in enumerate("ACGT"):
        lut[ord(base)] = lut[ord(base.lower())] = i
    out = np.zeros((len(sequences), 4**k), dtype=np.float64)
    for row, seq in enumerate(sequences):
        tokens = lut[np.frombuffer(seq.encode("ascii"), dtype=np.uint8)]
        n = tokens.size - k + 1
        if n <= 0:
            continue
        codes = np.zeros(n, dtype=np.int64)
        valid = np.ones(n, dtype=bool)
        for i in range(k):
            part = tokens[i : i + n]
            valid &= part < 4
            codes = codes * 4 + np.minimum(part, 3)
        counts = np.bincount(codes[valid], minlength=4**k)
        out[row] = counts / max(1, counts.sum())
    return out


def fit_logistic(
    x: np.ndarray, y: np.ndarray, n_classes: int, l2: float, steps: int = 500, lr: float = 0.5
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Multinomial logistic regression by full-batch gradient descent on standardised features.

    Returns (weights, bias, feature mean, feature std).
    """
    mean, std = x.mean(0), x.std(0) + 1e-8
    z = (x - mean) / std
    w = np.zeros((z.shape[1], n_classes))
    b = np.zeros(n_classes)
    onehot = np.eye(n_classes)[y]
    for _ in range(steps):
        logits = z @ w + b
        logits -= logits.max(1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(1, keepdims=True)
        grad = (p - onehot) / len(y)
        w -= lr * (z.T @ grad + l2 * w)
        b -= lr * grad.sum(0)
    return w, b, mean, std


def predict_logistic(model, x: np.ndarray) -> np.ndarray:
    w, b, mean, std = model
    logits = ((x - mean) / std) @ w + b
    logits -= logits.max(1, keepdims=True)
    p = np.exp(logits)
    return p / p.sum(1, keepdims=True)


def read_task(path: Path) -> tuple[list[str], list[str]]:
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    return [r["sequence"] for r in rows], [r["label"] for r in rows]


def kmer_baseline(task_dir: Path) -> dict[str, float]:
    """Best (k, L2) on val among k = 2..5, then test metrics."""
    from goatdna.training.metrics import classification_metrics

    data = {s: read_task(task_dir / f"{s}.csv") for s in ("train", "val", "test")}
    classes = sorted(set(data["train"][1]))
    labels = {s: np.array([classes.index(v) for v in data[s][1]]) for s in data}
    best = (-math.inf, None, None)
    start = time.perf_counter()
    for k in (2, 3, 4, 5):
        feats = {s: kmer_features(data[s][0], k) for s in data}
        for l2 in (1e-3, 1e-2, 1e-1):
            model = fit_logistic(feats["train"], labels["train"], len(classes), l2)
            val = classification_metrics(labels["val"], predict_logistic(model, feats["val"]))
            if val["mcc"] > best[0]:
                best = (val["mcc"], model, k)
                test_probs = predict_logistic(model, feats["test"])
    metrics = classification_metrics(labels["test"], test_probs)
    metrics["wall_seconds"] = time.perf_counter() - start
    metrics["k"] = best[2]
    return metrics


# ------------------------------------------------------------------ the comparison
def pretrain(scheme: str, shards: Path, runs: Path, steps: int) -> Path:
    from goatdna.training import load_run_config, train

    run_dir = runs / scheme
    if not (run_dir / "summary.json").is_file():
        config = load_run_config(
            REPO / "configs" / f"{scheme}-tiny.yaml",
            [
                f"trainer.max_steps={steps}",
                "trainer.progress_bar=false",
                "trainer.tensorboard=false",
            ],
        )
        train(config, shards, run_dir, force=True)
    return run_dir / "checkpoints" / "best.ckpt"


def random_backbone(like: Path, out: Path, seed: int = 0) -> Path:
    """A freshly initialised decoder with the same shape as the checkpoint ``like``."""
    import torch

    from goatdna.checkpoint import load_checkpoint, save_checkpoint
    from goatdna.model import DNADecoder

    loaded = load_checkpoint(like)
    torch.manual_seed(seed)
    return save_checkpoint(
        out, DNADecoder(loaded.model_config), {"model": loaded.run_config["model"]}
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/goatdna_ft_bench"))
    parser.add_argument("--genome-length", type=int, default=2_000_000)
    parser.add_argument("--pretrain-steps", type=int, default=200)
    parser.add_argument("--runs", type=Path, default=None, help="demo runs dir (goat/, rope/)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--probe-epochs", type=int, default=10)
    parser.add_argument("--full-epochs", type=int, default=2)
    parser.add_argument("--max-train", type=int, default=1000)
    args = parser.parse_args()

    import torch

    from goatdna.data_prep import PrepareOptions, SyntheticGenomeConfig, prepare_synthetic
    from goatdna.data_prep.tasks import WindowTaskOptions, make_window_task
    from goatdna.training.finetune import finetune
    from goatdna.training.finetune_config import FinetuneConfig

    torch.set_num_threads(args.threads)
    work = args.workdir
    shards = work / "shards"
    if not (shards / "manifest.json").is_file():
        prepare_synthetic(
            shards,
            SyntheticGenomeConfig(total_length=args.genome_length),
            PrepareOptions(progress=False),
        )
    task_dir = work / "task"
    make_window_task(shards, task_dir, WindowTaskOptions(max_train=args.max_train), force=True)

    if args.runs is not None:
        backbones = {s: args.runs / s / "checkpoints" / "best.ckpt" for s in ("goat", "rope")}
    else:
        backbones = {
            s: pretrain(s, shards, work / "runs", args.pretrain_steps) for s in ("goat", "rope")
        }
    backbones["random (goat shape)"] = random_backbone(backbones["goat"], work / "random.ckpt")

    rows = []
    for name, ckpt in backbones.items():
        for mode, epochs in (("probe", args.probe_epochs), ("full", args.full_epochs)):
            config = FinetuneConfig()
            config.task.train = str(task_dir / "train.csv")
            config.task.val = str(task_dir / "val.csv")
            config.task.test = str(task_dir / "test.csv")
            config.backbone.checkpoint = str(ckpt)
            config.backbone.mode = mode  # type: ignore[assignment]
            config.trainer.epochs = epochs
            config.trainer.progress_bar = False
            config.trainer.accelerator = "cpu"
            start = time.perf_counter()
            summary = finetune(config, work / "ft" / f"{name.split()[0]}_{mode}", force=True)
            wall = time.perf_counter() - start
            rows.append((name, mode, epochs, summary["test"], wall))
            print(
                f"done: {name} {mode} test mcc {summary['test']['mcc']:.3f} in {wall:.0f} s",
                flush=True,
            )
    kmer = kmer_baseline(task_dir)
    rows.append(
        (f"k-mer logistic regression (k={kmer['k']})", "-", "-", kmer, kmer["wall_seconds"])
    )

    print()
    print("| backbone | mode | epochs | test accuracy | test MCC | test AUROC | wall s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for name, mode, epochs, m, wall in rows:
        print(f"| {name} | {mode} | {epochs} | {m['accuracy']:.3f} | {m['mcc']:.3f} | "
              f"{m['auroc']:.3f} | {wall:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
