"""`goatdna make-task`, `finetune` and `predict` end to end on the synthetic genome.

The backbone is the session's tiny pretrained GOAT run (`tiny_runs`, tests/conftest.py).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from goatdna.cli.app import app
from goatdna.data_prep import ShardedGenome
from goatdna.io.tokens import REPEAT_FLAG, TOKEN_MASK, UPPER_DECODE, reverse_complement_text

runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, [str(a) for a in args])
    return result


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def make_task(shards: Path, out: Path, label: str) -> Path:
    result = invoke("make-task", "--data", shards, "--out", out, "--label", label,
                    "--max-train", "600", "--max-eval", "200")  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def repeat_task(synthetic_shards: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_task(synthetic_shards, tmp_path_factory.mktemp("task") / "repeat", "repeat")


@pytest.fixture(scope="module")
def task_dir(synthetic_shards: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The GC-class task (3 classes): what the learning tests train on."""
    return make_task(synthetic_shards, tmp_path_factory.mktemp("task") / "gc", "gc")


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_make_task_windows_stay_in_their_split_and_labels_follow_the_softmask(
    repeat_task: Path, synthetic_shards: Path
) -> None:
    task_dir = repeat_task
    genome = ShardedGenome(synthetic_shards)
    info = json.loads((task_dir / "task.json").read_text())
    assert info["data_manifest_sha256"] == genome.manifest_sha256
    for split in ("train", "val", "test"):
        rows = read_csv(task_dir / f"{split}.csv")
        assert rows and len(rows) <= (600 if split == "train" else 200)
        tokens = genome.tokens(split)
        records = genome.records(split)
        for row in rows:
            name, span = row["id"].rsplit(":", 1)
            start, end = (int(x) for x in span.split("-"))
            start -= 1  # 1-based inclusive -> 0-based half-open
            (record,) = [r for r in records if r.name == name and r.start <= start < r.end]
            assert end <= record.end  # the window lies in one record of this split
            raw = np.asarray(tokens[record.offset + start - record.start :][: end - start])
            assert row["sequence"] == UPPER_DECODE[raw & TOKEN_MASK].tobytes().decode()
            masked = float(((raw & REPEAT_FLAG) != 0).mean())
            assert row["label"] == ("1" if masked >= 0.5 else "0")
        assert info["counts"][split] == {
            c: sum(r["label"] == c for r in rows) for c in {r["label"] for r in rows}
        }
    train = read_csv(task_dir / "train.csv")
    assert {r["label"] for r in train} == {"0", "1"}
    assert abs(sum(r["label"] == "1" for r in train) - len(train) / 2) <= 1  # balanced


def finetune_args(task_dir: Path, checkpoint: Path, out: Path, *extra: str) -> list[str]:
    return ["finetune", "--checkpoint", str(checkpoint), "--train", str(task_dir / "train.csv"),
            "--val", str(task_dir / "val.csv"), "--test", str(task_dir / "test.csv"),
            "--out", str(out), "--no-progress", *extra]  # fmt: skip


@pytest.fixture(scope="module")
def probe_run(task_dir: Path, tiny_runs: dict[str, Path], tmp_path_factory) -> Path:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = tmp_path_factory.mktemp("ft") / "probe"
        ckpt = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
        result = runner.invoke(app, finetune_args(task_dir, ckpt, out, "--mode", "probe",
                                                  "--epochs", "8", "--lr", "3e-3",
                                                  "--rc-augment", "--rc-average"))  # fmt: skip
        assert result.exit_code == 0, (result.output, result.exception)
    finally:
        torch.set_num_threads(threads)
    return out


def test_probe_learns_the_task_above_chance(probe_run: Path) -> None:
    summary = json.loads((probe_run / "summary.json").read_text())
    assert summary["mode"] == "probe" and summary["task"] == "classification"
    assert summary["trainable_params"] < summary["params"] / 10  # only the head trained
    # chance: MCC 0, AUROC 0.5 (three classes, balanced in train)
    assert summary["test"]["auroc"] > 0.8, summary["test"]
    assert summary["test"]["mcc"] > 0.4, summary["test"]
    assert (probe_run / "cache" / "probe_features.pt").is_file()
    for name in ("config.yaml", "metrics.csv", "checkpoints/best.ckpt", "checkpoints/last.ckpt"):
        assert (probe_run / name).is_file()
    rows = read_csv(probe_run / "metrics.csv")
    assert sum(r["val_mcc"] != "" for r in rows) == 8  # one validation per epoch
    assert summary["class_balance"]["train"]["counts"] == {"high": 200, "low": 200, "mid": 200}


def test_report_refuses_a_fine_tuning_run_in_one_line(
    probe_run: Path, synthetic_shards: Path, tmp_path: Path
) -> None:
    """A fine-tuned run's loss is a task's: report must not present it as a language model."""
    out = tmp_path / "report"
    res = runner.invoke(app, ["report", "--run", str(probe_run), "--data", str(synthetic_shards),
                              "--out", str(out)])  # fmt: skip
    assert res.exit_code == 2, res.output
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "a `goatdna finetune` run" in lines[0], lines
    assert not out.exists()


def test_full_finetuning_learns_the_task_above_chance(
    task_dir: Path, tiny_runs: dict[str, Path], tmp_path: Path, one_thread: None
) -> None:
    ckpt = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    out = tmp_path / "full"
    result = runner.invoke(app, finetune_args(task_dir, ckpt, out, "--mode", "full",
                                              "--epochs", "2", "--rc-augment"))  # fmt: skip
    assert result.exit_code == 0, (result.output, result.exception)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trainable_params"] == summary["params"] - 5 * 64  # all but the next-base head
    assert summary["test"]["auroc"] > 0.75, summary["test"]
    assert summary["test"]["mcc"] > 0.3, summary["test"]
    # the backbone of a fine-tuned checkpoint still loads as a language model
    from goatdna.checkpoint import load_checkpoint

    loaded = load_checkpoint(out / "checkpoints" / "best.ckpt")
    model, config = loaded.model, loaded.run_config
    assert loaded.kind == "finetuned"
    assert config["head"]["classes"] == ["high", "low", "mid"] and model.config.positional == "goat"


def test_predict_keeps_row_order_and_carries_columns(
    probe_run: Path, task_dir: Path, tmp_path: Path
) -> None:
    from goatdna.checkpoint import load_task_model
    from goatdna.inference.predict import predict_tokens

    rows = read_csv(task_dir / "test.csv")[:40]
    rng = np.random.default_rng(0)
    order = rng.permutation(len(rows))
    src = tmp_path / "input.csv"
    with src.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["note", "sequence", "id"])
        for i in order:  # odd cells that must come back verbatim
            seq = rows[i]["sequence"][: 120 + int(i) % 80]  # different lengths: padding
            writer.writerow([f"00{i},x" if i % 2 else "", seq.lower() if i % 3 == 0 else seq,
                             rows[i]["id"]])  # fmt: skip
    out = tmp_path / "pred.csv"
    ckpt = probe_run / "checkpoints" / "best.ckpt"
    result = invoke("predict", "--checkpoint", ckpt, "--sequences", src, "--out", out,
                    "--batch-size", "7")  # fmt: skip
    assert result.exit_code == 0, (result.output, result.exception)
    with src.open(newline="") as fh:
        given = list(csv.reader(fh))
    with out.open(newline="") as fh:
        got = list(csv.reader(fh))
    assert got[0] == ["note", "sequence", "id", "prob_high", "prob_low", "prob_mid", "pred"]
    assert [r[:3] for r in got] == given
    # each row's probabilities are that sequence's own, computed alone
    loaded = load_task_model(ckpt)
    from goatdna.io.tables import encode_sequences, read_table

    tokens = encode_sequences(read_table(src), "sequence", "--sequence-column")
    for k in (0, 13, 39):
        alone = predict_tokens(loaded, [tokens[k]], batch_size=1)[0]
        np.testing.assert_allclose([float(x) for x in got[k + 1][3:6]], alone, atol=2e-7)
        assert got[k + 1][6] == loaded.classes[int(alone.argmax())]
        assert abs(alone.sum() - 1) < 1e-6


def test_predict_writes_the_format_its_suffix_names_with_types_kept(
    probe_run: Path, task_dir: Path, tmp_path: Path
) -> None:
    """.tsv/.csv (and gzipped) are text with the input's cells verbatim; .parquet keeps types:
    a text input's whole numbers as int64 and numbers as float64, a Parquet input's own types."""
    import gzip

    import pandas as pd
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    rows = read_csv(task_dir / "test.csv")[:9]
    src = tmp_path / "input.csv"
    with src.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["id", "sequence", "label", "score", "tag"])
        for i, row in enumerate(rows):
            writer.writerow([row["id"], row["sequence"], i % 2, f"{i / 4:g}", f"00{i}"])
    ckpt = probe_run / "checkpoints" / "best.ckpt"
    added = ["prob_high", "prob_low", "prob_mid", "pred"]
    frames = {}
    for suffix in (".tsv", ".csv", ".tsv.gz", ".csv.gz", ".parquet"):
        out = tmp_path / f"pred{suffix}"
        result = invoke("predict", "--checkpoint", ckpt, "--sequences", src, "--out", out)
        assert result.exit_code == 0, (result.output, result.exception)
        if suffix.endswith(".gz"):
            assert out.read_bytes()[:2] == b"\x1f\x8b"  # gzip magic
            text = gzip.decompress(out.read_bytes()).decode()
        elif suffix != ".parquet":
            text = out.read_text()
        if suffix == ".parquet":
            table = pq.read_table(out)  # pyarrow reads it as Parquet
            types = {f.name: str(f.type).replace("large_", "") for f in table.schema}
            assert types == {"id": "string", "sequence": "string", "label": "int64",
                             "score": "double", "tag": "string", "prob_high": "double",
                             "prob_low": "double", "prob_mid": "double", "pred": "string"}  # fmt: skip
            frames[suffix] = pd.read_parquet(out)
            assert frames[suffix]["tag"].tolist() == [f"00{i}" for i in range(9)]
        else:
            sep = "\t" if ".tsv" in suffix else ","
            assert text.splitlines()[0].split(sep) == ["id", "sequence", "label", "score", "tag",
                                                       *added]  # fmt: skip
            parse = pa_csv.ParseOptions(delimiter=sep)
            assert pa_csv.read_csv(out, parse_options=parse).num_rows == 9  # .gz by its name
            frames[suffix] = pd.read_csv(out, sep=sep, dtype={"tag": str})
        assert frames[suffix]["label"].dtype == np.int64, suffix
        assert frames[suffix]["id"].tolist() == [r["id"] for r in rows]
    for suffix, frame in frames.items():
        pd.testing.assert_frame_equal(frame, frames[".parquet"], check_exact=False, rtol=1e-7)
        assert (frame["pred"] == frames[".tsv"]["pred"]).all(), suffix
    # a Parquet input's own column types come back as they were
    typed = pd.DataFrame({"sequence": [r["sequence"] for r in rows],
                          "label": np.arange(9, dtype=np.int32), "flag": [True, False] * 4 + [True],
                          "weight": np.linspace(0, 1, 9, dtype=np.float32)})  # fmt: skip
    typed.to_parquet(tmp_path / "typed.parquet", index=False)
    out = tmp_path / "typed-pred.parquet"
    result = invoke("predict", "--checkpoint", ckpt, "--sequences", tmp_path / "typed.parquet",
                    "--out", out)  # fmt: skip
    assert result.exit_code == 0, (result.output, result.exception)
    back = pd.read_parquet(out)
    pd.testing.assert_frame_equal(back[list(typed.columns)], typed)
    np.testing.assert_allclose(back[added[:3]].to_numpy(), frames[".parquet"][added[:3]], 1e-6)


@pytest.mark.parametrize("name", ["pred.txt", "pred.xlsx", "pred.parquet.gz", "pred.gz", "pred"])
def test_predict_refuses_an_unknown_suffix_before_any_work(tmp_path: Path, name: str) -> None:
    """The suffix is checked first: a checkpoint and an input that do not exist are not read."""
    out = tmp_path / name
    result = invoke("predict", "--checkpoint", tmp_path / "none.ckpt", "--sequences",
                    tmp_path / "none.csv", "--out", out)  # fmt: skip
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --out"), result.output
    assert "must end in .tsv, .tsv.gz, .csv, .csv.gz or .parquet" in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_rc_average_gives_identical_predictions_for_both_strands(probe_run: Path) -> None:
    from goatdna.checkpoint import load_task_model
    from goatdna.inference.predict import predict_tokens
    from goatdna.io.tables import SequenceTable, encode_sequences

    loaded = load_task_model(probe_run / "checkpoints" / "best.ckpt")
    rng = np.random.default_rng(3)
    seqs = ["".join(rng.choice(list("ACGT"), size=n)) for n in (60, 150, 97)]
    seqs += [reverse_complement_text(s) for s in seqs]
    table = SequenceTable(Path("x.csv"), {"sequence": seqs}, 2)
    tokens = encode_sequences(table, "sequence", "--sequence-column")
    averaged = predict_tokens(loaded, tokens, rc_average=True, batch_size=4)
    np.testing.assert_allclose(averaged[:3], averaged[3:], rtol=0, atol=1e-6)
    single = predict_tokens(loaded, tokens, rc_average=False, batch_size=4)
    assert np.abs(single[:3] - single[3:]).max() > 1e-4  # one strand alone does differ


def test_regression_with_held_out_validation(
    task_dir: Path, tiny_runs: dict[str, Path], tmp_path: Path, one_thread: None
) -> None:
    """A numeric label (GC fraction) becomes a regression task; val is held out of train."""
    src = tmp_path / "gc.tsv"
    rows = read_csv(task_dir / "train.csv")
    with src.open("w") as fh:
        fh.write("seq\tgc\n")
        for r in rows:
            s = r["sequence"]
            fh.write(f"{s}\t{(s.count('G') + s.count('C')) / len(s):.4f}\n")
    out = tmp_path / "reg"
    ckpt = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    result = invoke("finetune", "--checkpoint", ckpt, "--train", src, "--out", out,
                    "--sequence-column", "seq", "--label-column", "gc", "--mode", "probe",
                    "--epochs", "6", "--lr", "3e-3", "--no-progress")  # fmt: skip
    assert result.exit_code == 0, (result.output, result.exception)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["task"] == "regression"
    assert summary["rows"] == {"train": 540, "val": 60}
    assert summary["val"]["pearson"] > 0.5, summary["val"]
    pred = tmp_path / "reg.csv"
    result = invoke("predict", "--checkpoint", out / "checkpoints" / "best.ckpt",
                    "--sequences", src, "--sequence-column", "seq", "--out", pred)  # fmt: skip
    assert result.exit_code == 0, result.output
    got = read_csv(pred)
    assert list(got[0]) == ["seq", "gc", "pred"] and len(got) == len(rows)


def test_predict_resumed_after_a_kill_writes_the_bytes_of_an_uninterrupted_run(
    probe_run: Path, task_dir: Path, tmp_path: Path, one_thread: None
) -> None:
    import os
    import signal
    import subprocess
    import sys

    from goatdna import faults
    from goatdna.workdir import work_dir_for

    rows = read_csv(task_dir / "test.csv")[:40]
    src = tmp_path / "input.csv"
    with src.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["sequence", "id"])
        for r in rows:
            writer.writerow([r["sequence"][:150], r["id"]])
    ckpt = probe_run / "checkpoints" / "best.ckpt"
    # batch 2 x 16 groups: 32-row units, so 40 rows are two units and the kill lands between
    args = ["predict", "--checkpoint", ckpt, "--sequences", src, "--batch-size", "2"]
    whole = tmp_path / "whole.csv"
    result = invoke(*args, "--out", whole)
    assert result.exit_code == 0, (result.output, result.exception)
    assert not work_dir_for(whole).exists()

    cut = tmp_path / "cut.csv"
    env = dict(os.environ, OMP_NUM_THREADS="1", **faults.arm("predict.unit_saved", 1))
    cmd = [sys.executable, "-m", "goatdna.cli.app", *map(str, args), "--out", str(cut)]
    killed = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not cut.exists()
    assert len(list(work_dir_for(cut).glob("unit-*.npz"))) == 1

    refused = invoke(*args, "--out", cut)  # neither --resume nor --force: the work is kept
    assert refused.exit_code == 2 and "--resume" in refused.output
    resumed = invoke(*args, "--out", cut, "--resume")
    assert resumed.exit_code == 0, (resumed.output, resumed.exception)
    assert cut.read_bytes() == whole.read_bytes()
    assert not work_dir_for(cut).exists()


def test_predict_resume_with_a_changed_input_is_refused_in_one_line(
    probe_run: Path, task_dir: Path, tmp_path: Path
) -> None:
    import os
    import signal
    import subprocess
    import sys

    from goatdna import faults

    rows = read_csv(task_dir / "test.csv")[:40]
    src = tmp_path / "input.csv"
    src.write_text("sequence\n" + "".join(r["sequence"][:150] + "\n" for r in rows))
    ckpt = probe_run / "checkpoints" / "best.ckpt"
    out = tmp_path / "pred.csv"
    args = ["predict", "--checkpoint", ckpt, "--sequences", src, "--batch-size", "2", "--out", out]
    env = dict(os.environ, OMP_NUM_THREADS="1", **faults.arm("predict.unit_saved", 1))
    cmd = [sys.executable, "-m", "goatdna.cli.app", *map(str, args)]
    killed = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    src.write_text(src.read_text() + rows[0]["sequence"][:100] + "\n")  # one more row
    refused = invoke(*args, "--resume")
    assert refused.exit_code == 2
    lines = [line for line in refused.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "inputs" in lines[0], refused.output
    assert not out.exists()
