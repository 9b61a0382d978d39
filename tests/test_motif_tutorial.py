"""The planted-motif tutorial (docs/tutorial-motifs.md), end to end through the CLI: a known truth.

`make-task --label motif` plants the PWMs of ``examples/planted_motifs.meme`` in the ``motif``
class and letter-shuffled decoys of them in the ``background`` class (the classes then have the
same base composition, so only the motifs' order separates them); `finetune --mode full` trains
the tiny GOAT model of `tiny_runs` to tell them apart; `attribute --method ism` explains
``log p(motif)`` of held-out test windows exactly; `motifs` clusters the attributions. Each
planted PWM must come back (`best_match`: its own or its reverse complement, any offset, Pearson
of the aligned columns >= 0.9), and the background windows' attributions must hold no motif.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from goatdna.analysis.motifs import best_match
from goatdna.cli.app import app
from goatdna.data_prep.tasks import read_meme_motifs

REPO = Path(__file__).resolve().parents[1]
MOTIFS = REPO / "examples" / "planted_motifs.meme"
SEED = "0"  # docs/tutorial-motifs.md tabulates seeds 0-4 (tutorial_motifs_figure.py --seed N)
runner = CliRunner()
SECONDS: dict[str, float] = {}  # each stage's wall time, printed (pytest -s) for the docs' table


def _invoke(*args: object) -> str:
    start = time.perf_counter()
    result = runner.invoke(app, [str(a) for a in args])
    SECONDS[str(args[0])] = SECONDS.get(str(args[0]), 0.0) + time.perf_counter() - start
    assert result.exit_code == 0, (args[0], result.output, result.exception)
    return result.output


def _found(folder: Path) -> dict[str, np.ndarray]:
    """The PWMs of `motifs`' motifs.meme, read by Biopython (an independent MEME reader)."""
    from Bio import motifs as bio_motifs

    with open(folder / "motifs.meme") as handle:
        return {
            m.name: np.array([m.pwm[b] for b in "ACGT"]).T
            for m in bio_motifs.parse(handle, "minimal")
        }


def test_planted_motifs_are_recovered_end_to_end(
    synthetic_shards: Path, tiny_runs: dict[str, Path], tmp_path: Path, one_thread: None
) -> None:
    task = tmp_path / "task"
    _invoke("make-task", "--data", synthetic_shards, "--out", task, "--label", "motif",
            "--motifs", MOTIFS, "--plant-rate", "0.75", "--window", "32", "--max-train", "10000",
            "--max-eval", "1600", "--seed", SEED)  # fmt: skip
    ft = tmp_path / "ft"
    lm = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    _invoke("finetune", "-c", lm, "--train", task / "train.csv", "--val", task / "val.csv",
            "--test", task / "test.csv", "--out", ft, "--mode", "full", "--epochs", "4",
            "--lr", "1e-3", "--backbone-lr", "1e-3", "--batch-size", "64", "--rc-augment",
            "--seed", SEED, "--no-progress")  # fmt: skip
    rows = list(csv.DictReader((task / "test.csv").open()))
    planted = read_meme_motifs(MOTIFS)
    found = {}
    for label in ("motif", "background"):
        picked = [r for r in rows if r["label"] == label]
        with (tmp_path / f"{label}.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(picked[0]))
            writer.writeheader()
            writer.writerows(picked)
        _invoke("attribute", "-c", ft / "checkpoints" / "best.ckpt", "--sequences",
                tmp_path / f"{label}.csv", "--method", "ism", "--target", "motif",
                "--strands", "forward",
                "--batch-size", "512", "--out", tmp_path / f"{label}.npz",
                "--no-progress")  # fmt: skip
        _invoke("motifs", "--attributions", tmp_path / f"{label}.npz", "--out",
                tmp_path / f"motifs_{label}", "--window", "8", "--flank", "2", "--trim", "12", "--leiden-runs", "10")  # fmt: skip
        found[label] = _found(tmp_path / f"motifs_{label}")
    scores = {
        m.name: max([best_match(pwm, m.pwm)[0] for pwm in found["motif"].values()] or [-1.0])
        for m in planted
    }
    print("recovered (Pearson):", {k: round(v, 3) for k, v in scores.items()})
    print("background patterns:", list(found["background"]))
    print("seconds:", {k: round(v, 1) for k, v in SECONDS.items()})
    assert all(r >= 0.9 for r in scores.values()), scores
    assert found["background"] == {}, list(found["background"])
