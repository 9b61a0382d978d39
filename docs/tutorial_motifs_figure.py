"""Draw docs/tutorial_motifs.png: the planted-motif tutorial, start to end.

    python docs/tutorial_motifs_figure.py [--work /tmp/goatdna-interpretation] [--seed 0] \
        [--shards DIR --lm CKPT]     # default: the tests' synthetic genome and tiny GOAT

Runs the recipe of docs/tutorial-motifs.md, the one tests/test_motif_tutorial.py runs: the tests'
synthetic genome (1.5 Mbp, 4 contigs, seed 0) and tiny GOAT (2 blocks, d_model 64, 100 steps),
``make-task --label motif`` (32-bp windows, plant rate 0.75, shuffled decoys), ``finetune --mode
full`` (4 epochs of 10,000 windows), ``attribute --method ism`` of 400 planted and 400
background test windows, and ``motifs`` of each. Draws: (top) the ISM contributions of a
planted and of the median background test window as logos, the planted sites and the decoys shaded; (below)
each planted PWM beside the best-matching motif `goatdna motifs` found, with their Pearson
correlation. Prints the measured numbers and each stage's time. About 2 minutes on 2 CPU cores
(one torch thread, as the test).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import logomaker
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from goatdna.analysis.motif_report import information  # noqa: E402
from goatdna.analysis.motifs import best_match  # noqa: E402
from goatdna.cli.app import app  # noqa: E402
from goatdna.data_prep.tasks import read_meme_motifs  # noqa: E402

MOTIFS = ROOT / "examples" / "planted_motifs.meme"
# tests/conftest.py's TINY_RUN_OVERRIDES: the `tiny_runs` fixture's GOAT model
TINY = ["model.n_layers=2", "model.d_model=64", "model.n_heads=2", "model.mlp_hidden=176",
        "model.goat_modes=4", "model.train_length=128", "data.seq_len=128",
        "data.micro_batch_size=16", "data.val_max_windows=64", "optim.warmup_steps=10",
        "trainer.max_steps=100", "trainer.eval_every=25", "trainer.ckpt_every=50",
        "trainer.log_every=5", "trainer.progress_bar=false"]  # fmt: skip
TIMES: dict[str, float] = {}


def run(stage: str, *args: object) -> str:
    start = time.perf_counter()
    result = CliRunner().invoke(app, [str(a) for a in args])
    TIMES[stage] = round(time.perf_counter() - start, 1)
    if result.exit_code != 0:
        raise SystemExit(f"{args[0]} failed: {result.output}")
    return result.output


def read_meme(path: Path) -> dict[str, np.ndarray]:
    from Bio import motifs

    with open(path) as handle:
        return {
            m.name: np.array([m.pwm[b] for b in "ACGT"]).T for m in motifs.parse(handle, "minimal")
        }


def base_model(w: Path) -> tuple[Path, Path]:
    """The tests' synthetic shards and tiny GOAT run (`synthetic_shards`, `tiny_runs`)."""
    shards, lm = w / "shards", w / "goat" / "checkpoints" / "best.ckpt"
    if not (shards / "manifest.json").is_file():
        run("prepare", "prepare", "--synthetic", "--synthetic-length", "1500000",
            "--synthetic-contigs", "4", "--seed", "0", "--out", shards)  # fmt: skip
    if not lm.is_file():
        sets = [a for item in TINY for a in ("--set", item)]
        run("train", "train", "--config", ROOT / "configs" / "goat-tiny.yaml", "--data", shards,
            "--out", w / "goat", *sets)  # fmt: skip
    return shards, lm


def recipe(w: Path, shards: Path, lm: Path, seed: int) -> dict:
    """make-task, finetune, attribute and motifs, as tests/test_motif_tutorial.py runs them."""
    run("make-task", "make-task", "--data", shards, "--out", w / "task", "--label", "motif",
        "--motifs", MOTIFS, "--plant-rate", "0.75", "--window", "32", "--max-train", "10000",
        "--max-eval", "1600", "--seed", seed, "--force")  # fmt: skip
    run("finetune", "finetune", "-c", lm, "--train", w / "task/train.csv", "--val",
        w / "task/val.csv", "--test", w / "task/test.csv", "--out", w / "ft", "--mode", "full",
        "--epochs", "4", "--lr", "1e-3", "--backbone-lr", "1e-3", "--batch-size", "64",
        "--rc-augment", "--seed", seed, "--no-progress", "--force")  # fmt: skip
    rows = list(csv.DictReader((w / "task/test.csv").open()))
    found = {}
    for label in ("motif", "background"):
        picked = [r for r in rows if r["label"] == label]
        with (w / f"{label}.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(picked[0]))
            writer.writeheader()
            writer.writerows(picked)
        run(f"attribute {label}", "attribute", "-c", w / "ft/checkpoints/best.ckpt",
            "--sequences", w / f"{label}.csv", "--method", "ism", "--target", "motif",
            "--strands", "forward", "--batch-size", "512", "--out", w / f"{label}.npz",
            "--force", "--no-progress")  # fmt: skip
        run(f"motifs {label}", "motifs", "--attributions", w / f"{label}.npz", "--out",
            w / f"motifs_{label}", "--window", "8", "--flank", "2", "--trim", "12",
            "--leiden-runs", "10", "--force")  # fmt: skip
        found[label] = read_meme(w / f"motifs_{label}" / "motifs.meme")
    return found


def contributions(w: Path, label: str) -> np.ndarray:
    """The present bases' ISM contributions (N, L, 4): hypothetical x one-hot, what TF-MoDISco
    reads (how much log p(motif) the base there adds over the mean of the four)."""
    data = np.load(w / f"{label}.npz")
    one_hot = np.array(
        [[[float(b == c) for c in "ACGT"] for b in str(s)] for s in data["sequences"]]
    )
    return data["hypothetical"] * one_hot


def shade(ax, row: dict, column: str, planted: list, top: float) -> None:
    for instance in filter(None, row[column].split(";")):
        name, start, strand = instance.split(":")
        width = next(m.pwm.shape[0] for m in planted if m.name == name)
        color = "orange" if column == "planted" else "grey"
        ax.axvspan(int(start) - 0.5, int(start) + width - 0.5, color=color, alpha=0.2)
        label = f"{name} ({strand})" if column == "planted" else f"decoy of {name}"
        ax.text(int(start), top * 0.85, label, fontsize=7)


def inside(column: str, values: np.ndarray, planted: list) -> float:
    """The share of a window's total |contribution| that lies on its planted site."""
    name, start, _ = column.split(":")
    width = next(m.pwm.shape[0] for m in planted if m.name == name)
    total = float(np.abs(values).sum())
    return float(np.abs(values[int(start) : int(start) + width]).sum()) / total if total else 0.0


def draw(w: Path, found: dict[str, dict[str, np.ndarray]], planted: list, out: Path) -> None:
    rows = {label: [r for r in csv.DictReader((w / f"{label}.csv").open())]
            for label in ("motif", "background")}  # fmt: skip
    values = {label: contributions(w, label) for label in rows}
    totals = np.abs(values["background"]).sum(axis=(1, 2))
    single = [i for i, r in enumerate(rows["motif"]) if ";" not in r["planted"]]
    share = [inside(rows["motif"][i]["planted"], values["motif"][i], planted) for i in single]
    pick = {  # typical windows, not the best: the medians of the two measures
        "motif": single[int(np.argsort(share)[len(share) // 2])],
        "background": int(np.argsort(totals)[len(totals) // 2]),
    }
    logos = {label: values[label][i] for label, i in pick.items()}
    top = max(float(np.abs(v).sum(axis=1).max()) for v in logos.values())
    fig = plt.figure(figsize=(10, 4.2 + 1.6 * len(planted)))
    grid = fig.add_gridspec(2 + len(planted), 2, height_ratios=[1.2, 1.2] + [1] * len(planted))
    titles = {"motif": "the median one-motif test window (by |contribution| on its site)",
              "background": "the median background test window (by total |contribution|)"}  # fmt: skip
    for k, label in enumerate(("motif", "background")):
        ax = fig.add_subplot(grid[k, :])
        logomaker.Logo(pd.DataFrame(logos[label], columns=list("ACGT")), ax=ax)
        ax.set_ylim(-0.25 * top, 1.05 * top)
        row = rows[label][pick[label]]
        shade(ax, row, "planted" if label == "motif" else "decoys", planted, top)
        ax.set_title(f"ISM contributions to log p(motif) of {titles[label]}"
                     + ("; planted sites shaded" if label == "motif" else "; decoys shaded"),
                     fontsize=9)  # fmt: skip
    for k, motif in enumerate(planted):
        scored = {name: best_match(pwm, motif.pwm) for name, pwm in found["motif"].items()}
        left = fig.add_subplot(grid[2 + k, 0])
        logomaker.Logo(pd.DataFrame(information(motif.pwm), columns=list("ACGT")), ax=left)
        left.set_title(f"planted {motif.name}", fontsize=9)
        left.set_ylabel("bits")
        right = fig.add_subplot(grid[2 + k, 1])
        if not scored:
            right.set_axis_off()
            right.set_title("no pattern found", fontsize=9)
            continue
        name = max(scored, key=lambda n: scored[n][0])
        r, _offset, strand = scored[name]
        pwm = found["motif"][name]
        shown = pwm if strand == "+" else pwm[::-1, ::-1]
        logomaker.Logo(pd.DataFrame(information(shown), columns=list("ACGT")), ax=right)
        right.set_title(f"found {name} ({strand} strand), Pearson {r:.3f}", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(f"wrote {out}")


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/goatdna-interpretation"))
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "tutorial_motifs.png")
    parser.add_argument("--shards", type=Path, help="prepared shards (default: the tests')")
    parser.add_argument("--lm", type=Path, help="a pretrained .ckpt (default: the tests' GOAT)")
    parser.add_argument("--seed", type=int, default=0, help="make-task and finetune --seed")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the test (its one_thread fixture)
    w = args.work
    w.mkdir(parents=True, exist_ok=True)
    if args.shards is None or args.lm is None:
        shards, lm = base_model(w)
    shards, lm = args.shards or shards, args.lm or lm
    found = recipe(w, shards, lm, args.seed)
    planted = read_meme_motifs(MOTIFS)
    summary = json.loads((w / "ft" / "summary.json").read_text())
    scores = {
        m.name: round(max([best_match(p, m.pwm)[0] for p in found["motif"].values()] or [-1]), 3)
        for m in planted
    }
    print(json.dumps({"test_auroc": round(summary["test"]["auroc"], 3), "recovered": scores,
                      "motif_patterns": list(found["motif"]),
                      "background_patterns": list(found["background"]),
                      "seconds": TIMES}))  # fmt: skip
    draw(w, found, planted, args.out)


if __name__ == "__main__":
    main()
