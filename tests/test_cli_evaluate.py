"""`goatdna evaluate`: what it prints about the data it evaluated on."""

from __future__ import annotations

import numpy as np
from helpers import invoke


def test_evaluate_footnotes_on_data_without_soft_masking(tiny_runs, tmp_path):
    rng = np.random.default_rng(0)
    seq = "".join(rng.choice(list("ACGT"), size=40_000))
    fasta = tmp_path / "upper.fa"
    fasta.write_text(">chrU\n" + "\n".join(seq[i : i + 80] for i in range(0, len(seq), 80)) + "\n")
    assert invoke(["prepare", fasta, "--out", tmp_path / "shards", "--workers", "1"]).exit_code == 0
    ckpt = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    result = invoke(
        ["evaluate", "--checkpoint", ckpt, "--data", tmp_path / "shards",
         "--context-lengths", "128", "--max-eval-tokens", "1024"]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "extrapolation" not in result.output  # no row is starred
    assert "no soft-masked bases" in result.output
    assert "nan" not in result.output
