"""Every command that writes checks its --out before any work: one error line, exit 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import invoke

UNWRITABLE = Path("/sys/goatdna-test")  # read-only even for root (chmod blocks nothing for root)


def _commands(ckpt: str, shards: str, inputs: Path) -> dict[str, list[str]]:
    fasta = str(Path(shards) / "synthetic.fa")
    table = str(inputs / "table.csv")
    return {
        "probe-recall": ["probe-recall", "-c", ckpt, "-d", shards, "--trials", "2",
                         "--distances", "5", "-o", str(UNWRITABLE / "recall")],
        "export": ["export", "--checkpoint", ckpt, "--out", str(UNWRITABLE / "export")],
        "score-track": ["score-track", "--checkpoint", ckpt, "--fasta", fasta,
                        "--region", "syn1:1-500", "--out", str(UNWRITABLE / "t.bw")],
        "score-variants": ["score-variants", "--checkpoint", ckpt, "--fasta", fasta,
                           "--vcf", str(inputs / "v.vcf"), "--out", str(UNWRITABLE / "v.tsv")],
        "embed-npz": ["embed", "--checkpoint", ckpt, "--sequences", table,
                      "--out", str(UNWRITABLE / "e.npz")],
        "embed-zarr": ["embed", "--checkpoint", ckpt, "--sequences", table,
                       "--out", str(UNWRITABLE / "e.zarr")],
        "make-task": ["make-task", "--data", shards, "--out", str(UNWRITABLE / "task")],
        "finetune": ["finetune", "--checkpoint", ckpt, "--train", table,
                     "--out", str(UNWRITABLE / "ft")],
        "predict": ["predict", "--checkpoint", ckpt, "--sequences", table,
                    "--out", str(UNWRITABLE / "p.csv")],
        "evaluate": ["evaluate", "-c", ckpt, "-d", shards, "--out", str(UNWRITABLE / "ev")],
        "generate": ["generate", "-c", ckpt, "--prompt", "ACGT", "--out", str(UNWRITABLE / "g.fa")],
        "check-precision": ["check-precision", "-c", ckpt, "--fasta", fasta,
                            "--out", str(UNWRITABLE / "c.json")],
    }  # fmt: skip


@pytest.mark.parametrize(
    "command",
    ["probe-recall", "export", "score-track", "score-variants", "embed-npz", "embed-zarr",
     "make-task", "finetune", "predict", "evaluate", "generate", "check-precision"],
)  # fmt: skip
def test_unwritable_out_is_one_line_before_any_work(
    command: str, tiny_runs: dict[str, Path], synthetic_shards: Path, tmp_path: Path
) -> None:
    if not Path("/sys").is_dir():
        pytest.skip("no /sys here to stand for a read-only folder")
    (tmp_path / "table.csv").write_text("sequence,label\nACGTACGTAA,1\nCCGTACGTAA,0\n")
    (tmp_path / "v.vcf").write_text(
        "##fileformat=VCFv4.2\n##contig=<ID=syn1>\n"
        "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\nsyn1\t100\t.\tA\tC\t.\t.\t.\n"
    )
    ckpt = str(tiny_runs["goat"] / "checkpoints" / "best.ckpt")
    args = _commands(ckpt, str(synthetic_shards), tmp_path)[command]
    result = invoke(args)
    assert result.exit_code == 2, result.output
    assert "--out" in result.output and "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
