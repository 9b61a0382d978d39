"""`goatdna score-variants`: malformed or plain-gzip VCFs, its own VCF scored again, a full disk
and a signal mid-run (both resumable), contigs the FASTA lacks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from helpers import assert_ok, assert_one_error_line, invoke, tiny_config

from goatdna.checkpoint import save_checkpoint
from goatdna.configfile import to_dict
from goatdna.model import DNADecoder

pytestmark = pytest.mark.usefixtures("one_thread")


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
    rows = [
        f"chr1\t{p}\tv{p}\t{seq[p - 1]}\t{'A' if seq[p - 1] != 'A' else 'C'}\t.\t.\t."
        for p in range(20, 180, 10)
    ]
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
    assert_ok(_score(vcf_inputs, undeclared, tmp_path / "u.tsv"))
    assert "[W::" not in capfd.readouterr().err


def test_scoring_a_goatdna_vcf_again_replaces_its_llr_field(vcf_inputs, tmp_path: Path) -> None:
    import pysam

    first = tmp_path / "goat.vcf.gz"
    assert_ok(_score(vcf_inputs, vcf_inputs["vcf"], first))
    again = tmp_path / "rope.vcf.gz"
    res = _score(vcf_inputs, first, again)  # used to die after scoring: "Header already exists"
    assert_ok(res)
    assert "already has INFO/GOATDNA_LLR" in res.stderr, res.stderr
    assert not list(tmp_path.glob(".rope.vcf.gz*"))  # no work folder left behind
    with pysam.VariantFile(str(first)) as a, pysam.VariantFile(str(again)) as b:
        assert list(b.header.info).count("GOATDNA_LLR") == 1
        for ra, rb in zip(a, b, strict=True):
            assert ra.info["GOATDNA_LLR"] == rb.info["GOATDNA_LLR"]  # the same model: same values


def test_score_variants_disk_full_at_the_output_says_resume(
    vcf_inputs, tmp_path: Path, monkeypatch
) -> None:
    import errno

    import pandas as pd

    whole, cut = tmp_path / "whole.tsv", tmp_path / "cut.tsv"
    assert_ok(_score(vcf_inputs, vcf_inputs["vcf"], whole))
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
    assert_ok(_score(vcf_inputs, vcf_inputs["vcf"], cut, "--resume"))
    assert cut.read_bytes() == whole.read_bytes()


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM"])
def test_score_variants_stopped_by_a_signal_says_resume(
    vcf_inputs, tmp_path: Path, monkeypatch, how: str
) -> None:
    import signal

    import goatdna.inference.variant_run as variant_run

    whole, cut = tmp_path / "whole.tsv", tmp_path / "cut.tsv"
    assert_ok(_score(vcf_inputs, vcf_inputs["vcf"], whole, "--chunk-size", "4"))
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
    assert_ok(_score(vcf_inputs, vcf_inputs["vcf"], cut, "--chunk-size", "4", "--resume"))
    assert cut.read_bytes() == whole.read_bytes()


def test_a_vcf_whose_contigs_are_all_missing_warns(vcf_inputs, tmp_path: Path) -> None:
    renamed = tmp_path / "chr.vcf"
    renamed.write_text(vcf_inputs["vcf"].read_text().replace("chr1", "scaffold_9"))
    res = _score(vcf_inputs, renamed, tmp_path / "s.tsv")
    assert_ok(res)  # the table is written (every allele has its status), but the user is told
    assert "warning: no allele was scored: most are missing_contig" in res.stderr, res.stderr
    res = _score(vcf_inputs, vcf_inputs["vcf"], tmp_path / "t.tsv")
    assert "warning" not in res.stderr


def test_score_variants_flags_fill_the_request_from_the_library_tables(
    vcf_inputs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flags of `SCORE_VARIANTS_FLAGS` / `CALIBRATION_FLAGS` (declared next to the requests,
    issue 42.3) reach `ScoreVariantsRequest` and its `CalibrationRequest`; without --calibrate
    or --null there is no calibration, whatever --null-size says."""
    import goatdna.inference.variant_run as variant_run
    from goatdna.inference.calibration import CalibrationRequest
    from goatdna.inference.variant_run import ScoreVariantsRequest
    from goatdna.runtime import Runtime

    seen: list[ScoreVariantsRequest] = []
    monkeypatch.setattr(Runtime, "fabric", lambda self: None)
    monkeypatch.setattr(variant_run, "score_variants", lambda request, fabric: seen.append(request))
    inputs = [vcf_inputs[name] for name in ("checkpoint", "fasta", "vcf")]
    common = ["score-variants", "-c", inputs[0], "-f", inputs[1], "--variants", inputs[2]]
    out = tmp_path / "o.tsv"
    flags = ["--window", "32", "--strands", "forward", "--length-unfair", "--chunk-size", "5"]
    flags += ["--calibrate", "--null-size", "7", "--seed", "3"]
    assert_ok(invoke([*common, "-o", out, *flags]))
    request = seen[-1]
    assert (request.window, request.strands, request.length_fair) == (32, "forward", False)
    assert (request.batch_size, request.chunk_size) == (64, 5)
    assert request.calibration == CalibrationRequest(None, 3, 7)
    assert_ok(invoke([*common, "-o", out, "--null-size", "1"]))
    assert seen[-1] == ScoreVariantsRequest(*inputs, out)  # the defaults, no calibration
