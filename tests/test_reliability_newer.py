"""Reliability of the newer commands (issue 20): each case an audit found, reproduced, then fixed.

Occupied and locked outputs of ``export``, ``finetune`` and ``probe-recall``; ``export --force``
keeping a user's files; fine-tuning tables that used to train nonsense silently; ``predict``
cutting long sequences without a word; tracebacks that are now one ``error:`` line.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from helpers import assert_one_error_line, invoke, tiny_config

from goatdna.checkpoint import save_checkpoint
from goatdna.configfile import to_dict
from goatdna.locking import folder_lock
from goatdna.model import DNADecoder, ModelConfig

pytestmark = pytest.mark.usefixtures("one_thread")
GOOD = "ACGTACGTAA"


@pytest.fixture(scope="module")
def backbone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = tiny_config(train_length=64)
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("backbone") / "lm.ckpt"
    return save_checkpoint(path, DNADecoder(config), {"model": to_dict(config)})


def _seqs(n: int, seed: int = 0) -> list[str]:
    import random

    rng = random.Random(seed)
    return ["".join(rng.choice("ACGT") for _ in range(12)) for _ in range(n)]


def _ok(res) -> None:
    assert res.exit_code == 0, res.output + repr(res.exception)


# ------------------------------------------------------------------------------ export
def test_export_force_keeps_the_files_goatdna_did_not_write(backbone: Path, tmp_path: Path) -> None:
    out = tmp_path / "hf"
    _ok(invoke(["export", "-c", str(backbone), "--out", str(out)]))
    (out / "NOTES.md").write_text("my notes\n")
    (out / "eval").mkdir()
    (out / "eval" / "res.csv").write_text("metric,value\n")
    res = invoke(["export", "-c", str(backbone), "--out", str(out), "--force"])
    _ok(res)
    assert (out / "NOTES.md").read_text() == "my notes\n"  # --force used to delete both
    assert (out / "eval" / "res.csv").read_text() == "metric,value\n"
    assert "kept 2 file(s)" in res.stderr and "NOTES.md" in res.stderr, res.stderr
    assert (out / "model.safetensors").is_file() and (out / "config.json").is_file()


def test_export_refuses_its_input_and_a_second_run(backbone: Path, tmp_path: Path) -> None:
    out = tmp_path / "hf"
    _ok(invoke(["export", "-c", str(backbone), "--out", str(out)]))
    before = (out / "model.safetensors").stat().st_mtime_ns
    assert_one_error_line(
        invoke(["export", "-c", str(out), "--out", str(out), "--force"]),
        "also an input",
    )
    assert (out / "model.safetensors").stat().st_mtime_ns == before
    other = tmp_path / "hf2"
    with folder_lock(other, "--out"):  # this process plays the first run
        assert_one_error_line(
            invoke(["export", "-c", str(backbone), "--out", str(other)]),
            f"pid {os.getpid()}",
        )
    assert not other.exists()


def test_export_disk_full_is_one_line_and_leaves_nothing(
    backbone: Path, tmp_path: Path, monkeypatch
) -> None:
    import safetensors.torch
    from safetensors import SafetensorError

    def full(*_args, **_kwargs):  # what safetensors raises when the disk fills up
        raise SafetensorError(
            'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No '
            'space left on device" })'
        )

    monkeypatch.setattr(safetensors.torch, "save_file", full)
    out = tmp_path / "hf"
    assert_one_error_line(
        invoke(["export", "-c", str(backbone), "--out", str(out)]),
        "disk full while writing",
    )
    assert not out.exists() and list(tmp_path.iterdir()) == []  # no temporary folder left


# ------------------------------------------------------------------------------ finetune
def _table(path: Path, rows: list[tuple[str, str]], header: str = "sequence,label") -> Path:
    path.write_text(header + "\n" + "".join(f"{s},{y}\n" for s, y in rows))
    return path


def _finetune(backbone: Path, train: Path, out: Path, *extra: str):
    return invoke(["finetune", "--checkpoint", str(backbone), "--train", str(train),
                               "--out", str(out), "--no-progress", "--epochs", "1",
                               "--accelerator", "cpu", *extra])  # fmt: skip


TWO_CLASSES = [(s, str(i % 2)) for i, s in enumerate(_seqs(8))]


def test_finetune_refuses_a_folder_of_user_files_and_an_input_inside_out(
    backbone: Path, tmp_path: Path
) -> None:
    train = _table(tmp_path / "train.csv", TWO_CLASSES)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("\\section{}\n")
    assert_one_error_line(_finetune(backbone, train, mine), "not a goatdna run", "thesis.tex")
    assert sorted(p.name for p in mine.iterdir()) == ["thesis.tex"]
    # a run whose --out holds its own backbone: --force would clear the backbone
    run = tmp_path / "run"
    run.mkdir()
    inside = run / "lm.ckpt"
    inside.write_bytes(backbone.read_bytes())
    assert_one_error_line(_finetune(inside, train, run, "--force"), "lies inside --out")
    assert inside.read_bytes() == backbone.read_bytes()


def test_finetune_refuses_a_second_run_on_one_out(backbone: Path, tmp_path: Path) -> None:
    train = _table(tmp_path / "train.csv", TWO_CLASSES)
    out = tmp_path / "run"
    with folder_lock(out, "--out"):
        assert_one_error_line(_finetune(backbone, train, out), f"pid {os.getpid()}")
    assert not (out / "config.yaml").exists()


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--lr", "nan"], "--lr"),
        (["--lr", "inf"], "--lr"),
        (["--backbone-lr", "inf"], "--backbone-lr"),
        (["--seed", "-1"], "--seed"),
    ],
)
def test_finetune_refuses_non_finite_rates_and_a_negative_seed(
    backbone: Path, tmp_path: Path, flags: list[str], needle: str
) -> None:
    train = _table(tmp_path / "train.csv", TWO_CLASSES)
    assert_one_error_line(_finetune(backbone, train, tmp_path / "run", *flags), needle)
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------ probe-recall, make-task
def test_probe_recall_keeps_earlier_csvs_without_force_and_refuses_a_negative_seed(
    tiny_runs: dict[str, Path], synthetic_shards: Path, tmp_path: Path
) -> None:
    ckpt = str(tiny_runs["goat"] / "checkpoints" / "best.ckpt")
    out = tmp_path / "r"
    base = ["probe-recall", "-c", ckpt, "-d", str(synthetic_shards), "--segment", "10",
            "--trials", "2", "--distances", "5", "-o", str(out)]  # fmt: skip
    out.mkdir()
    (out / "recall_summary.csv").write_text("a user's earlier result\n")
    assert_one_error_line(invoke(base), "recall_summary.csv exists; pass --force")
    assert (out / "recall_summary.csv").read_text() == "a user's earlier result\n"
    with folder_lock(out, "--out"):
        assert_one_error_line(invoke([*base, "--force"]), f"pid {os.getpid()}")
    assert_one_error_line(invoke([*base, "--force", "--seed", "-1"]), "--seed")
    _ok(invoke([*base, "--force"]))
    assert (out / "recall_summary.csv").read_text().startswith("distance")


def test_make_task_negative_seed_is_one_line(synthetic_shards: Path, tmp_path: Path) -> None:
    res = invoke(
        ["make-task", "--data", str(synthetic_shards), "--out", str(tmp_path / "t"),
              "--seed", "-1"],
    )  # fmt: skip
    assert_one_error_line(res, "--seed")
    assert not (tmp_path / "t").exists()


def test_make_task_replaces_only_a_task_folder_under_its_lock(
    synthetic_shards: Path, tmp_path: Path
) -> None:
    out = tmp_path / "t"
    args = ["make-task", "--data", str(synthetic_shards), "--out", str(out), "--label", "gc",
            "--window", "48", "--max-train", "20", "--max-eval", "10"]  # fmt: skip
    with folder_lock(out, "--out"):  # this process plays a first run still writing --out
        assert_one_error_line(invoke(args), f"pid {os.getpid()}")
    assert not out.exists()
    _ok(invoke(args))
    assert_one_error_line(invoke(args), "exists; pass --force")
    (out / "notes.txt").write_text("mine")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert_one_error_line(invoke([*args, "--force"]), "does not write (notes.txt)")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    (out / "notes.txt").unlink()
    _ok(invoke([*args, "--force", "--seed", "3"]))
    assert sorted(p.name for p in out.iterdir()) == [
        "task.json",
        "test.csv",
        "train.csv",
        "val.csv",
    ]
    assert '"seed": 3' in (out / "task.json").read_text()
    # the prepared data itself, or a folder holding it, is never the task's --out
    for where in (synthetic_shards, synthetic_shards.parent):
        res = invoke([*args[:4], str(where), *args[5:], "--force"])
        assert_one_error_line(res, "an input of this run")
    assert (synthetic_shards / "manifest.json").is_file()


# ------------------------------------------------------------------------------ multi-device workers
def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs Linux /proc")
def test_multi_device_ranks_die_with_their_launcher(tmp_path: Path) -> None:
    """kill -9 of ``score-variants --devices 2``'s launcher: rank 1 used to go on scoring into
    the work folder for half a minute (a --resume then shared it with an orphan)."""
    import random
    import signal
    import subprocess
    import sys
    import time

    rng = random.Random(0)
    seq = "".join(rng.choice("ACGT") for _ in range(20_000))
    (tmp_path / "ref.fa").write_text(">chr1\n" + seq + "\n")
    rows = [f"chr1\t{p}\t.\t{seq[p - 1]}\t{'A' if seq[p - 1] != 'A' else 'C'}\t.\t.\t."
            for p in range(300, 19_700, 5)]  # fmt: skip
    header = "##fileformat=VCFv4.2\n##contig=<ID=chr1,length=20000>\n"
    header += "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
    (tmp_path / "v.vcf").write_text(header + "\n".join(rows) + "\n")
    config = ModelConfig(n_layers=2, d_model=64, n_heads=2, mlp_hidden=128, train_length=256,
                         goat_modes=2)  # fmt: skip
    ckpt = save_checkpoint(tmp_path / "m.ckpt", DNADecoder(config), {"model": to_dict(config)})
    out = tmp_path / "s.tsv"
    cmd = [sys.executable, "-m", "goatdna.cli.app", "score-variants", "-c", str(ckpt),
           "--fasta", str(tmp_path / "ref.fa"), "--vcf", str(tmp_path / "v.vcf"),
           "--out", str(out), "--window", "256", "--chunk-size", "64",
           "--accelerator", "cpu", "--devices", "2"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    launcher = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    work = tmp_path / ".s.tsv.goatdna-work"
    try:
        deadline = time.monotonic() + 120
        while not list(work.glob("chunk-*")) and launcher.poll() is None:
            assert time.monotonic() < deadline, "score-variants never started scoring"
            time.sleep(0.1)
        ranks = _children(launcher.pid)
        assert launcher.poll() is None and ranks, launcher.stderr.read().decode()[-2000:]
        launcher.kill()  # kill -9: no handler runs in the launcher
        launcher.wait()
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in ranks) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(pid) for pid in ranks), "rank 1 outlived its launcher"
    finally:
        for pid in _children(launcher.pid) if launcher.poll() is None else []:
            os.kill(pid, signal.SIGKILL)
        if launcher.poll() is None:
            launcher.kill()
        launcher.wait()


def test_the_launcher_forwards_sigint_and_sigterm_to_its_ranks() -> None:
    import signal
    import subprocess

    from goatdna.runtime import forward_stop_signals

    received: list[int] = []
    rank = subprocess.Popen(["sleep", "60"])
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        signal.signal(signal.SIGTERM, lambda signum, _frame: received.append(signum))
        forward_stop_signals([rank])
        os.kill(os.getpid(), signal.SIGTERM)  # a `kill PID` of the launcher only
        assert rank.wait(timeout=10) == -signal.SIGTERM
        assert received == [signal.SIGTERM]  # then handled here as before
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
        if rank.poll() is None:
            rank.kill()


# ------------------------------------------------------------------------------ fine-tuning nonsense
def _regression_rows(n: int) -> list[tuple[str, str]]:
    return [(s, f"{0.37 * i + 0.1:.3f}") for i, s in enumerate(_seqs(n))]


@pytest.mark.parametrize(
    ("bad", "needles"),
    [
        ("inf", ["row 40 (line 41)", "'inf'", "not a finite number"]),
        ("-Infinity", ["row 40", "not a finite number"]),
        ("high", ["row 40 (line 41)", "'high'", "is not a number", "39 of 40"]),
    ],
)
def test_a_regression_table_with_one_bad_label_is_an_error_not_a_40_class_classifier(
    backbone: Path, tmp_path: Path, bad: str, needles: list[str]
) -> None:
    rows = _regression_rows(40)
    rows[-1] = (rows[-1][0], bad)
    train = _table(tmp_path / "train.csv", rows)
    assert_one_error_line(_finetune(backbone, train, tmp_path / "run"), str(train), *needles)
    assert not (tmp_path / "run").exists()


def test_bed_names_in_column_4_are_not_classes(backbone: Path, tmp_path: Path) -> None:
    import random

    rng = random.Random(1)
    contig = "".join(rng.choice("ACGT") for _ in range(2_000))
    fasta = tmp_path / "ref.fa"
    fasta.write_text(">chr1\n" + contig + "\n")
    lines = [f"chr1\t{40 * i}\t{40 * i + 30}\tpeak_{i}\t{i % 7}\t+" for i in range(40)]
    bed = tmp_path / "peaks.bed"
    bed.write_text("\n".join(lines) + "\n")
    res = _finetune(backbone, bed, tmp_path / "run", "--fasta", str(fasta))
    assert_one_error_line(res, "40 distinct labels over 40 rows", "--bed-label-column")
    # the label is in column 5: that trains (7 classes)
    res = _finetune(backbone, bed, tmp_path / "run", "--fasta", str(fasta),
                    "--bed-label-column", "5")  # fmt: skip
    _ok(res)


def test_auto_picks_regression_for_whole_numbers_that_are_nearly_all_distinct(
    backbone: Path, tmp_path: Path
) -> None:
    import json

    rows = [(s, str(10 * i)) for i, s in enumerate(_seqs(40))]  # a count, not 40 classes
    train = _table(tmp_path / "train.csv", rows)
    res = _finetune(backbone, train, tmp_path / "run")
    _ok(res)
    assert json.loads(res.stdout.splitlines()[0])["task"] == "regression"


def test_one_and_one_point_zero_are_one_class(backbone: Path, tmp_path: Path) -> None:
    import yaml

    seqs = _seqs(12)
    rows = [(s, ("1", "1.0", "0", "0.0")[i % 4]) for i, s in enumerate(seqs)]
    train = _table(tmp_path / "train.csv", rows)
    _ok(_finetune(backbone, train, tmp_path / "run"))
    head = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["head"]
    assert head["task"] == "classification" and head["classes"] == ["0", "1"]


def test_a_target_that_overflows_is_named_not_blamed_on_the_learning_rate(
    backbone: Path, tmp_path: Path
) -> None:
    rows = _regression_rows(20)
    rows[3] = (rows[3][0], "1e308")
    train = _table(tmp_path / "train.csv", rows)
    line = assert_one_error_line(_finetune(backbone, train, tmp_path / "run", "--task", "regression"),
                     "too large to standardise", "1e+308")  # fmt: skip
    assert "--lr" not in line


def test_a_two_row_table_is_too_few_rows(backbone: Path, tmp_path: Path) -> None:
    train = _table(tmp_path / "train.csv", [(GOOD, "0"), ("CCGTACGTAA", "1")])
    line = assert_one_error_line(
        _finetune(backbone, train, tmp_path / "run"), "too few rows", "2 row(s)"
    )
    assert "--lr" not in line
    val = _table(tmp_path / "val.csv", [(GOOD, "0"), ("CCGTACGTAA", "1")])
    assert_one_error_line(
        _finetune(backbone, train, tmp_path / "run2", "--val", str(val)), "too few rows"
    )


def test_validation_rows_that_are_training_rows_are_warned_about(
    backbone: Path, tmp_path: Path
) -> None:
    seqs = _seqs(20)
    train = _table(tmp_path / "train.csv", [(s, str(i % 2)) for i, s in enumerate(seqs)])
    res = _finetune(backbone, train, tmp_path / "a", "--val", str(train))
    _ok(res)
    assert "warning: --val is the same data as --train" in res.stderr, res.stderr
    doubled = _table(tmp_path / "doubled.csv",
                     [(s, str(i % 2)) for i, s in enumerate(seqs + seqs)])  # fmt: skip
    res = _finetune(backbone, doubled, tmp_path / "b")
    _ok(res)
    assert "of 4 val rows have a sequence that is also a training row" in res.stderr, res.stderr
    res = _finetune(backbone, train, tmp_path / "c")  # no duplicates: no warning
    _ok(res)
    assert "warning" not in res.stderr, res.stderr


# ------------------------------------------------------------------------------ predict
def test_predict_says_how_many_sequences_it_cut_to_the_models_max_length(
    backbone: Path, tmp_path: Path
) -> None:
    train = _table(tmp_path / "train.csv", [(s, str(i % 2)) for i, s in enumerate(_seqs(12))])
    run = tmp_path / "run"
    _ok(_finetune(backbone, train, run, "--max-length", "8", "--mode", "probe"))
    table = _table(tmp_path / "x.csv", [("ACGTACGT", "a"), ("ACGTACGTACGT", "b"), ("ACG", "c")],
                   header="sequence,name")  # fmt: skip
    out = tmp_path / "p.csv"
    res = invoke(["predict", "-c", str(run / "checkpoints" / "best.ckpt"),
                              "--sequences", str(table), "--out", str(out), "--no-progress",
                              "--accelerator", "cpu"])  # fmt: skip
    _ok(res)
    assert "warning: 1 of 3 sequences" in res.stderr and "first 8 bases" in res.stderr, res.stderr
    assert len(out.read_text().splitlines()) == 4


# ------------------------------------------------------------------------------ score-variants input
@pytest.fixture(scope="module")
def vcf_inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import random

    folder = tmp_path_factory.mktemp("vcf_inputs")
    config = tiny_config()
    torch.manual_seed(3)
    ckpt = save_checkpoint(folder / "m.ckpt", DNADecoder(config), {"model": to_dict(config)})
    rng = random.Random(0)
    seq = "".join(rng.choice("ACGT") for _ in range(200))
    (folder / "ref.fa").write_text(f">chr1\n{seq}\n")
    rows = [f"chr1\t{p}\tv{p}\t{seq[p - 1]}\t{'A' if seq[p - 1] != 'A' else 'C'}\t.\t.\t."
            for p in range(20, 180, 10)]  # fmt: skip
    header = "##fileformat=VCFv4.2\n##contig=<ID=chr1,length=200>\n"
    header += "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
    (folder / "v.vcf").write_text(header + "\n".join(rows) + "\n")
    return {"checkpoint": ckpt, "fasta": folder / "ref.fa", "vcf": folder / "v.vcf"}


def _score(inputs: dict[str, Path], vcf: Path, out: Path, *extra: str):
    return invoke(["score-variants", "-c", str(inputs["checkpoint"]), "--fasta",
                               str(inputs["fasta"]), "--vcf", str(vcf), "--out", str(out),
                               "--window", "12", *extra])  # fmt: skip


def test_a_plain_gzip_vcf_is_one_line_saying_bgzip(vcf_inputs, tmp_path: Path) -> None:
    import gzip

    plain = tmp_path / "v.vcf.gz"
    plain.write_bytes(gzip.compress(vcf_inputs["vcf"].read_bytes()))
    assert_one_error_line(_score(vcf_inputs, plain, tmp_path / "s.tsv"), "plain gzip", "bgzip it")
    assert not (tmp_path / "s.tsv").exists() and not list(tmp_path.glob(".s.tsv*"))


def test_a_malformed_pos_is_named_and_htslib_says_nothing(
    vcf_inputs, tmp_path: Path, capfd
) -> None:
    text = vcf_inputs["vcf"].read_text().replace("\t30\t", "\t3x0\t")
    bad = tmp_path / "bad.vcf"
    bad.write_text(text)
    line = assert_one_error_line(
        _score(vcf_inputs, bad, tmp_path / "s.tsv"), "record 2", "POS '3x0'"
    )
    assert "truncated file" not in line
    captured = capfd.readouterr()  # htslib writes to the file descriptor, not to sys.stderr
    assert "[E::" not in captured.err and "[W::" not in captured.err, captured.err
    # an undeclared contig: htslib's [W::vcf_parse] warning is silenced too
    undeclared = tmp_path / "undeclared.vcf"
    undeclared.write_text(
        vcf_inputs["vcf"].read_text().replace("##contig=<ID=chr1,length=200>\n", "")
    )
    _ok(_score(vcf_inputs, undeclared, tmp_path / "u.tsv"))
    assert "[W::" not in capfd.readouterr().err


def test_scoring_a_goatdna_vcf_again_replaces_its_llr_field(vcf_inputs, tmp_path: Path) -> None:
    import pysam

    first = tmp_path / "goat.vcf.gz"
    _ok(_score(vcf_inputs, vcf_inputs["vcf"], first))
    again = tmp_path / "rope.vcf.gz"
    res = _score(vcf_inputs, first, again)  # used to die after scoring: "Header already exists"
    _ok(res)
    assert "already has INFO/GOATDNA_LLR" in res.stderr, res.stderr
    assert not list(tmp_path.glob(".rope.vcf.gz*"))  # no work folder left behind
    with pysam.VariantFile(str(first)) as a, pysam.VariantFile(str(again)) as b:
        assert list(b.header.info).count("GOATDNA_LLR") == 1
        for ra, rb in zip(a, b, strict=True):
            assert ra.info["GOATDNA_LLR"] == rb.info["GOATDNA_LLR"]  # the same model: same values


# ------------------------------------------------------------------------------ disk full
def test_embed_zarr_disk_full_leaves_no_temporary_and_resume_is_identical(
    backbone: Path, tmp_path: Path, monkeypatch
) -> None:
    import errno

    import numpy as np

    pytest.importorskip("zarr")
    import zarr

    import goatdna.inference.embed_io as embed_io

    fasta = tmp_path / "s.fa"
    fasta.write_text("".join(f">r{i}\n{s}\n" for i, s in enumerate(_seqs(30))))
    args = ["embed", "-c", str(backbone), "--sequences", str(fasta), "--accelerator", "cpu"]
    whole, cut = tmp_path / "whole.zarr", tmp_path / "cut.zarr"
    _ok(invoke([*args, "--out", str(whole)]))
    write = embed_io._write_zarr

    def fills_the_disk(path: Path, arrays) -> None:
        write(path, arrays)  # the store is half on disk when the disk fills up
        raise OSError(errno.ENOSPC, "No space left on device", str(path / "embeddings"))

    monkeypatch.setattr(embed_io, "_write_zarr", fills_the_disk)
    line = assert_one_error_line(invoke([*args, "--out", str(cut)]), "disk full while writing")
    assert "--resume" in line  # "rerun the command" would be refused: the work folder is kept
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".cut.zarr.goatdna-work", "s.fa", "whole.zarr"
    ]  # fmt: skip
    monkeypatch.setattr(embed_io, "_write_zarr", write)
    _ok(invoke([*args, "--out", str(cut), "--resume"]))
    a, b = zarr.open_group(str(whole), mode="r"), zarr.open_group(str(cut), mode="r")
    assert sorted(a.array_keys()) == sorted(b.array_keys())
    for key in a.array_keys():
        assert np.array_equal(a[key][:], b[key][:])


def test_score_variants_disk_full_at_the_output_says_resume(
    vcf_inputs, tmp_path: Path, monkeypatch
) -> None:
    import errno

    import pandas as pd

    whole, cut = tmp_path / "whole.tsv", tmp_path / "cut.tsv"
    _ok(_score(vcf_inputs, vcf_inputs["vcf"], whole))
    to_csv = pd.DataFrame.to_csv

    def full(self, path, *args, **kwargs):
        Path(path).write_text("chrom\tpos\n")  # part of the table, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(pd.DataFrame, "to_csv", full)
    line = assert_one_error_line(
        _score(vcf_inputs, vcf_inputs["vcf"], cut), "disk full while writing"
    )
    assert "--resume" in line
    assert not cut.exists() and not list(tmp_path.glob(".cut.tsv.*.tmp"))
    monkeypatch.setattr(pd.DataFrame, "to_csv", to_csv)
    _ok(_score(vcf_inputs, vcf_inputs["vcf"], cut, "--resume"))
    assert cut.read_bytes() == whole.read_bytes()


# ------------------------------------------------------------------------------ MEH cases
def test_a_garbage_checkpoint_message_gives_no_unsafe_advice(tmp_path: Path) -> None:
    bad = tmp_path / "x.ckpt"
    bad.write_text("not a checkpoint at all " * 20)
    line = assert_one_error_line(invoke(["generate", "-c", str(bad), "--prompt", "ACGT"]),
                     "not a readable goatdna checkpoint")  # fmt: skip
    assert "weights_only" not in line and "arbitrary code" not in line


def test_a_sequence_longer_than_the_csv_field_limit_is_read(tmp_path: Path) -> None:
    from goatdna.io.tables import encode_sequences, read_table

    long = "ACGT" * 50_000  # 200,000 bases: past the csv module's default 131,072
    table = read_table(_table(tmp_path / "t.csv", [(long, "1"), (GOOD, "0")]))
    assert [t.size for t in encode_sequences(table, "sequence", "--sequence-column")] == [
        200_000, 10,
    ]  # fmt: skip


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM"])
def test_score_variants_stopped_by_a_signal_says_resume(
    vcf_inputs, tmp_path: Path, monkeypatch, how: str
) -> None:
    import signal

    import goatdna.inference.variant_run as variant_run

    whole, cut = tmp_path / "whole.tsv", tmp_path / "cut.tsv"
    _ok(_score(vcf_inputs, vcf_inputs["vcf"], whole, "--chunk-size", "4"))
    save = variant_run._save_chunk
    saved: list[int] = []

    def stopped_after_two(work, chunk, scores, windows):
        if len(saved) == 2:
            if how == "SIGINT":
                raise KeyboardInterrupt  # what Python makes of Ctrl-C
            os.kill(os.getpid(), signal.SIGTERM)
        save(work, chunk, scores, windows)
        saved.append(chunk)

    monkeypatch.setattr(variant_run, "_save_chunk", stopped_after_two)
    before = signal.getsignal(signal.SIGTERM)
    res = _score(vcf_inputs, vcf_inputs["vcf"], cut, "--chunk-size", "4")
    assert res.exit_code == 128 + getattr(signal, how), res.output + repr(res.exception)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"interrupted: {how}: score-variants"), lines
    assert "--resume" in lines[0]
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is put back
    monkeypatch.setattr(variant_run, "_save_chunk", save)
    _ok(_score(vcf_inputs, vcf_inputs["vcf"], cut, "--chunk-size", "4", "--resume"))
    assert cut.read_bytes() == whole.read_bytes()


def test_a_vcf_whose_contigs_are_all_missing_warns(vcf_inputs, tmp_path: Path) -> None:
    renamed = tmp_path / "chr.vcf"
    renamed.write_text(vcf_inputs["vcf"].read_text().replace("chr1", "scaffold_9"))
    res = _score(vcf_inputs, renamed, tmp_path / "s.tsv")
    _ok(res)  # the table is written (every allele has its status), but the user is told
    assert "warning: no allele was scored: most are missing_contig" in res.stderr, res.stderr
    res = _score(vcf_inputs, vcf_inputs["vcf"], tmp_path / "t.tsv")
    assert "warning" not in res.stderr


def test_a_rejected_fasta_leaves_no_fresh_index(backbone: Path, tmp_path: Path) -> None:
    fasta = tmp_path / "dup.fa"
    fasta.write_text(">a\nACGTACGTAC\n>a\nACGTACGTAC\n")  # a name twice: pyfaidx refuses it
    bed = tmp_path / "r.bed"
    bed.write_text("a\t0\t8\n")
    res = invoke(["embed", "-c", str(backbone), "--fasta", str(fasta), "--bed",
                              str(bed), "--out", str(tmp_path / "e.npz")])  # fmt: skip
    line = assert_one_error_line(res, "duplicate contig name 'a'")  # the shared reader's check
    assert "bgzip" not in line  # the file is not compressed: no gzip advice
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dup.fa", "r.bed"]
