"""score-variants with tables (issue 27): calibration as for a VCF, output columns a table may not
carry, positions that must be integers on the contig, rough edges of reading a table, and the
checks that must come before any scoring (not after it)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import assert_one_error_line, invoke, tiny_config

from goatdna.checkpoint import save_checkpoint
from goatdna.configfile import to_dict
from goatdna.errors import GoatDNAError
from goatdna.inference import variant_run
from goatdna.inference.calibration import CALIBRATION_COLUMNS
from goatdna.inference.variant_io import SCORE_COLUMNS, read_allele_table
from goatdna.model import DNADecoder

pytestmark = pytest.mark.usefixtures("one_thread")

_rng = np.random.default_rng(11)
CONTIG = "".join(_rng.choice(list("ACGT"), 240))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("variant_tables")
    fasta = root / "ref.fa"
    fasta.write_text(f">chr1\n{CONTIG}\n")
    torch.manual_seed(3)
    config = tiny_config(train_length=16)
    checkpoint = save_checkpoint(root / "m.ckpt", DNADecoder(config), {"model": to_dict(config)})
    rows = [(p + 1, CONTIG[p], "ACGT".replace(CONTIG[p], "")[p % 3]) for p in range(4, 230, 9)]
    header = ["##fileformat=VCFv4.2", "##contig=<ID=chr1>",
              "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]  # fmt: skip
    vcf = root / "calls.vcf"
    vcf.write_text(
        "\n".join(header + [f"chr1\t{p}\t.\t{r}\t{a}\t.\t.\t." for p, r, a in rows]) + "\n"
    )
    table = root / "calls.tsv"
    pd.DataFrame(
        {"chrom": "chr1", "pos": [p for p, _, _ in rows], "ref": [r for _, r, _ in rows],
         "alt": [a for _, _, a in rows], "note": "x"}
    ).to_csv(table, sep="\t", index=False)  # fmt: skip
    return {"fasta": fasta, "checkpoint": checkpoint, "vcf": vcf, "table": table}


def _score(inputs: dict[str, Path], variants: Path, out: Path, *extra: str):
    return invoke(["score-variants", "-c", str(inputs["checkpoint"]), "--fasta",
                               str(inputs["fasta"]), "--variants", str(variants), "-o", str(out),
                               "--window", "8", "--null-size", "3", *extra])  # fmt: skip


def test_a_table_is_calibrated_exactly_as_its_vcf(inputs, tmp_path) -> None:
    """Before: --calibrate with a table was ignored (exit 0, no columns, no null made)."""
    null = tmp_path / "null.npz"
    from_vcf, from_table = tmp_path / "vcf.tsv", tmp_path / "table.tsv"
    res = _score(inputs, inputs["vcf"], from_vcf, "--null", str(null), "--seed", "4")
    assert res.exit_code == 0, res.output + repr(res.exception)
    res = _score(inputs, inputs["table"], from_table, "--null", str(null), "--seed", "4")
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert "reusing the null" in res.stdout  # the same null serves both
    vcf, table = pd.read_csv(from_vcf, sep="\t"), pd.read_csv(from_table, sep="\t")
    assert list(table.columns[-3:]) == list(CALIBRATION_COLUMNS)
    assert table.note.eq("x").all() and table.context.notna().sum() > 10
    pd.testing.assert_frame_equal(table[list(CALIBRATION_COLUMNS)], vcf[list(CALIBRATION_COLUMNS)])
    fresh = tmp_path / "fresh.npz"  # a table alone makes the null too
    res = _score(inputs, inputs["table"], tmp_path / "t2.tsv", "--null", str(fresh), "--seed", "4")
    assert res.exit_code == 0 and fresh.is_file(), res.output


@pytest.mark.parametrize("column", [*SCORE_COLUMNS, *CALIBRATION_COLUMNS])
def test_a_carried_column_named_like_an_output_column_is_refused(inputs, tmp_path, column) -> None:
    """Before: a table's own context/llr_z stood where the calibration columns belong."""
    source = pd.read_csv(inputs["table"], sep="\t").assign(**{column: 1.5})
    table = tmp_path / "mine.tsv"
    source.to_csv(table, sep="\t", index=False)
    out = tmp_path / "out.tsv"
    assert_one_error_line(
        _score(inputs, table, out, "--calibrate"), f"column {column!r} is one score-variants"
    )
    assert not out.exists()


def _table(path: Path, pos: list[object], extra: str = "") -> Path:
    lines = ["chrom\tpos\tref\talt"] + [f"chr1\t{p}\t{CONTIG[0]}\tA{extra}" for p in pos]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    "bad, shown",
    [("inf", "inf"), ("1e20", "1e+20"), ("99999999999999999999", "99999999999999999999"), ("0", "0"),
     ("2.5", "2.5"), ("", "the empty cell"), ("-3", "-3")],
)  # fmt: skip
def test_positions_must_be_whole_numbers_on_a_contig(tmp_path, bad, shown) -> None:
    """Before: inf/1e20/past int64 became -9223372036854775808; an empty cell said np.float64(nan)."""
    with pytest.raises(GoatDNAError) as err:
        read_allele_table(_table(tmp_path / "p.tsv", [1, bad]))
    message = str(err.value)
    assert "row 2, column pos" in message and shown in message and "np." not in message, message


def test_a_boolean_pos_column_is_refused_and_past_the_end_is_its_own_status(
    inputs, tmp_path
) -> None:
    frame = pd.DataFrame({"chrom": ["chr1"] * 2, "pos": [True, False], "ref": ["A"] * 2,
                          "alt": ["C"] * 2})  # fmt: skip
    frame.to_parquet(tmp_path / "b.parquet", index=False)
    with pytest.raises(GoatDNAError, match="row 1, column pos: True is not a position"):
        read_allele_table(tmp_path / "b.parquet")
    past = tmp_path / "past.tsv"
    past.write_text(
        f"chrom\tpos\tref\talt\nchr1\t{len(CONTIG) + 5}\tA\tC\nchr1\t{len(CONTIG)}\t{CONTIG[-1]}\t{'C' if CONTIG[-1] != 'C' else 'G'}\n"
        f"chr1\t{len(CONTIG)}\t{CONTIG[-1]}A\t{CONTIG[-1]}\n"
        f"chr1\t233\t{CONTIG[232:238]}\t{CONTIG[232]}\n"  # a deletion ending 2 bases before the end
    )
    out = tmp_path / "past_out.tsv"
    res = _score(inputs, past, out)
    assert res.exit_code == 0, res.output + repr(res.exception)
    scored = pd.read_csv(out, sep="\t")
    assert scored.status.tolist() == ["outside_contig", "ok", "outside_contig", "ok"]
    # the forward strand cannot be made length-fair there: the reverse strand alone, said so
    assert scored.scored_strands.tolist()[1::2] == ["both", "reverse"]
    last = scored.iloc[3]
    assert np.isnan(last.llr_fwd) and last.llr == pytest.approx(last.llr_rev, abs=1e-6)


def test_table_cells_are_read_as_written(tmp_path) -> None:
    """REF 'NA' is text (not missing), padded cells are stripped, other columns keep NA."""
    path = tmp_path / "t.tsv"
    path.write_text("chrom\t pos \tref\talt\tscore\n chr1 \t 5 \tNA\t A \tNA\nchr1\t7\tC\tG\t0.5\n")
    table = read_allele_table(path)
    first = table.alleles[0]
    assert (first.chrom, first.pos, first.ref, first.alt) == ("chr1", 5, "NA", "A")
    assert np.isnan(table.carried.score[0]) and table.carried.score[1] == 0.5


def test_a_misnamed_table_says_what_it_is(tmp_path) -> None:
    commas = tmp_path / "c.tsv"
    commas.write_text("chrom,pos,ref,alt\nchr1,5,A,C\n")
    with pytest.raises(GoatDNAError, match="separator looks wrong.*rename it to .csv"):
        read_allele_table(commas)
    zipped = tmp_path / "z.tsv"
    zipped.write_bytes(gzip.compress(b"chrom\tpos\tref\talt\nchr1\t5\tA\tC\n"))
    with pytest.raises(GoatDNAError, match="gzip-compressed.*rename it z.tsv.gz"):
        read_allele_table(zipped)


def test_resume_with_another_option_names_it(inputs, tmp_path, monkeypatch) -> None:
    out = tmp_path / "r.tsv"

    def stop(*_args, **_kwargs):
        raise GoatDNAError("stopped after scoring (test)")

    monkeypatch.setattr(variant_run, "_load_chunks", stop)  # the chunks stay in the work folder
    assert_one_error_line(_score(inputs, inputs["table"], out), "stopped after scoring")
    monkeypatch.undo()
    assert_one_error_line(_score(inputs, inputs["table"], out, "--resume", "--strands", "forward"),
              "--strands differ")  # fmt: skip
    assert_one_error_line(
        _score(inputs, inputs["table"], out, "--resume", "--window", "10"), "--window differ"
    )
    assert _score(inputs, inputs["table"], out, "--resume").exit_code == 0


def test_what_is_written_after_scoring_is_checked_before_it(inputs, tmp_path, monkeypatch) -> None:
    """Before: a numpy traceback, an OSError or a bare 'Aborted.' after every allele was scored."""

    def no_scoring(*_args, **_kwargs):
        raise AssertionError("refused too late: scoring started")

    monkeypatch.setattr(variant_run, "_score_chunks", no_scoring)
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    out = tmp_path / "o.tsv"
    for extra, needle in (
        (("--calibrate", "--seed", "-1"), "--seed -1: must be >= 0"),
        (("--null", str(blocker / "null.npz")), "--null"),
        (("--null", str(empty)), "not a goatdna null file"),
        (("--cache-dir", str(blocker / "cache")), "--cache-dir"),
    ):
        assert_one_error_line(_score(inputs, inputs["table"], out, *extra), needle)
        assert not out.exists() and not list(tmp_path.glob(".o.tsv*"))
