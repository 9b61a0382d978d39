"""`goatdna finetune`: occupied and locked --out folders, non-finite rates, and tables that
used to train nonsense silently (a regression table with one bad label, BED names taken as
classes, 1 and 1.0 as two classes, overflowing targets, too few rows, validation rows that
are training rows)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import assert_ok, assert_one_error_line, invoke, random_sequences

from goatdna.locking import folder_lock

pytestmark = pytest.mark.usefixtures("one_thread")
GOOD = "ACGTACGTAA"


# ------------------------------------------------------------------------------ finetune
def _table(path: Path, rows: list[tuple[str, str]], header: str = "sequence,label") -> Path:
    path.write_text(header + "\n" + "".join(f"{s},{y}\n" for s, y in rows))
    return path


def _finetune(backbone: Path, train: Path, out: Path, *extra: str):
    return invoke(["finetune", "--checkpoint", str(backbone), "--train", str(train),
                               "--out", str(out), "--no-progress", "--epochs", "1",
                               "--accelerator", "cpu", *extra])  # fmt: skip


TWO_CLASSES = [(s, str(i % 2)) for i, s in enumerate(random_sequences(8))]


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


# ------------------------------------------------------------------------------ fine-tuning nonsense
def _regression_rows(n: int) -> list[tuple[str, str]]:
    return [(s, f"{0.37 * i + 0.1:.3f}") for i, s in enumerate(random_sequences(n))]


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
    res = _finetune(
        backbone, bed, tmp_path / "run", "--fasta", str(fasta), "--bed-label-column", "5"
    )
    assert_ok(res)


def test_auto_picks_regression_for_whole_numbers_that_are_nearly_all_distinct(
    backbone: Path, tmp_path: Path
) -> None:
    import json

    rows = [(s, str(10 * i)) for i, s in enumerate(random_sequences(40))]  # a count, not 40 classes
    train = _table(tmp_path / "train.csv", rows)
    res = _finetune(backbone, train, tmp_path / "run")
    assert_ok(res)
    assert json.loads(res.stdout.splitlines()[0])["task"] == "regression"


def test_one_and_one_point_zero_are_one_class(backbone: Path, tmp_path: Path) -> None:
    import yaml

    seqs = random_sequences(12)
    rows = [(s, ("1", "1.0", "0", "0.0")[i % 4]) for i, s in enumerate(seqs)]
    train = _table(tmp_path / "train.csv", rows)
    assert_ok(_finetune(backbone, train, tmp_path / "run"))
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
    seqs = random_sequences(20)
    train = _table(tmp_path / "train.csv", [(s, str(i % 2)) for i, s in enumerate(seqs)])
    res = _finetune(backbone, train, tmp_path / "a", "--val", str(train))
    assert_ok(res)
    assert "warning: --val is the same data as --train" in res.stderr, res.stderr
    doubled = _table(tmp_path / "doubled.csv", [(s, str(i % 2)) for i, s in enumerate(seqs + seqs)])
    res = _finetune(backbone, doubled, tmp_path / "b")
    assert_ok(res)
    assert "of 4 val rows have a sequence that is also a training row" in res.stderr, res.stderr
    res = _finetune(backbone, train, tmp_path / "c")  # no duplicates: no warning
    assert_ok(res)
    assert "warning" not in res.stderr, res.stderr
