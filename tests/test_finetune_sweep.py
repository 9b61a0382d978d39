"""The probe sweep (`goatdna finetune --mode probe --layer all --pool mean,last`): features of
every layer from one trunk pass, the choice made on validation only, the table's numbers equal to
a recomputation, and `goatdna embed` of a probe checkpoint reading the chosen layer."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from helpers import invoke

from goatdna.model import DNADecoder, ModelConfig
from goatdna.model.classifier import SequenceTaskConfig, SequenceTaskModel
from goatdna.training.finetune_config import FinetuneConfig
from goatdna.training.finetune_data import Split, StepPlan, TaskData
from goatdna.training.probe import ProbeChoice, pooled_features, probe_choices, sweep_probes


def tiny_decoder(positional: str = "goat", d_model: int = 32, n_layers: int = 3) -> DNADecoder:
    torch.manual_seed(0)
    config = ModelConfig(d_model=d_model, n_layers=n_layers, n_heads=2, train_length=64,
                         mlp_hidden=64, goat_modes=3, goat_mlp_hidden=16,
                         positional=positional)  # type: ignore[arg-type]  # fmt: skip
    return DNADecoder(config).eval()


@pytest.mark.parametrize("positional", ["goat", "rope"])
def test_hidden_at_gives_each_layer_as_a_separate_call(positional: str) -> None:
    model = tiny_decoder(positional)
    idx = torch.randint(0, 5, (2, 40))
    layers = [2, None, 0, 1, 3]
    with torch.no_grad():
        together = model.hidden_at(idx, layers, start_pos=5)
        for k, got in zip(layers, together, strict=True):
            assert torch.equal(got, model.hidden(idx, 5, layers=k)), k
        # not needing the final norm, the pass stops at the deepest block asked for
        assert torch.equal(model.hidden_at(idx, [1])[0], model.hidden(idx, layers=1))
    with pytest.raises(ValueError, match="layers must be in"):
        model.hidden_at(idx, [4])


def test_probe_choices_spell_out_all_and_refuse_a_missing_layer() -> None:
    from goatdna.errors import GoatDNAError

    got = probe_choices("all", "mean,last", 2)
    assert [c.key for c in got] == ["1/mean", "1/last", "2/mean", "2/last", "final/mean",
                                    "final/last"]  # fmt: skip
    assert [c.key for c in probe_choices("final,2,2", "last", 3)] == ["final/last", "2/last"]
    with pytest.raises(GoatDNAError, match="--layer 5: the backbone has 2 block"):
        probe_choices("1,5", "mean", 2)


def test_pooled_features_of_several_layers_equal_single_layer_embeddings(one_thread: None) -> None:
    """One pass for every (layer, pooling) equals one run per choice, and equals `goatdna
    embed`'s path (`embed_token_lists`) at that layer and pooling."""
    from goatdna.inference.embed import embed_token_lists

    model = tiny_decoder()
    rng = np.random.default_rng(1)
    tokens = [rng.integers(0, 4, n).astype(np.int64) for n in (30, 17, 45, 8, 30)]
    split = Split(tokens, np.zeros(len(tokens), dtype=np.int64))
    choices = probe_choices("all", "mean,last", model.n_layers)
    device = torch.device("cpu")
    together = pooled_features(model, choices, split, 2, True, device)
    for choice in choices:
        alone = pooled_features(model, [choice], split, 2, True, device)[choice]
        forward, reverse = together[choice]
        assert torch.equal(forward, alone[0]) and reverse is not None and alone[1] is not None
        assert torch.equal(reverse, alone[1])
        embedded = embed_token_lists(model, tokens, choice.layer, choice.pool, 64, 1)
        np.testing.assert_allclose(forward.numpy(), np.stack(embedded), rtol=1e-5, atol=1e-6)


def crafted_task(n: int = 96, d: int = 32, seed: int = 0):
    """Two candidate layers: layer 1 predicts the class on train and val but not on test;
    layer 2 predicts it on train and test but not on val."""
    rng = np.random.default_rng(seed)
    labels = {s: np.arange(n) % 2 for s in ("train", "val", "test")}

    def feats(informative: bool, y: np.ndarray) -> torch.Tensor:
        x = rng.normal(size=(y.size, d))
        if informative:
            x += 1.0 * (2 * y - 1)[:, None]  # every dim carries the class
        return torch.tensor(x, dtype=torch.float32)

    informative = {"1": ("train", "val"), "2": ("train", "test")}
    features = {
        ProbeChoice(int(layer), "mean"): {
            s: (feats(s in where, labels[s]), None) for s in ("train", "val", "test")
        }
        for layer, where in informative.items()
    }
    splits = {s: Split([np.zeros(4, dtype=np.int64)] * n, labels[s]) for s in labels}
    task = TaskData("classification", ["a", "b"], splits)
    return task, features


def sweep_of(task, features, config: FinetuneConfig):
    def model_of(choice: ProbeChoice) -> SequenceTaskModel:
        torch.manual_seed(config.seed)
        head = SequenceTaskConfig("classification", ("a", "b"), layer=choice.layer,
                                  pool="mean")  # fmt: skip
        return SequenceTaskModel(tiny_decoder(), head)

    plan = StepPlan(len(task.splits["train"]), config.trainer.batch_size, config.seed, False)
    return sweep_probes(features, task, config, plan, model_of)


def test_sweep_chooses_on_validation_never_on_test(one_thread: None) -> None:
    config = FinetuneConfig()
    config.trainer.epochs, config.optim.head_lr = 4, 3e-2
    task, features = crafted_task()
    sweep = sweep_of(task, features, config)
    by_layer = {r.choice.layer: r for r in sweep.rows}
    assert by_layer[1].val["mcc"] > 0.8 > 0.3 > by_layer[2].val["mcc"]
    assert sweep.chosen == ProbeChoice(1, "mean")
    assert all(set(r.val) == set(by_layer[1].val) for r in sweep.rows)  # no test metrics
    # the crafted case does separate the two rules: chosen on the test split, layer 2 wins ...
    on_test = {c: {"train": s["train"], "val": s["test"]} for c, s in features.items()}
    assert sweep_of(task, on_test, config).chosen == ProbeChoice(2, "mean")
    # ... and the test split is never read: poisoned test features change nothing
    poisoned = {c: {**s, "test": (torch.full_like(s["test"][0], math.nan), None)}
                for c, s in features.items()}  # fmt: skip
    assert sweep_of(task, poisoned, config).rows == sweep.rows


def test_a_head_whose_loss_becomes_nan_keeps_its_best_step_before_it(one_thread: None) -> None:
    """The sweep fits its heads through the run's loop (`loop.fit`, without a run directory):
    a head whose loss turns NaN part-way stops there, keeps the best validation it had, and
    says so in its note; the other heads and the choice go on."""
    calls = {1: 0, 2: 0}

    class NanAfterSevenSteps(SequenceTaskModel):
        def loss(self, out: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            layer = self.task_config.layer
            assert layer is not None
            calls[layer] += 1
            value = super().loss(out, labels)
            return value * math.nan if layer == 1 and calls[layer] >= 8 else value

    config = FinetuneConfig()
    config.trainer.epochs, config.trainer.batch_size, config.optim.head_lr = 4, 32, 3e-2
    task, features = crafted_task()  # 96 train rows: 3 steps an epoch, 12 in all

    def model_of(choice: ProbeChoice) -> SequenceTaskModel:
        torch.manual_seed(config.seed)
        head = SequenceTaskConfig("classification", ("a", "b"), layer=choice.layer, pool="mean")
        return NanAfterSevenSteps(tiny_decoder(), head)

    plan = StepPlan(len(task.splits["train"]), config.trainer.batch_size, config.seed, False)
    sweep = sweep_probes(features, task, config, plan, model_of)
    by_layer = {r.choice.layer: r for r in sweep.rows}
    assert calls == {1: 8, 2: 12}  # layer 1 stopped at the NaN step, layer 2 ran every step
    assert by_layer[1].note == "non-finite loss or gradients at step 8"
    assert by_layer[1].best_step in (3, 6) and by_layer[1].val["mcc"] > 0.8
    assert by_layer[2].note == "" and by_layer[2].best_step in (3, 6, 9, 12)
    assert sweep.chosen == ProbeChoice(1, "mean")  # its best before the NaN still counts


def finetune_args(task_dir: Path, checkpoint: Path, out: Path, *extra: str) -> list[str]:
    return ["finetune", "--checkpoint", str(checkpoint), "--train", str(task_dir / "train.csv"),
            "--val", str(task_dir / "val.csv"), "--test", str(task_dir / "test.csv"),
            "--out", str(out), "--no-progress", "--mode", "probe", "--epochs", "3",
            "--lr", "3e-3", *extra]  # fmt: skip


@pytest.fixture(scope="module")
def small_task(synthetic_shards: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("task") / "gc"
    result = invoke(["make-task", "--data", str(synthetic_shards), "--out", str(out),
                                 "--label", "gc", "--max-train", "160", "--max-eval", "80"])  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def read_tsv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


@pytest.fixture(scope="module")
def sweep_run(small_task: Path, tiny_runs: dict[str, Path], tmp_path_factory) -> Path:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        backbone = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
        out = tmp_path_factory.mktemp("sweep") / "run"
        result = invoke(finetune_args(small_task, backbone, out, "--layer", "all",
                                                  "--pool", "mean,last"))  # fmt: skip
        assert result.exit_code == 0, (result.output, result.exception)
        assert "probe sweep" in result.output  # the printed table
    finally:
        torch.set_num_threads(threads)
    return out


def chosen_row(run: Path) -> dict[str, str]:
    return next(r for r in read_tsv(run / "probe_sweep.tsv") if r["chosen"] == "1")


def test_sweep_keeps_the_best_validation_pair(sweep_run: Path) -> None:
    rows = read_tsv(sweep_run / "probe_sweep.tsv")
    resolved = yaml.safe_load((sweep_run / "config.yaml").read_text())
    n_layers = resolved["model"]["n_layers"]
    assert [(r["layer"], r["pool"]) for r in rows] == [
        (layer, pool) for layer in [*map(str, range(1, n_layers + 1)), "final"]
        for pool in ("mean", "last")
    ]  # fmt: skip
    assert not any(k.startswith("test") for k in rows[0])
    mccs = [float(r["val_mcc"]) for r in rows]
    best = rows[int(np.argmax(mccs))]  # the first of the best, on validation
    assert [r["chosen"] for r in rows].count("1") == 1 and best["chosen"] == "1"
    summary = json.loads((sweep_run / "summary.json").read_text())
    assert summary["probe"] == {"layer": best["layer"], "pool": best["pool"],
                                "pairs_swept": len(rows)}  # fmt: skip
    document = json.loads((sweep_run / "probe_sweep.json").read_text())
    assert document["chosen"] == {"layer": best["layer"], "pool": best["pool"]}
    head = resolved["head"]
    assert (head["layer"], head["pool"]) == (None if best["layer"] == "final"
                                             else int(best["layer"]), best["pool"])  # fmt: skip
    # the chosen row is the run's own validation result, and the test split is reported once
    for key, value in summary["val"].items():
        assert float(best[f"val_{key}"]) == pytest.approx(value, rel=1e-6, abs=1e-9), key
    assert set(summary["test"]) == set(summary["val"])


def test_the_chosen_rows_metrics_recompute_from_predictions(
    sweep_run: Path, small_task: Path, one_thread: None
) -> None:
    """The checkpoint's predictions (through the chosen layer) give the table row's metrics."""
    from goatdna.checkpoint import load_task_model
    from goatdna.inference.predict import predict_tokens
    from goatdna.io.tables import encode_sequences, read_table
    from goatdna.training.heads import evaluate_predictions

    best = chosen_row(sweep_run)
    loaded = load_task_model(sweep_run / "checkpoints" / "best.ckpt")
    val = read_table(small_task / "val.csv")
    tokens = encode_sequences(val, "sequence", "--sequence-column")
    labels = np.array([loaded.classes.index(v) for v in val.columns["label"]])
    preds = np.asarray(predict_tokens(loaded, tokens, batch_size=16))
    again = evaluate_predictions("classification", labels, preds)
    for key in ("mcc", "auroc", "accuracy", "macro_f1", "loss"):
        assert float(best[f"val_{key}"]) == pytest.approx(again[key], abs=1e-6), key


def test_another_row_recomputes_as_a_run_of_that_pair_alone(
    sweep_run: Path, small_task: Path, tiny_runs: dict[str, Path], tmp_path: Path,
    one_thread: None,
) -> None:  # fmt: skip
    backbone = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    rows = read_tsv(sweep_run / "probe_sweep.tsv")
    other = next(r for r in rows if r["chosen"] == "0" and r["layer"] != "final")
    alone = tmp_path / "alone"
    result = invoke(finetune_args(small_task, backbone, alone, "--layer",
                                              other["layer"], "--pool", other["pool"]))  # fmt: skip
    assert result.exit_code == 0, (result.output, result.exception)
    alone_val = json.loads((alone / "summary.json").read_text())["val"]
    for key, value in alone_val.items():
        assert float(other[f"val_{key}"]) == pytest.approx(value, rel=1e-6, abs=1e-9), key
    assert not (alone / "probe_sweep.tsv").exists()


def test_embed_of_a_probe_checkpoint_reads_the_chosen_layer(
    sweep_run: Path, small_task: Path, tiny_runs: dict[str, Path], tmp_path: Path
) -> None:
    from goatdna.io.tables import read_table

    best = chosen_row(sweep_run)
    backbone = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    seqs = tmp_path / "seqs.csv"
    sequences = read_table(small_task / "val.csv").columns["sequence"][:6]
    seqs.write_text("sequence\n" + "".join(s + "\n" for s in sequences))
    by_default, explicit = tmp_path / "a.npz", tmp_path / "b.npz"
    layer_args = [] if best["layer"] == "final" else ["--layer", best["layer"]]
    for target, args, ckpt in ((by_default, [], sweep_run / "checkpoints" / "best.ckpt"),
                               (explicit, [*layer_args, "--pool", best["pool"]], backbone)):  # fmt: skip
        result = invoke(["embed", "-c", str(ckpt), "--sequences", str(seqs),
                                     "--out", str(target), *args])  # fmt: skip
        assert result.exit_code == 0, (result.output, result.exception)
    with np.load(by_default) as a, np.load(explicit) as b:
        key = next(k for k in a.files if a[k].dtype.kind == "f")
        np.testing.assert_array_equal(a[key], b[key])


def test_resume_repeats_the_choice_and_force_clears_the_table(
    sweep_run: Path, small_task: Path, tiny_runs: dict[str, Path], tmp_path: Path,
    one_thread: None,
) -> None:  # fmt: skip
    import shutil

    backbone = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    run = tmp_path / "run"
    shutil.copytree(sweep_run, run)
    # resuming the finished sweep recomputes the same choice from the cached features
    args = finetune_args(small_task, backbone, run, "--layer", "all", "--pool", "mean,last")
    resumed = invoke([*args, "--resume"])
    assert resumed.exit_code == 0, (resumed.output, resumed.exception)
    assert chosen_row(run) == chosen_row(sweep_run)
    # --force over the sweep with one pair: the old table goes with the old run
    result = invoke(finetune_args(small_task, backbone, run, "--force"))
    assert result.exit_code == 0, (result.output, result.exception)
    assert not (run / "probe_sweep.tsv").exists() and not (run / "probe_sweep.json").exists()


def test_layer_lists_need_probe_mode(small_task: Path, tiny_runs: dict[str, Path],
                                     tmp_path: Path) -> None:  # fmt: skip
    backbone = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    args = finetune_args(small_task, backbone, tmp_path / "x", "--layer", "all")
    args[args.index("probe")] = "full"
    result = invoke(args)
    assert result.exit_code == 2
    assert "need mode probe" in result.output
    bad = invoke(finetune_args(small_task, backbone, tmp_path / "y", "--layer", "9"))
    assert bad.exit_code == 2 and "--layer 9: the backbone has" in bad.output
    assert not (tmp_path / "y" / "config.yaml").exists()


def test_the_same_sweep_command_is_not_a_different_config_and_the_lock_comes_first(
    sweep_run: Path, small_task: Path, tiny_runs: dict[str, Path], tmp_path: Path,
    one_thread: None,
) -> None:  # fmt: skip
    """Rerun over a finished sweep: told it holds a run (not "head.layer is 2 there, 1 now": the
    stored choice is compared, not the option's first pair); and a folder another run holds is
    refused before the features are computed or the sweep runs."""
    import shutil

    from goatdna.locking import folder_lock

    backbone = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    run = tmp_path / "run"
    shutil.copytree(sweep_run, run)
    args = finetune_args(small_task, backbone, run, "--layer", "all", "--pool", "mean,last")
    again = invoke(args)
    assert again.exit_code == 2, again.output
    assert "different config" not in again.output and "already holds a run" in again.output
    for extra in (["--resume"], ["--force"]):
        with folder_lock(run, "--out"):
            held = invoke([*args, *extra])
        assert held.exit_code == 2 and "is in use" in held.output, held.output
        assert "probe sweep" not in held.output
    assert chosen_row(run) == chosen_row(sweep_run)  # nothing was touched


def test_computing_probe_features_shows_progress_and_a_cached_run_does_not(
    small_task: Path, tiny_runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    one_thread: None,
) -> None:  # fmt: skip
    """Issue 40.15: the features of a large task take minutes, with nothing else on the screen;
    in a log the run now prints `probe features: done/total sequences` lines while it computes
    them (nothing with --no-progress, nothing when they come from RUN_DIR/cache)."""
    import goatdna.progress

    monkeypatch.setattr(goatdna.progress, "INTERVAL_S", 0.0)  # a line at every batch
    backbone = tiny_runs["goat"] / "checkpoints" / "best.ckpt"

    def feature_lines(output: str) -> list[str]:
        return [line for line in output.splitlines() if line.startswith("probe features: ")]

    run = tmp_path / "run"
    args = finetune_args(small_task, backbone, run, "--layer", "1,final", "--epochs", "1")
    shown = invoke([*(a for a in args if a != "--no-progress"), "--progress"])
    assert shown.exit_code == 0, (shown.output, shown.exception)
    lines = feature_lines(shown.output)
    rows = sum(json.loads((run / "summary.json").read_text())["rows"].values())
    assert len(lines) >= 2, shown.output  # one per batch: the work is seen moving
    counts = [int(line.split()[2].split("/")[0]) for line in lines]
    assert counts == sorted(counts) and counts[-1] == rows
    assert lines[-1].startswith(f"probe features: {rows:,}/{rows:,} sequences (100%)")
    summary = next(line for line in shown.stdout.splitlines() if line.startswith("{"))
    assert json.loads(summary)["mode"] == "probe"  # stdout keeps the summary alone
    assert not feature_lines(shown.stdout)

    quiet = invoke(finetune_args(small_task, backbone, tmp_path / "quiet", "--layer",
                                             "1,final", "--epochs", "1"))  # fmt: skip
    assert quiet.exit_code == 0 and not feature_lines(quiet.output), quiet.output
    again = invoke([*(a for a in args if a != "--no-progress"), "--progress",
                                "--force"])  # fmt: skip
    assert again.exit_code == 0, (again.output, again.exception)
    assert not feature_lines(again.output)  # read from RUN_DIR/cache: nothing computed


def test_a_probe_run_in_bf16_true_on_the_cpu_finishes(
    small_task: Path, tiny_runs: dict[str, Path], tmp_path: Path, one_thread: None
) -> None:
    """The cached features are float32 and the head is bfloat16 under --precision bf16-true:
    the head's predictions ended in a dtype traceback after config.yaml was written."""
    backbone = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    run = tmp_path / "run"
    args = finetune_args(small_task, backbone, run, "--layer", "final", "--epochs", "1")
    result = invoke([*args, "--precision", "bf16-true"])
    assert result.exit_code == 0, (result.output, result.exception)
    assert (run / "summary.json").is_file()
