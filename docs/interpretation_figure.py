"""Draw docs/interpretation_example.png: the planted-motif tutorial, start to end.

    python docs/interpretation_figure.py [--work /tmp/goatdna-interpretation] \
        [--shards DIR --lm CKPT]     # default: `goatdna demo`'s synthetic shards and tiny GOAT

Runs the commands of docs/interpretation.md (synthetic genome, tiny GOAT pretraining,
``make-task --label motif``, ``finetune``, ``attribute``, ``motifs``) and
draws: (top) the attributions (``--method``, default ism) of one planted test sequence as a logo, the planted
sites shaded; (below) each planted PWM beside the best-matching motif `goatdna motifs` found,
with their Pearson correlation. Takes a few minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import csv
import sys
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


def run(*args: object) -> None:
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exit_code != 0:
        raise SystemExit(f"{' '.join(map(str, args[:1]))} failed: {result.output}")


def read_meme(path: Path) -> dict[str, np.ndarray]:
    from Bio import motifs

    with open(path) as handle:
        return {
            m.name: np.array([m.pwm[b] for b in "ACGT"]).T for m in motifs.parse(handle, "minimal")
        }


def train_classifier(w: Path, shards: Path, lm: Path) -> None:
    """The tutorial's make-task and finetune."""
    run("make-task", "--data", shards, "--out", w / "task", "--label", "motif", "--motifs",
        MOTIFS, "--window", "40", "--plant-rate", "1", "--max-train", "2000", "--max-eval", "400", "--force")  # fmt: skip
    run("finetune", "--checkpoint", lm, "--train", w / "task/train.csv", "--val",
        w / "task/val.csv", "--test", w / "task/test.csv", "--out", w / "ft", "--no-progress",
        "--mode", "full", "--epochs", "6", "--lr", "5e-3", "--backbone-lr", "5e-3",
        "--batch-size", "64", "--rc-augment", "--force")  # fmt: skip


def draw(w: Path, rows: list[dict], found: dict[str, np.ndarray], planted: list,
         method: str, out: Path) -> None:  # fmt: skip
    """The figure: one sequence's attribution logo, then each planted PWM beside its best match."""
    data = np.load(w / "attr.npz")
    pick = next(i for i, r in enumerate(rows) if r["planted"].count(";") == 1)
    fig = plt.figure(figsize=(10, 2.2 + 1.6 * len(planted)))
    grid = fig.add_gridspec(1 + len(planted), 2, height_ratios=[1.3] + [1] * len(planted))
    ax = fig.add_subplot(grid[0, :])
    logomaker.Logo(pd.DataFrame(data["attributions"][pick], columns=list("ACGT")), ax=ax)
    for instance in rows[pick]["planted"].split(";"):
        name, start, strand = instance.split(":")
        width = next(m.pwm.shape[0] for m in planted if m.name == name)
        ax.axvspan(int(start) - 0.5, int(start) + width - 0.5, color="orange", alpha=0.2)
        ax.text(int(start), ax.get_ylim()[1] * 0.9, f"{name} ({strand})", fontsize=8)
    ax.set_title(f"{method} attributions of one test sequence, target log p(motif); "
                 "planted sites shaded", fontsize=9)  # fmt: skip
    for k, motif in enumerate(planted):
        scored = {name: best_match(pwm, motif.pwm) for name, pwm in found.items()}
        left = fig.add_subplot(grid[1 + k, 0])
        logomaker.Logo(pd.DataFrame(information(motif.pwm), columns=list("ACGT")), ax=left)
        left.set_title(f"planted {motif.name}", fontsize=9)
        left.set_ylabel("bits")
        right = fig.add_subplot(grid[1 + k, 1])
        if not scored:
            right.set_axis_off()
            right.set_title("no pattern found", fontsize=9)
            continue
        name = max(scored, key=lambda n: scored[n][0])
        r, _offset, strand = scored[name]
        shown = found[name] if strand == "+" else found[name][::-1, ::-1]
        logomaker.Logo(pd.DataFrame(information(shown), columns=list("ACGT")), ax=right)
        right.set_title(f"found {name} ({strand} strand), Pearson {r:.3f}", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/goatdna-interpretation"))
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "interpretation_example.png")
    parser.add_argument("--shards", type=Path, help="prepared shards (default: the demo's)")
    parser.add_argument("--lm", type=Path, help="a pretrained .ckpt (default: the demo's GOAT)")
    parser.add_argument("--method", default="ism", help="attribute --method")
    args = parser.parse_args()
    w = args.work
    w.mkdir(parents=True, exist_ok=True)
    if args.shards is None or args.lm is None:
        run("demo", "--out", w / "demo", "--steps", "100")  # synthetic shards + tiny models
    shards = args.shards or w / "demo" / "shards"
    lm = args.lm or w / "demo" / "runs" / "goat" / "checkpoints" / "best.ckpt"
    if not (w / "ft" / "checkpoints" / "best.ckpt").is_file():  # a rerun redraws only
        train_classifier(w, shards, lm)
    rows = [r for r in csv.DictReader((w / "task/test.csv").open()) if r["label"] == "motif"]
    with (w / "motif.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    run("attribute", "-c", w / "ft/checkpoints/best.ckpt", "--sequences", w / "motif.csv",
        "--method", args.method, "--target", "motif", "--batch-size", "256", "--out",
        w / "attr.npz", "--force", "--no-progress")  # fmt: skip
    run("motifs", "--attributions", w / "attr.npz", "--out", w / "motifs", "--force")
    found = read_meme(w / "motifs" / "motifs.meme")
    planted = read_meme_motifs(MOTIFS)

    draw(w, rows, found, planted, args.method, args.out)


if __name__ == "__main__":
    main()
