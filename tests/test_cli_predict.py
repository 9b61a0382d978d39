"""`goatdna predict`: what it says about sequences cut to the model's length."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import assert_ok, invoke, random_sequences

pytestmark = pytest.mark.usefixtures("one_thread")


def test_predict_says_how_many_sequences_it_cut_to_the_models_max_length(
    backbone: Path, tmp_path: Path
) -> None:
    train = tmp_path / "train.csv"
    train.write_text(
        "sequence,label\n" + "".join(f"{s},{i % 2}\n" for i, s in enumerate(random_sequences(12)))
    )
    run = tmp_path / "run"
    assert_ok(
        invoke(
            [
                "finetune",
                "--checkpoint",
                str(backbone),
                "--train",
                str(train),
                "--out",
                str(run),
                "--no-progress",
                "--epochs",
                "1",
                "--accelerator",
                "cpu",
                "--max-length",
                "8",
                "--mode",
                "probe",
            ]
        )
    )
    table = tmp_path / "x.csv"
    table.write_text("sequence,name\nACGTACGT,a\nACGTACGTACGT,b\nACG,c\n")
    out = tmp_path / "p.csv"
    res = invoke(["predict", "-c", str(run / "checkpoints" / "best.ckpt"),
                              "--sequences", str(table), "--out", str(out), "--no-progress",
                              "--accelerator", "cpu"])  # fmt: skip
    assert_ok(res)
    assert "warning: 1 of 3 sequences" in res.stderr and "first 8 bases" in res.stderr, res.stderr
    assert len(out.read_text().splitlines()) == 4
