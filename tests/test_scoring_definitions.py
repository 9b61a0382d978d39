"""One definition of held-out NLL: training's validation loss, `evaluate` and the report agree.

summary.json's ``best_val_loss`` (computed by `goatdna train` on the held-out windows of the val
split at seq_len, capped at data.val_max_windows), `goatdna evaluate` at that length and cap, and
the report's ``val_nll`` score the same windows with the same primitive, so they are one number.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from goatdna.analysis.evaluate import evaluate_checkpoint
from goatdna.analysis.report import load_run, validation_nll
from goatdna.data_prep import ShardedGenome
from goatdna.data_prep.heldout import heldout_window_starts
from goatdna.model.scoring import target_log_probs
from goatdna.training.windows import read_windows


@pytest.mark.parametrize("scheme", ["goat", "rope"])
def test_summary_val_loss_evaluate_and_report_agree(
    tiny_runs: dict[str, Path], synthetic_shards: Path, scheme: str
) -> None:
    run = tiny_runs[scheme]
    summary = json.loads((run / "summary.json").read_text())
    config = yaml.safe_load((run / "config.yaml").read_text())
    seq_len, cap = config["data"]["seq_len"], config["data"]["val_max_windows"]
    best = run / "checkpoints" / "best.ckpt"

    evaluation = evaluate_checkpoint(
        best, synthetic_shards, "val", [seq_len], max_tokens=cap * seq_len, batch_tokens=4096
    )
    assert evaluation.at(seq_len).windows == cap
    assert evaluation.at(seq_len).nll == pytest.approx(summary["best_val_loss"], abs=1e-5)

    loaded = load_run(run, scheme)
    genome = ShardedGenome(synthetic_shards)
    in_report = validation_nll(loaded, genome, "val", 4096)
    assert in_report.nll == pytest.approx(summary["best_val_loss"], abs=1e-5)

    # By hand: the held-out windows (which here do hold N), N targets excluded, float64 mean.
    val = genome.tokens("val")
    records = [(r.offset, r.length) for r in genome.records("val")]
    starts = heldout_window_starts(records, seq_len, cap)
    ids, _ = read_windows(val, starts, seq_len + 1)
    assert (ids == 4).any()  # N inside validation windows: scored as context, never as target
    tokens = torch.from_numpy(ids).long()
    with torch.no_grad():
        logp = target_log_probs(loaded.model(tokens[:, :-1]), tokens[:, 1:]).double()
    counted = tokens[:, 1:] != 4
    assert float(-logp.sum() / counted.sum()) == pytest.approx(summary["best_val_loss"], abs=1e-5)
    assert int(counted.sum()) == evaluation.at(seq_len).bases
