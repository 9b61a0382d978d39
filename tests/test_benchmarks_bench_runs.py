"""`benchmarks/bench_runs.py`: the one train-then-score step of `gap_sweep.py` and
`ablation_study.py`; each script's results JSON keeps its layout (keys in the same order).

`train` and `evaluate_model` are replaced by fakes here (the real ones take minutes): a fake
run saves a random model of its config as the last checkpoint, and the fake scores are numbers
the JSON must carry through.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import ablation_study  # noqa: E402
import bench_runs  # noqa: E402
import gap_sweep  # noqa: E402

from goatdna.checkpoint import save_checkpoint  # noqa: E402
from goatdna.configfile import to_dict  # noqa: E402
from goatdna.model import DNADecoder  # noqa: E402

GAP_KEYS = ["name", "positional", "overrides", "seed", "steps", "parameters", "train_seconds",
            "eval_seconds", "train_loss", "val_loss", "nll", "bases"]  # fmt: skip
ABLATION_KEYS = ["arm", "overrides", "mlp_hidden", "seed", "steps", "parameters", "train_seconds",
                 "eval_seconds", "train_loss", "val_loss", "prior", "scores"]  # fmt: skip


@pytest.fixture
def fake_runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Every call of the shared step's `train` and `evaluate_model`, answered by fakes."""
    calls: list[tuple] = []

    def train(config, shards, run_dir, force):  # noqa: ANN001, ANN202
        calls.append(("train", run_dir, force))
        model = DNADecoder(config.model)
        save_checkpoint(
            run_dir / "checkpoints" / "last.ckpt", model, {"model": to_dict(config.model)}
        )
        return {"train_loss": 1.5, "val_loss": 1.25}

    def evaluate_model(model, genome, split, lengths, train_length, max_tokens):  # noqa: ANN001, ANN202
        calls.append(("evaluate", split, tuple(lengths), train_length, max_tokens))
        return [SimpleNamespace(context_length=n, nll=1.0 + i, nll_low=0.5 + i, nll_high=1.5 + i,
                                bases=100 * (i + 1), windows=i + 1)
                for i, n in enumerate(lengths)]  # fmt: skip

    monkeypatch.setattr(bench_runs, "train", train)
    monkeypatch.setattr(bench_runs, "evaluate_model", evaluate_model)
    monkeypatch.setattr(bench_runs, "ShardedGenome", lambda shards: shards)
    return calls


def test_gap_sweep_runs_the_shared_step_and_keeps_its_layout(fake_runs, tmp_path: Path) -> None:
    variant = gap_sweep.Variant("rope", "rope", (), 7, 3)
    result = gap_sweep.run_variant(variant, tmp_path / "shards", tmp_path, 500, True)
    written = json.loads((tmp_path / "results" / f"{variant.key()}.json").read_text())
    assert written == result and list(written) == GAP_KEYS
    length = gap_sweep.TRAIN_LENGTH
    assert [c[0] for c in fake_runs] == ["train", "evaluate"]
    assert fake_runs[1] == ("evaluate", "test", (length, 4 * length, 16 * length), length, 500)
    assert written["nll"] == {"1": 1.0, "4": 2.0, "16": 3.0}
    assert written["bases"] == {"1": 100, "4": 200, "16": 300}
    assert (written["train_loss"], written["val_loss"]) == (1.5, 1.25)
    config = gap_sweep.run_config(variant)
    assert written["parameters"] == sum(p.numel() for p in DNADecoder(config.model).parameters())


def test_ablation_study_runs_the_shared_step_and_keeps_its_layout(fake_runs, tmp_path) -> None:
    arm = ablation_study.ARMS[0]
    result = ablation_study.run_arm(arm, 7, 3, tmp_path / "shards", tmp_path, None)
    [path] = (tmp_path / "results").iterdir()
    written = json.loads(path.read_text())
    assert written == json.loads(json.dumps(result)) and list(written) == ABLATION_KEYS
    length = ablation_study.TRAIN_LENGTH
    assert fake_runs[1] == ("evaluate", "test", (length, 4 * length, 16 * length), length, None)
    assert written["scores"]["4"] == {"nll": 2.0, "nll_low": 1.5, "nll_high": 2.5, "bases": 200,
                                      "windows": 2}  # fmt: skip
    assert set(written["prior"]) >= {"sink", "u_spread"}  # the GOAT arm's prior terms
