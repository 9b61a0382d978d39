"""`evaluate`: windows, analytic NLL of known distributions, repeat split, the CLI."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import invoke, printed, tiny_config

from goatdna.analysis.evaluate import (
    bits_per_base,
    evaluate_checkpoint,
    evaluate_context,
    evaluate_model,
    parse_context_lengths,
    window_starts,
)
from goatdna.checkpoint import load_checkpoint, save_checkpoint
from goatdna.configfile import to_dict
from goatdna.data_prep import ShardedGenome
from goatdna.errors import GoatDNAError
from goatdna.model import DNADecoder, ModelConfig


@dataclass(frozen=True)
class Rec:
    offset: int
    length: int


class BigramLM(torch.nn.Module):
    """Next-base distribution depends only on the current base: logits = table[idx]."""

    def __init__(self, table: np.ndarray) -> None:
        super().__init__()
        self.register_buffer("table", torch.tensor(table, dtype=torch.float32))  # (5, 5)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.table[idx]  # (B, L, 5)


def test_bits_per_base_is_nll_over_ln2() -> None:
    for nll in (0.0, 1.2054, 1.1294, math.log(4)):
        assert bits_per_base(nll) == pytest.approx(nll / math.log(2), rel=1e-15)
    assert bits_per_base(math.log(4)) == pytest.approx(2.0)
    assert bits_per_base(1.2054) == pytest.approx(1.739, abs=5e-4)  # the paper's RoPE row


def test_windows_stay_inside_records() -> None:
    records = [Rec(0, 10), Rec(10, 3), Rec(13, 21)]
    starts = window_starts(records, 4)
    assert starts.tolist() == [0, 4, 13, 17, 21, 25, 29]
    for s in starts:
        rec = next(r for r in records if r.offset <= s < r.offset + r.length)
        assert s + 5 <= rec.offset + rec.length  # L+1 bytes inside the record
    assert window_starts(records, 4, max_windows=3).tolist() == [0, 17, 29]  # evenly spaced
    assert window_starts(records, 40).size == 0


def _expected(tokens: np.ndarray, records: list[Rec], L: int, table: np.ndarray) -> dict:
    """float64 reference: every scored position of every record, by hand."""
    logp = table - np.log(np.exp(table).sum(axis=1, keepdims=True))  # (5, 5)
    out = {"repeat": [], "nonrepeat": []}
    for r in records:
        n = (r.length - 1) // L
        for p in range(r.offset + 1, r.offset + n * L + 1):
            target = tokens[p] & 0x7F
            if target == 4:
                continue
            key = "repeat" if tokens[p] & 0x80 else "nonrepeat"
            out[key].append(-logp[tokens[p - 1] & 0x7F, target])
    return out


def test_nll_of_a_known_distribution_is_analytic() -> None:
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 4, size=300).astype(np.uint8)
    tokens[rng.random(300) < 0.05] = 4  # some N, as input and as (ignored) target
    tokens[rng.random(300) < 0.3] |= 0x80  # soft-masked repeats
    records = [Rec(0, 120), Rec(120, 50), Rec(170, 130)]
    table = rng.normal(size=(5, 5))
    model = BigramLM(table)
    for L in (7, 16, 49):
        res = evaluate_context(model, tokens, records, L, train_length=16, batch_tokens=40)
        exp = _expected(tokens, records, L, table)
        both = exp["repeat"] + exp["nonrepeat"]
        assert res.bases == len(both)
        assert res.repeat_bases == len(exp["repeat"]) and res.nonrepeat_bases == len(
            exp["nonrepeat"]
        )
        assert res.nll == pytest.approx(np.mean(both), rel=1e-6)
        assert res.repeat_nll == pytest.approx(np.mean(exp["repeat"]), rel=1e-6)
        assert res.nonrepeat_nll == pytest.approx(np.mean(exp["nonrepeat"]), rel=1e-6)
        assert res.bits_per_base == pytest.approx(res.nll / math.log(2), rel=1e-12)
        assert res.perplexity == pytest.approx(math.exp(res.nll), rel=1e-12)
        assert res.extrapolation == (L > 16)


def test_next_base_accuracy_is_the_argmax_over_acgt() -> None:
    """accuracy: scored (non-N) targets that are the bigram table's most likely base of A C G T,
    counted by hand; a table whose N column is largest still guesses a base, never N."""
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, 4, size=300).astype(np.uint8)
    tokens[rng.random(300) < 0.05] = 4
    records = [Rec(0, 150), Rec(150, 150)]
    table = rng.normal(size=(5, 5))
    table[:, 4] = 10.0  # N is every row's most likely class: never a guess
    for L in (9, 30):
        res = evaluate_context(BigramLM(table), tokens, records, L, train_length=30)
        hits = []
        for r in records:
            for p in range(r.offset + 1, r.offset + (r.length - 1) // L * L + 1):
                if tokens[p] != 4:
                    hits.append(int(np.argmax(table[tokens[p - 1], :4]) == tokens[p]))
        assert res.bases == len(hits)
        assert res.accuracy == pytest.approx(np.mean(hits), rel=1e-12)
        assert 0.1 < res.accuracy < 0.6  # a random table: about chance, and not 0


def _window_nlls(tokens: np.ndarray, records: list[Rec], L: int, table: np.ndarray):
    """float64 reference per window (in window order): its NLL sum and its scored bases."""
    logp = table - np.log(np.exp(table).sum(axis=1, keepdims=True))  # (5, 5)
    sums, counts = [], []
    for r in records:
        for w in range((r.length - 1) // L):
            first = r.offset + w * L + 1
            kept = [p for p in range(first, first + L) if tokens[p] & 0x7F != 4]
            sums.append(sum(-logp[tokens[p - 1] & 0x7F, tokens[p] & 0x7F] for p in kept))
            counts.append(len(kept))
    return np.array(sums), np.array(counts)


def test_nll_interval_is_the_window_bootstrap() -> None:
    """The NLL's interval is a percentile bootstrap over whole windows: it holds the estimate,
    and matches an independent bootstrap (scipy, same resample count) to Monte Carlo error.
    scipy is a test-only dependency: the floors environment, which installs the runtime ones
    only, skips this test."""
    bootstrap = pytest.importorskip("scipy.stats").bootstrap

    from goatdna.metrics import BOOTSTRAP_RESAMPLES

    rng = np.random.default_rng(1)
    tokens = rng.integers(0, 4, size=2000).astype(np.uint8)
    tokens[rng.random(2000) < 0.05] = 4
    records = [Rec(0, 1200), Rec(1200, 800)]
    table = rng.normal(size=(5, 5)) * 2
    res = evaluate_context(BigramLM(table), tokens, records, 16, train_length=16, batch_tokens=50)
    sums, counts = _window_nlls(tokens, records, 16, table)
    assert res.windows == sums.size
    assert res.nll == pytest.approx(sums.sum() / counts.sum(), rel=1e-6)
    assert res.nll_low < res.nll < res.nll_high
    assert res.resampled_nll is not None and res.resampled_nll.size == BOOTSTRAP_RESAMPLES
    reference = bootstrap(
        (sums, counts), lambda a, b: a.sum() / b.sum(), paired=True, vectorized=False,
        n_resamples=20_000, method="percentile", random_state=0,
    ).confidence_interval  # fmt: skip
    width = reference.high - reference.low
    assert res.nll_low == pytest.approx(reference.low, abs=0.1 * width)
    assert res.nll_high == pytest.approx(reference.high, abs=0.1 * width)
    # the same windows, another model: resampled alike (the draws depend only on the windows)
    other = evaluate_context(BigramLM(table * 0.5), tokens, records, 16, 16, batch_tokens=50)
    sums_b, _ = _window_nlls(tokens, records, 16, table * 0.5)
    diff = other.resampled_nll - res.resampled_nll
    assert diff.std() < np.hypot(other.resampled_nll.std(), res.resampled_nll.std())
    assert "resampled_nll" not in other.public() and other.public()["nll_low"] == other.nll_low
    assert sums_b.sum() / counts.sum() == pytest.approx(other.nll, rel=1e-6)


def test_uniform_model_scores_ln5_and_too_long_contexts_fail() -> None:
    tokens = np.zeros(100, dtype=np.uint8)
    model = BigramLM(np.zeros((5, 5)))
    res = evaluate_context(model, tokens, [Rec(0, 100)], 10, train_length=10)
    assert res.nll == pytest.approx(math.log(5), rel=1e-6)
    assert res.bits_per_base == pytest.approx(math.log2(5), rel=1e-6)
    with pytest.raises(GoatDNAError, match="does not fit"):
        evaluate_context(model, tokens, [Rec(0, 100)], 100, train_length=10)
    for text in ("", "a,b", "0,12"):
        with pytest.raises(GoatDNAError):
            parse_context_lengths(text)
    assert parse_context_lengths("64, 16,64") == [16, 64]


def test_max_tokens_caps_windows_on_real_shards(synthetic_shards: Path) -> None:
    genome = ShardedGenome(synthetic_shards)
    model = BigramLM(np.zeros((5, 5)))
    results = evaluate_model(model, genome, "val", [64, 256], 64, max_tokens=4096)
    assert [r.windows for r in results] == [64, 16]
    assert all(0 < r.bases <= 4096 for r in results)
    assert results[0].repeat_bases > 0 and results[0].nonrepeat_bases > 0
    with pytest.raises(GoatDNAError, match="split 'nope'"):
        evaluate_model(model, genome, "nope", [64], 64)


@pytest.fixture(scope="module")
def random_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    cfg = tiny_config()
    path = tmp_path_factory.mktemp("eval_ckpt") / "m.ckpt"
    return save_checkpoint(path, DNADecoder(cfg), {"model": to_dict(cfg), "data": {"seq_len": 32}})


def test_cli_writes_json_and_csv(
    random_checkpoint: Path, synthetic_shards: Path, tmp_path: Path
) -> None:
    res = invoke(
        [
            "evaluate", "--checkpoint", str(random_checkpoint), "--data", str(synthetic_shards),
            "--split", "test", "--context-lengths", "32,64", "--max-eval-tokens", "2048",
            "--out", str(tmp_path / "ev[x]"),
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    tmp_path = tmp_path / "ev[x]"  # a folder name rich would read as markup: printed as written
    assert f"wrote {tmp_path / 'evaluation.json'} and {tmp_path / 'evaluation.csv'}" in res.output
    doc = json.loads((tmp_path / "evaluation.json").read_text())
    frame = pd.read_csv(tmp_path / "evaluation.csv")
    assert doc["split"] == "test" and doc["train_length"] == 32
    assert (
        [r["context_length"] for r in doc["results"]]
        == [32, 64]
        == frame["context_length"].tolist()
    )
    assert frame["extrapolation"].tolist() == [False, True]
    np.testing.assert_allclose(frame["bits_per_base"], frame["nll"] / math.log(2), rtol=1e-12)
    assert np.isfinite(frame[["nll", "bits_per_base", "perplexity"]].to_numpy()).all()
    # A random model is about uniform over 5 classes.
    assert abs(frame["nll"].iloc[0] - math.log(5)) < 0.2
    bad = invoke(["evaluate", "-c", str(random_checkpoint), "-d", str(tmp_path / "none")])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: ")


IMPORT_RULES = {
    # package -> absolute imports it must not make (DESIGN.md's arrows); shared top-level modules
    # (errors, configfile, runtime, checkpoint, atomic, locking) are allowed outside model/
    "model": ("goatdna",),  # torch only, relative imports inside: shipped verbatim by export
    "data_prep": ("goatdna.model", "goatdna.training", "goatdna.analysis", "goatdna.inference",
                  "goatdna.hf", "goatdna.cli", "goatdna.checkpoint", "torch", "pytorch_lightning"),
    "analysis": ("goatdna.training", "goatdna.inference", "goatdna.hf", "goatdna.cli",
                 "pytorch_lightning"),
    "inference": ("goatdna.training", "goatdna.analysis", "goatdna.hf", "goatdna.cli"),
    "training": ("goatdna.analysis", "goatdna.inference", "goatdna.hf", "goatdna.cli"),
    "hf": ("goatdna.training", "goatdna.analysis", "goatdna.inference", "goatdna.cli",
           "goatdna.data_prep"),
    "": ("goatdna.cli", "goatdna.training", "goatdna.analysis", "goatdna.inference", "goatdna.hf"),
}  # fmt: skip


@pytest.mark.parametrize("package", sorted(IMPORT_RULES))
def test_import_direction(package: str) -> None:
    """Import direction (DESIGN.md): cli -> analysis | inference | training | hf -> model,
    data_prep; nothing imports cli; model imports nothing of goatdna."""
    import ast

    banned = IMPORT_RULES[package]
    folder = Path(__file__).resolve().parents[1] / "goatdna" / package
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                assert not name.startswith(banned), f"{path.name} imports {name}"


def test_rope_extension_at_evaluation(
    random_checkpoint: Path, synthetic_shards: Path, tmp_path: Path
) -> None:
    """--rope-extension turns a trained RoPE model into RoPE-PI / NTK at evaluation: the same
    NLL within the training length, a different one beyond it; other schemes refuse it."""
    torch.manual_seed(1)
    cfg = ModelConfig(
        positional="rope", n_layers=1, d_model=32, n_heads=2, mlp_hidden=64, train_length=32
    )
    rope = save_checkpoint(
        tmp_path / "rope.ckpt", DNADecoder(cfg), {"model": to_dict(cfg), "data": {"seq_len": 32}}
    )
    nll = {}
    for extension in (None, "linear", "ntk"):
        evaluation = evaluate_checkpoint(
            rope, synthetic_shards, "val", [32, 128], 4096, rope_extension=extension
        )
        nll[extension] = [r.nll for r in evaluation.results]
    for extension in ("linear", "ntk"):
        assert nll[extension][0] == pytest.approx(nll[None][0], abs=1e-6)  # 1x: unchanged
        assert nll[extension][1] != nll[None][1]  # 4x: stretched positions
    plain = load_checkpoint(rope).model
    loaded = load_checkpoint(rope, rope_extension="ntk")
    model, config = loaded.model, loaded.run_config
    assert model.config.rope_extension == "ntk" and config["model"]["rope_extension"] == "ntk"
    assert loaded.model_config.rope_extension == "ntk"
    ids = torch.randint(0, 4, (1, 128))
    with torch.no_grad():
        assert torch.equal(model(ids[:, :32]), plain(ids[:, :32]))
        assert (model(ids) - plain(ids)).abs().max() > 1e-5  # float noise is ~1e-7

    res = invoke(
        ["evaluate", "-c", str(random_checkpoint), "-d", str(synthetic_shards),
         "--rope-extension", "ntk"],
    )  # fmt: skip
    assert res.exit_code == 2
    assert "--rope-extension applies to RoPE models" in res.output and "goat" in res.output


def test_evaluate_is_one_library_call_printing_the_commands_bytes(
    random_checkpoint: Path, synthetic_shards: Path, tmp_path: Path
) -> None:
    """`goatdna evaluate` only builds an `EvaluateRequest`: `evaluate_run.evaluate` checks it
    and evaluates; its parts, printed, are the command's stdout, and `write_evaluation` writes
    the command's files byte for byte."""
    from goatdna.analysis.evaluate import write_evaluation
    from goatdna.analysis.evaluate_run import EvaluateRequest, evaluate, evaluation_parts

    cli_out, lib_out = tmp_path / "cli", tmp_path / "lib"
    res = invoke(
        ["evaluate", "-c", random_checkpoint, "-d", synthetic_shards, "--split", "test",
         "--context-lengths", "32,64", "--max-eval-tokens", "2048", "--out", cli_out],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    request = EvaluateRequest(random_checkpoint, synthetic_shards, "test", "32,64", 2048)
    evaluation = evaluate(request)
    lib_out.mkdir()
    write_evaluation(evaluation, lib_out / "evaluation.json", lib_out / "evaluation.csv")
    for name in ("evaluation.json", "evaluation.csv"):
        assert (lib_out / name).read_bytes() == (cli_out / name).read_bytes(), name
    wrote = f"wrote {cli_out / 'evaluation.json'} and {cli_out / 'evaluation.csv'}\n"
    assert res.stdout == printed(*evaluation_parts(evaluation)) + wrote
    taken = tmp_path / "a-file"
    taken.write_text("x")
    with pytest.raises(GoatDNAError, match="--out"):
        evaluate(EvaluateRequest(random_checkpoint, synthetic_shards, out=taken))
    with pytest.raises(GoatDNAError, match="--batch-tokens must be >= 1"):
        evaluate(EvaluateRequest(random_checkpoint, synthetic_shards, batch_tokens=0))
