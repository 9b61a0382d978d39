"""Bad input through the CLI: one-line error, exit status 2, and nothing half-written."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
from Bio import bgzf
from helpers import invoke

GOOD = b">chr1\nACGTACGTAC\nGT\n>chr2\nTTTTGGGGCC\n"


def _run(*args: str):
    return invoke(args)


def _assert_user_error(result, *fragments: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    error = lines[-1]
    assert error.startswith("error: "), result.stderr
    assert sum(line.startswith("error:") for line in lines) == 1
    for fragment in fragments:
        assert fragment in error, error
    return error


def _assert_nothing_written(out: Path) -> None:
    if not out.exists():
        return
    names = {p.name for p in out.iterdir()}
    leftovers = names & {"manifest.json", "train.bin", "val.bin", "test.bin", ".prepare"}
    assert not leftovers, leftovers
    assert not any(name.endswith((".tmp", ".partial")) for name in names), names


def _bad(tmp_path: Path, data: bytes, name: str = "in.fa", *extra: str):
    src = tmp_path / name
    src.write_bytes(data)
    out = tmp_path / "out"
    result = _run("prepare", src, "--out", out, *extra)
    return result, out


def test_missing_file(tmp_path):
    out = tmp_path / "out"
    result = _run("prepare", tmp_path / "nope.fa", "--out", out)
    _assert_user_error(result, "nope.fa", "does not exist")
    _assert_nothing_written(out)


def test_empty_file(tmp_path):
    result, out = _bad(tmp_path, b"")
    _assert_user_error(result, "in.fa", "empty")
    _assert_nothing_written(out)


def test_text_without_header(tmp_path):
    result, out = _bad(tmp_path, b"ACGTACGT\nACGT\n")
    _assert_user_error(result, "not FASTA", "'>'")
    _assert_nothing_written(out)


def test_duplicate_contig_names(tmp_path):
    result, out = _bad(tmp_path, b">chr1\nACGT\n>chr2\nAC\n>chr1\nGG\n")
    _assert_user_error(result, "duplicate contig name 'chr1'")
    _assert_nothing_written(out)


@pytest.mark.parametrize("char", list("0179EFILPQ*-."))
def test_invalid_characters_name_contig_and_position(tmp_path, char):
    data = b">chr1\nACGTACGTAC\nGT\n>chr2\nTTTTG" + char.encode() + b"GGCC\n"
    result, out = _bad(tmp_path, data)
    _assert_user_error(result, f"invalid character {char!r}", "'chr2'", "position 6 (1-based)")
    _assert_nothing_written(out)


def test_crlf_line_endings_are_accepted(tmp_path):
    result, out = _bad(tmp_path, GOOD.replace(b"\n", b"\r\n"))
    assert result.exit_code == 0, result.output
    assert (out / "manifest.json").is_file()


def test_truncated_gzip(tmp_path):
    result, out = _bad(tmp_path, gzip.compress(GOOD * 500)[:-40], "in.fa.gz")
    _assert_user_error(result, "truncated or corrupt")
    _assert_nothing_written(out)
    assert not out.exists()  # not even the decompression cache


def test_truncated_bgzip(tmp_path):
    full = tmp_path / "full.fa.gz"
    with bgzf.BgzfWriter(str(full), "wb") as writer:
        writer.write(GOOD * 500)
    result, out = _bad(tmp_path, full.read_bytes()[:-30], "in.fa.gz")
    _assert_user_error(result, "truncated")
    _assert_nothing_written(out)


def test_output_dir_with_a_different_dataset_needs_force(tmp_path):
    first = tmp_path / "a.fa"
    first.write_bytes(GOOD)
    out = tmp_path / "out"
    assert _run("prepare", first, "--out", out).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    second = tmp_path / "b.fa"
    second.write_bytes(b">x\nGGGGGGGG\n")
    _assert_user_error(_run("prepare", second, "--out", out), "already holds a different dataset")
    # same source, other options: also a different dataset
    _assert_user_error(
        _run("prepare", first, "--out", out, "--val-fraction", "0.2"), "already holds a dataset"
    )
    _assert_user_error(_run("prepare", second, "--out", out, "--resume"), "already holds")
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    # the same dataset again is a no-op; --force overwrites
    again = _run("prepare", first, "--out", out)
    assert again.exit_code == 0 and "nothing to do" in again.stderr
    forced = _run("prepare", second, "--out", out, "--force")
    assert forced.exit_code == 0, forced.output
    assert (out / "train.bin").read_bytes() != before["train.bin"]


def test_output_dir_with_unrelated_files(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    result, _ = _bad(tmp_path, GOOD)
    _assert_user_error(result, "not empty")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def _bed(tmp_path: Path, text: str) -> Path:
    bed = tmp_path / "splits.bed"
    bed.write_text(text)
    return bed


def test_split_bed_unknown_contig(tmp_path):
    bed = _bed(tmp_path, "chr1\t0\t12\ttrain\nchr9\t0\t5\tval\n")
    result, out = _bad(tmp_path, GOOD, "in.fa", "--split-bed", str(bed))
    _assert_user_error(result, "splits.bed line 2", "'chr9'", "not in the FASTA")
    _assert_nothing_written(out)


def test_split_bed_overlap(tmp_path):
    bed = _bed(tmp_path, "chr1\t0\t8\ttrain\nchr2\t0\t10\ttest\nchr1\t6\t12\tval\n")
    result, out = _bad(tmp_path, GOOD, "in.fa", "--split-bed", str(bed))
    _assert_user_error(result, "overlap", "chr1:0-8", "chr1:6-12")
    _assert_nothing_written(out)


def test_split_bed_interval_outside_contig(tmp_path):
    bed = _bed(tmp_path, "chr1\t0\t13\ttrain\n")
    result, out = _bad(tmp_path, GOOD, "in.fa", "--split-bed", str(bed))
    _assert_user_error(result, "outside the contig")
    _assert_nothing_written(out)


def test_val_contig_that_is_not_there(tmp_path):
    result, out = _bad(tmp_path, GOOD, "in.fa", "--val-contigs", "chr20")
    _assert_user_error(result, "--val-contigs", "'chr20'", "not in the FASTA")
    _assert_nothing_written(out)


def test_contigs_option_names_must_exist(tmp_path):
    result, out = _bad(tmp_path, GOOD, "in.fa", "--contigs", "chr1,chrQ")
    _assert_user_error(result, "--contigs", "'chrQ'")
    _assert_nothing_written(out)


def test_force_and_resume_together(tmp_path):
    result, out = _bad(tmp_path, GOOD, "in.fa", "--force", "--resume")
    _assert_user_error(result, "--force and --resume")


def test_info_on_missing_dataset(tmp_path):
    _assert_user_error(_run("info", tmp_path / "nowhere"), "does not exist")
    _assert_user_error(_run("info", tmp_path), "no manifest.json")


def test_invalid_character_found_by_a_parallel_worker(tmp_path):
    contigs = b"".join(b">c%d\n" % i + b"ACGT" * 30 + b"\n" for i in range(6))
    data = contigs + b">bad\nACGTACGT\nACGTAJGT\n"
    result, out = _bad(tmp_path, data, "in.fa", "--workers", "2")
    _assert_user_error(result, "invalid character 'J'", "'bad'", "position 14 (1-based)")
    _assert_nothing_written(out)
    assert not out.exists()


def test_read_only_fasta_directory_gets_its_index_in_the_cache(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "ref.fa").write_bytes(GOOD)
    real_access = os.access

    def access(path, mode, *args, **kwargs):  # root may write anywhere: pretend it may not
        if Path(path) == ro and mode & os.W_OK:
            return False
        return real_access(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)
    out = tmp_path / "out"
    result = _run("prepare", ro / "ref.fa", "--out", out)
    assert result.exit_code == 0, result.output
    assert (out / "cache" / "ref.fa.fai").is_file()
    assert not (ro / "ref.fa.fai").exists()


def test_force_with_bad_options_keeps_the_old_dataset(tmp_path):
    src = tmp_path / "a.fa"
    src.write_bytes(GOOD)
    out = tmp_path / "out"
    assert _run("prepare", src, "--out", out).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    result = _run("prepare", src, "--out", out, "--force", "--val-contigs", "chrX")
    _assert_user_error(result, "'chrX'")
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--synthetic", "--force", "--resume"], "--force and --resume exclude each other"),
        (["FASTA", "--synthetic"], "give either a FASTA file or --synthetic, not both"),
        (["--synthetic", "--source-names", "a"], "--source-names needs FASTA files"),
        ([], "missing FASTA argument: pass a FASTA file, or --synthetic"),
    ],
)
def test_prepare_refuses_a_contradiction_before_anything_is_written(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    """`prepare_dataset`'s refusals: one line naming the flags, and no --out made."""
    from helpers import assert_one_error_line

    fasta = tmp_path / "g.fa"
    fasta.write_bytes(GOOD)
    out = tmp_path / "out"
    args = [str(fasta) if arg == "FASTA" else arg for arg in args]
    assert_one_error_line(invoke(["prepare", "--out", out, *args]), needle)
    assert not out.exists()
