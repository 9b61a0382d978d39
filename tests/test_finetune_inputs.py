"""Bad fine-tuning and prediction input: one `error:` line, exit status 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import assert_one_error_line, invoke, tiny_config

from goatdna.checkpoint import save_checkpoint
from goatdna.configfile import to_dict
from goatdna.model import DNADecoder

GOOD = "ACGTACGTAA"


@pytest.fixture(scope="module")
def backbone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = tiny_config(train_length=64)
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("backbone") / "lm.ckpt"
    return save_checkpoint(path, DNADecoder(config), {"model": to_dict(config)})


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def run_finetune(backbone: Path, train: Path, out: Path, *extra: str):
    return invoke(["finetune", "--checkpoint", str(backbone), "--train", str(train),
                               "--out", str(out), "--no-progress", *extra])  # fmt: skip


TWO_CLASSES = "".join(f"{GOOD},{i % 2}\n" for i in range(6))


@pytest.mark.parametrize(
    ("text", "extra", "needles"),
    [
        ("seq,label\n" + TWO_CLASSES, [], ["no column 'sequence'", "--sequence-column"]),
        ("sequence,y\n" + TWO_CLASSES, [], ["no column 'label'", "--label-column"]),
        ("sequence,label\n" + "".join(f"{GOOD},1\n" for _ in range(5)), [], ["single class"]),
        ("sequence,label\n" + TWO_CLASSES + f"{GOOD},NaN\n", [], ["row 7 (line 8)", "missing"]),
        ("sequence,label\n" + TWO_CLASSES + f"{GOOD},\n", [], ["row 7", "missing"]),
        ("sequence,label\n" + TWO_CLASSES + ",1\n", [], ["row 7 (line 8)", "empty sequence"]),
        (
            "sequence,label\nACGTXACGT,0\n" + TWO_CLASSES,
            [],
            ["row 1 (line 2)", "'X'", "position 5"],
        ),
        (
            "sequence,label\n" + TWO_CLASSES + f"{GOOD},abc\n",
            ["--task", "regression"],
            ["row 7", "not a finite number"],
        ),
        ("sequence,label\n" + TWO_CLASSES + f"{GOOD},1,extra\n", [], ["row 7", "3 fields"]),
    ],
)
def test_bad_tables_fail_cleanly(
    backbone: Path, tmp_path: Path, text: str, extra: list[str], needles: list[str]
) -> None:
    train = write(tmp_path / "train.csv", text)
    out = tmp_path / "run"
    assert_one_error_line(run_finetune(backbone, train, out, *extra), str(train), *needles)
    assert not out.exists()


def test_a_classifier_is_not_a_backbone_and_a_backbone_is_not_a_classifier(
    backbone: Path, tmp_path: Path
) -> None:
    train = write(tmp_path / "train.csv", "sequence,label\n" + TWO_CLASSES * 4)
    first = tmp_path / "first"
    result = run_finetune(backbone, train, first, "--epochs", "1", "--batch-size", "8",
                          "--mode", "probe")  # fmt: skip
    assert result.exit_code == 0, (result.output, result.exception)
    classifier = first / "checkpoints" / "best.ckpt"
    again = tmp_path / "again"
    assert_one_error_line(run_finetune(classifier, train, again), "fine-tuned classifier")
    assert not again.exists()
    # predict refuses a plain language model, and bad sequences, writing nothing
    out = tmp_path / "pred.csv"
    seqs = write(tmp_path / "seqs.csv", f"sequence\n{GOOD}\nAC-GT\n")
    result = invoke(["predict", "--checkpoint", str(backbone), "--sequences",
                                 str(seqs), "--out", str(out)])  # fmt: skip
    assert_one_error_line(result, "not a fine-tuned classifier")
    result = invoke(["predict", "--checkpoint", str(classifier), "--sequences",
                                 str(seqs), "--out", str(out)])  # fmt: skip
    assert_one_error_line(result, "row 2 (line 3)", "'-'")
    assert not out.exists() and not list(tmp_path.glob(".pred.csv*"))
    # an occupied run directory is not reused silently
    assert_one_error_line(run_finetune(backbone, train, first), "holds a run", "--force")


def test_bed_intervals_over_a_fasta_train_and_predict(
    backbone: Path, synthetic_shards: Path, tmp_path: Path
) -> None:
    """`--fasta REF` with BED files: the label comes from a BED column, '-' rows are reverse
    complemented, and predict carries the BED columns through."""
    from goatdna.io.tables import read_table
    from goatdna.io.tokens import reverse_complement_text

    fasta = synthetic_shards / "synthetic.fa"
    lines = [f"syn1\t{1000 + 100 * i}\t{1080 + 100 * i}\tr{i}\t{i % 2}\t{'+-'[i % 2]}"
             for i in range(24)]  # fmt: skip
    bed = write(tmp_path / "train.bed", "\n".join(lines) + "\n")
    table = read_table(bed, fasta)
    assert list(table.columns) == ["chrom", "start", "end", "name", "score", "strand", "sequence"]
    plus, minus = read_table(write(tmp_path / "pm.bed", "syn1\t5\t25\ta\t0\t+\nsyn1\t5\t25\ta\t0\t-\n"), fasta).columns["sequence"]  # fmt: skip
    assert minus == reverse_complement_text(plus) and len(plus) == 20

    out = tmp_path / "run"
    result = invoke(["finetune", "--checkpoint", str(backbone), "--fasta", str(fasta),
                                 "--train", str(bed), "--bed-label-column", "5", "--mode", "probe",
                                 "--epochs", "1", "--batch-size", "8", "--out", str(out),
                                 "--no-progress"])  # fmt: skip
    assert result.exit_code == 0, (result.output, result.exception)
    pred = tmp_path / "pred.tsv"
    result = invoke(["predict", "--checkpoint", str(out / "checkpoints" / "best.ckpt"),
                                 "--sequences", str(bed), "--fasta", str(fasta), "--out", str(pred)])  # fmt: skip
    assert result.exit_code == 0, (result.output, result.exception)
    got = [line.split("\t") for line in pred.read_text().splitlines()]
    assert got[0] == ["chrom", "start", "end", "name", "score", "strand", "sequence", "prob_0",
                      "prob_1", "pred"]  # fmt: skip
    assert [r[:6] for r in got[1:]] == [line.split("\t") for line in lines]
