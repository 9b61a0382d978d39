"""The long-range recall probe: deterministic trials, the same for every model, an oracle's gain."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import invoke

from goatdna.analysis.recall import (
    draw_trials,
    parse_distances,
    probe_recall,
    recall_frame,
    score_recall,
    trial_tokens,
)
from goatdna.data_prep import ShardedGenome
from goatdna.errors import GoatDNAError
from goatdna.io.tokens import TOKEN_MASK, N
from goatdna.model.scoring import sequence_log_probs

SEGMENT = 20
DISTANCES = [0, 16, 200]


class CopyOracle(torch.nn.Module):
    """Predicts base t as a certain copy of base t - (S + d) (d read off the input length)."""

    def __init__(self, segment_length: int) -> None:
        super().__init__()
        self.segment_length = segment_length
        self.anchor = torch.nn.Parameter(torch.zeros(()))  # gives the probe a device

    def forward(self, idx: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        B, L = idx.shape
        offset = L + 1 - self.segment_length  # = S + d for inputs of 2S + d - 1 tokens
        logits = torch.full((B, L, 5), -1e9)
        logits[..., :4] = 0.0  # uniform over A/C/G/T where nothing is copied
        for t in range(offset - 1, L):  # logits[:, t] predict token t + 1
            logits[torch.arange(B), t, idx[:, t + 1 - offset]] = 30.0
        return logits


def _tiny_model(seed: int) -> torch.nn.Module:
    from goatdna.model import DNADecoder, ModelConfig

    torch.manual_seed(seed)
    config = ModelConfig(n_layers=1, d_model=32, n_heads=2, goat_modes=3, train_length=64)
    return DNADecoder(config).eval()


def test_trials_are_deterministic_valid_and_seed_dependent(synthetic_shards: Path) -> None:
    genome = ShardedGenome(synthetic_shards)
    trials = draw_trials(genome, "test", 32, SEGMENT, max(DISTANCES), seed=3)
    assert trials == draw_trials(genome, "test", 32, SEGMENT, max(DISTANCES), seed=3)
    assert trials != draw_trials(genome, "test", 32, SEGMENT, max(DISTANCES), seed=4)
    tokens = genome.tokens("test")
    records = genome.records("test")

    def inside_one_record(start: int, length: int) -> bool:
        return any(r.offset <= start and start + length <= r.offset + r.length for r in records)

    for t in trials:
        segment = np.asarray(tokens[t.segment_start : t.segment_start + SEGMENT]) & TOKEN_MASK
        assert not (segment == N).any()
        assert inside_one_record(t.segment_start, SEGMENT)
        assert inside_one_record(t.filler_start, max(DISTANCES))
        assert (
            t.filler_start + max(DISTANCES) <= t.segment_start
            or t.segment_start + SEGMENT <= t.filler_start
        )


def test_an_oracle_that_copies_gets_the_maximal_gain(synthetic_shards: Path) -> None:
    genome = ShardedGenome(synthetic_shards)
    trials = draw_trials(genome, "test", 6, SEGMENT, max(DISTANCES), seed=0)
    rows = score_recall(CopyOracle(SEGMENT), genome.tokens("test"), trials, DISTANCES, SEGMENT)
    frame = recall_frame(rows)
    assert len(frame) == len(trials) * len(DISTANCES)
    assert np.allclose(frame["nll_first"], math.log(4), atol=1e-6)
    assert np.allclose(frame["nll_second"], 0.0, atol=1e-6)
    assert np.allclose(frame["recall_gain"], math.log(4), atol=1e-6)
    assert (frame["copy_accuracy"] == 1.0).all()


def test_each_row_can_be_rebuilt_and_rescored_alone(synthetic_shards: Path) -> None:
    genome = ShardedGenome(synthetic_shards)
    tokens = genome.tokens("test")
    trials = draw_trials(genome, "test", 5, SEGMENT, max(DISTANCES), seed=1)
    model = _tiny_model(0)
    frame = recall_frame(score_recall(model, tokens, trials, DISTANCES, SEGMENT, batch_tokens=100))
    for row in frame.sample(6, random_state=0).itertuples():
        trial = next(t for t in trials if t.trial == row.trial)
        assert (trial.segment_start, trial.filler_start) == (row.segment_start, row.filler_start)
        ids = torch.from_numpy(trial_tokens(tokens, trial, SEGMENT, row.distance))[None]
        logp = sequence_log_probs(model, ids)[0].double()
        second = -logp[SEGMENT + row.distance - 1 :].mean()
        assert abs(float(second) - row.nll_second) < 1e-5
        assert abs(float(-logp[: SEGMENT - 1].mean()) - row.nll_first) < 1e-5


def test_every_model_sees_the_same_trials(
    synthetic_shards: Path, tiny_runs: dict[str, Path], tmp_path: Path
) -> None:
    frames = {}
    for scheme, run in tiny_runs.items():
        out = tmp_path / scheme
        summary = probe_recall(
            run / "checkpoints" / "best.ckpt", synthetic_shards, out, [8, 300], SEGMENT, 4
        )
        assert list(summary["distance"]) == [8, 300]
        assert list(summary["extrapolation"]) == [False, True]  # training length 128
        frames[scheme] = pd.read_csv(out / "recall_trials.csv")
        assert (out / "recall.png").stat().st_size > 0
    keys = ["trial", "distance", "segment_start", "filler_start"]
    assert frames["goat"][keys].equals(frames["rope"][keys])
    assert not np.allclose(frames["goat"]["nll_second"], frames["rope"]["nll_second"])


def test_cli_writes_the_tables_and_rejects_bad_options(
    synthetic_shards: Path, tiny_runs: dict[str, Path], tmp_path: Path
) -> None:
    ckpt = str(tiny_runs["goat"] / "checkpoints" / "best.ckpt")
    base = ["probe-recall", "-c", ckpt, "-d", str(synthetic_shards), "--segment", "10"]
    result = invoke([*base, "--trials", "3", "--distances", "5,50", "-o", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    summary = pd.read_csv(tmp_path / "r" / "recall_summary.csv")
    assert list(summary["trials"]) == [3, 3]
    for bad, message in (
        (["--distances", "5,x"], "--distances"),
        (["--trials", "0"], "--trials"),
        (["--distances", "10000000"], "no record of at least"),
        (["--split", "bogus"], "--split"),
    ):
        result = invoke([*base, *bad, "-o", str(tmp_path / "bad")])
        assert result.exit_code == 2, result.output
        assert message in result.output
        assert not (tmp_path / "bad").exists()
    (tmp_path / "a-file").write_text("x")
    for out, message in ((tmp_path / "a-file", "is a file"), (Path("/sys/recall"), "--out")):
        result = invoke([*base, "--trials", "2", "--distances", "5", "-o", str(out)])
        assert result.exit_code == 2, result.output  # one error: line, not a traceback
        assert message in result.output and "Traceback" not in result.output


def test_parse_distances() -> None:
    assert parse_distances("1024,64,64", option="--distances") == [64, 1024]
    with pytest.raises(GoatDNAError):
        parse_distances("-1", option="--distances")


@pytest.mark.parametrize("text", ["5,x", "-1", ","])
def test_parse_distances_names_the_callers_flag(text: str) -> None:
    """probe-recall (--distances) and report (--recall-distances) share the parser: each error
    names the flag of the command that was run, not the other's."""
    with pytest.raises(GoatDNAError) as caught:
        parse_distances(text, option="--recall-distances")
    assert str(caught.value).startswith(f"--recall-distances {text!r}: ")
