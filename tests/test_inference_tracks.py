"""`score-track`: the window rule, strand averaging, exact values against a float64 brute force,
bigWig and bedGraph output, the CLI on real chr20, and bad input."""

from __future__ import annotations

import contextlib
import gzip
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyBigWig
import pytest
import torch
from helpers import assert_one_error_line, invoke
from hypothesis import given, settings
from hypothesis import strategies as st

from goatdna.checkpoint import save_checkpoint
from goatdna.configfile import to_dict
from goatdna.errors import GoatDNAError
from goatdna.inference.reference import Reference
from goatdna.inference.tracks import (
    TrackOptions,
    TrackRequest,
    block_count,
    block_first_base,
    check_context,
    combine_strands,
    max_context,
    read_bed,
    resolve_regions,
    window_count,
    window_of,
    write_tracks,
)
from goatdna.io.regions import Region, parse_region
from goatdna.model import DNADecoder, ModelConfig
from goatdna.runtime import rank_block

REPO = Path(__file__).resolve().parents[1]
COMPLEMENT = {"A": "T", "C": "G", "G": "C", "T": "A", "N": "N"}
INDEX = {"A": 0, "C": 1, "G": 2, "T": 3, "N": 4}
TRAIN_LENGTH = 16

pytestmark = pytest.mark.usefixtures("one_thread")


def _tiny_model(positional: str = "goat", seed: int = 0) -> DNADecoder:
    """A random 2-layer decoder with large weights, so every base of context changes the output."""
    torch.manual_seed(seed)
    config = ModelConfig(
        positional=positional,
        n_layers=2,
        d_model=32,
        n_heads=2,
        mlp_hidden=64,
        goat_modes=2,
        train_length=TRAIN_LENGTH,
        attention="sdpa",
    )
    model = DNADecoder(config)
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 0.3)
    return model.eval()


@pytest.fixture(scope="module")
def model() -> DNADecoder:
    return _tiny_model()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory, model: DNADecoder) -> Path:
    path = tmp_path_factory.mktemp("track_ckpt") / "tiny.ckpt"
    return save_checkpoint(path, model, {"model": to_dict(model.config)})


def _random_sequence(n: int, seed: int, n_run: tuple[int, int] | None = None) -> str:
    rng = np.random.default_rng(seed)
    seq = list(rng.choice(list("ACGTacgt"), size=n))
    if n_run is not None:
        seq[n_run[0] : n_run[1]] = "N" * (n_run[1] - n_run[0])
    return "".join(seq)


@pytest.fixture(scope="module")
def fasta(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Two contigs, soft-masked bases and an N run, written with 60-column lines."""
    contigs = {"chrA": _random_sequence(700, 1, n_run=(300, 310)), "chrB": _random_sequence(90, 2)}
    path = tmp_path_factory.mktemp("track_fasta") / "ref.fa"
    with open(path, "w") as handle:
        for name, seq in contigs.items():
            handle.write(f">{name}\n")
            handle.writelines(seq[i : i + 60] + "\n" for i in range(0, len(seq), 60))
    return path, contigs


# ---------------------------------------------------------------------------------------------
# brute force: one float64 forward per base, with the context the definition gives it


def _strand_brute_force(model64: DNADecoder, seq: str, C: int, S: int) -> dict[str, np.ndarray]:
    """Value of each base of ``seq`` from a window starting at k*S with k from the rule; NaN at
    offset 0 and at N bases."""
    n = len(seq)
    ids = [INDEX[b] for b in seq.upper()]
    logp = np.full(n, np.nan)
    entropy = np.full(n, np.nan)
    for i in range(1, n):
        k = 0 if i < C else (i - C) // S + 1
        start = k * S
        assert start + C >= i + 1 and i - start >= 1  # the base lies inside its window
        if ids[i] == 4:
            continue
        context = torch.tensor([ids[start:i]], dtype=torch.long)
        with torch.no_grad():
            logits = model64(context, 0)[0, -1].double()  # next-base logits
        logp[i] = float(torch.log_softmax(logits, -1)[ids[i]])
        acgt = torch.softmax(logits[:4], -1)
        entropy[i] = float(-(acgt * acgt.log()).sum())
    return {"logp": logp, "entropy": entropy}


def _brute_force(
    model: DNADecoder, seq: str, C: int, S: int, strands: str
) -> dict[str, np.ndarray]:
    model64 = _tiny_model_copy_double(model)
    forward = _strand_brute_force(model64, seq, C, S)
    if strands == "forward":
        return forward
    rc = "".join(COMPLEMENT[b] for b in reversed(seq.upper()))
    reverse = {k: v[::-1] for k, v in _strand_brute_force(model64, rc, C, S).items()}
    out = {}
    for key in forward:
        f, r = forward[key], reverse[key]
        out[key] = np.where(np.isnan(f), r, np.where(np.isnan(r), f, (f + r) / 2))
    return out


def _tiny_model_copy_double(model: DNADecoder) -> DNADecoder:
    copy = DNADecoder(model.config)
    copy.load_state_dict(model.state_dict())
    return copy.double().eval()


def _read_bigwig(path: Path, contig: str, start: int, end: int) -> np.ndarray:
    with pyBigWig.open(str(path)) as bw:
        return np.array(bw.values(contig, start, end), dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# the window rule


def test_window_rule_at_the_boundaries() -> None:
    C, S = 16, 8
    assert [window_of(i, C, S) for i in (0, 1, 15)] == [0, 0, 0]
    assert [window_of(i, C, S) for i in (16, 23)] == [1, 1]
    assert [window_of(i, C, S) for i in (24, 31, 32)] == [2, 2, 3]
    assert window_count(16, C, S) == 1 and window_count(17, C, S) == 2
    assert window_count(24, C, S) == 2 and window_count(25, C, S) == 3


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 64), st.data())
def test_every_base_past_window_zero_sees_c_minus_s_to_c_minus_1_bases(C: int, data) -> None:
    S = data.draw(st.integers(1, C - 1))
    i = data.draw(st.integers(C, 50 * C))
    k = window_of(i, C, S)
    context = i - k * S  # bases before i inside window k
    assert C - S <= context <= C - 1
    assert window_of(i - 1, C, S) in (k - 1, k)  # windows are consecutive along the region


def test_combine_strands_averages_and_takes_the_other_strand_at_the_ends() -> None:
    forward = np.array([np.nan, 1.0, 2.0, np.nan], dtype=np.float32)
    reverse = np.array([3.0, 5.0, np.nan, np.nan], dtype=np.float32)
    got = combine_strands(forward, reverse)
    assert got[0] == 3.0 and got[1] == 3.0 and got[2] == 2.0 and np.isnan(got[3])


# ---------------------------------------------------------------------------------------------
# exact values


@pytest.mark.parametrize(
    ("C", "S", "strands", "block_bases"),
    [(16, 8, "both", 1 << 16), (16, 5, "both", 24), (7, 6, "forward", 10), (16, 15, "both", 7)],
)
def test_bigwig_equals_the_brute_force_windowed_log_probs(
    tmp_path: Path, model: DNADecoder, fasta, C: int, S: int, strands: str, block_bases: int
) -> None:
    """Small blocks force many stream blocks whose reverse windows straddle block edges."""
    path, contigs = fasta
    regions = [Region("chrA", 280, 360), Region("chrB", 0, 50)]
    options = TrackOptions(
        C, S, ("logp", "entropy"), strands, batch_size=3, block_bases=block_bases
    )
    with Reference(path) as reference:
        result = write_tracks(model, reference, regions, TrackRequest(tmp_path / "t.bw", options))
    assert set(result.paths) == {"logp", "entropy"}
    assert result.paths["logp"].name == "t.logp.bw"
    for region in regions:
        seq = contigs[region.contig][region.start : region.end]
        expected = _brute_force(model, seq, C, S, strands)
        for what in ("logp", "entropy"):
            got = _read_bigwig(result.paths[what], region.contig, region.start, region.end)
            assert np.array_equal(np.isnan(got), np.isnan(expected[what])), what
            np.testing.assert_allclose(got, expected[what], atol=2e-5, rtol=0, equal_nan=True)
    # N bases (chrA 300..309) and, forward only, the first base have no value
    got = _read_bigwig(result.paths["logp"], "chrA", 280, 360)
    assert np.isnan(got[20:30]).all() and not np.isnan(got[30:]).any()
    assert np.isnan(got[0]) == (strands == "forward")


def test_end_bases_take_the_other_strands_value(tmp_path: Path, model: DNADecoder, fasta) -> None:
    """Both strands: the first base gets exactly its reverse value, the last its forward value."""
    path, contigs = fasta
    C, S = 8, 4
    seq = contigs["chrB"][10:50].upper()
    model64 = _tiny_model_copy_double(model)
    forward = _strand_brute_force(model64, seq, C, S)["logp"]
    rc = "".join(COMPLEMENT[b] for b in reversed(seq))
    reverse = _strand_brute_force(model64, rc, C, S)["logp"][::-1]
    with Reference(path) as reference:
        result = write_tracks(
            model,
            reference,
            [Region("chrB", 10, 50)],
            TrackRequest(tmp_path / "e.bw", TrackOptions(C, S)),
        )
    got = _read_bigwig(result.paths["logp"], "chrB", 10, 50)
    assert got[0] == pytest.approx(reverse[0], abs=2e-5)
    assert got[-1] == pytest.approx(forward[-1], abs=2e-5)
    assert got[5] == pytest.approx((forward[5] + reverse[5]) / 2, abs=2e-5)


def test_region_shorter_than_the_context(tmp_path: Path, model: DNADecoder, fasta) -> None:
    path, contigs = fasta
    with Reference(path) as reference:
        result = write_tracks(
            model,
            reference,
            [Region("chrB", 3, 8)],
            TrackRequest(tmp_path / "s.bw", TrackOptions(16, 8)),
        )
    expected = _brute_force(model, contigs["chrB"][3:8], 16, 8, "both")["logp"]
    got = _read_bigwig(result.paths["logp"], "chrB", 3, 8)
    np.testing.assert_allclose(got, expected, atol=2e-5)


def test_a_context_far_beyond_the_region_is_clipped_and_a_window_beyond_memory_refused(
    tmp_path: Path, model: DNADecoder, fasta
) -> None:
    """--context 10^8 on a 90-base region scores one 90-base window (it used to pad to C and
    ask for ~50 GB); a window the model's memory bound cannot hold is one error before work."""
    path, contigs = fasta
    region = Region("chrB", 0, 90)
    with Reference(path) as reference:
        far = TrackRequest(tmp_path / "huge.bw", TrackOptions(10**8, 5 * 10**7))
        near = TrackRequest(tmp_path / "fits.bw", TrackOptions(90, 45))
        huge = write_tracks(model, reference, [region], far)
        fits = write_tracks(model, reference, [region], near)
    assert huge.paths["logp"].read_bytes() == fits.paths["logp"].read_bytes()
    expected = _brute_force(model, contigs["chrB"][:90], 90, 45, "both")["logp"]
    got = _read_bigwig(huge.paths["logp"], "chrB", 0, 90)
    np.testing.assert_allclose(got, expected, atol=2e-5)
    bound = max_context(model.config)
    long_region = [Region("chrX", 0, 2 * bound)]
    with pytest.raises(GoatDNAError, match=f"--context {bound + 1}: above this model's bound"):
        check_context(TrackOptions(bound + 1, 100), long_region, model.config)
    check_context(TrackOptions(bound, 100), long_region, model.config)  # at the bound: fine
    check_context(TrackOptions(10 * bound, 100), [Region("chrX", 0, 600)], model.config)


# ---------------------------------------------------------------------------------------------
# the CLI


def test_cli_writes_bedgraph_equal_to_bigwig(tmp_path: Path, checkpoint: Path, fasta) -> None:
    path, _ = fasta
    common = ["score-track", "-c", str(checkpoint), "--fasta", str(path)]
    common += ["--region", "chrA:101-260", "--region", "chrB:1-90", "--stride", "6"]
    bw = invoke([*common, "--out", str(tmp_path / "t.bw")])
    assert bw.exit_code == 0, bw.output
    bg = invoke([*common, "--out", str(tmp_path / "t.bedGraph")])
    assert bg.exit_code == 0, bg.output
    lines = (tmp_path / "t.bedGraph").read_text().splitlines()
    assert lines[0].startswith("track type=bedGraph")
    rows = [line.split("\t") for line in lines[1:]]
    assert [r[0] for r in rows[:2]] == ["chrA", "chrA"] and rows[-1][0] == "chrB"
    assert len(rows) == 160 + 90
    with pyBigWig.open(str(tmp_path / "t.bw")) as handle:
        assert handle.chroms() == {"chrA": 700, "chrB": 90}
        for contig, start, end, value in rows:
            assert int(end) == int(start) + 1
            got = handle.values(contig, int(start), int(end))[0]
            assert float(value) == pytest.approx(got, rel=1e-6)
    assert not list(tmp_path.glob(".*tmp*"))
    flat = invoke([*common, "--out", str(tmp_path / "z.bw"), "--zoom-levels", "0"])
    assert flat.exit_code == 0, flat.output
    with (
        pyBigWig.open(str(tmp_path / "z.bw")) as zoomless,
        pyBigWig.open(str(tmp_path / "t.bw")) as bw,
    ):
        assert zoomless.values("chrA", 100, 260) == bw.values("chrA", 100, 260)
        assert zoomless.stats("chrA", 100, 260, exact=True) == bw.stats(
            "chrA", 100, 260, exact=True
        )


def test_cli_default_context_is_the_training_length(tmp_path: Path, checkpoint: Path, fasta):
    path, contigs = fasta
    out = tmp_path / "d.bw"
    result = invoke(
        ["score-track", "-c", str(checkpoint), "-f", str(path), "-r", "chrA:1-100", "-o", str(out)],
    )
    assert result.exit_code == 0, result.output
    model = _tiny_model()
    expected = _brute_force(model, contigs["chrA"][:100], TRAIN_LENGTH, TRAIN_LENGTH // 2, "both")
    np.testing.assert_allclose(_read_bigwig(out, "chrA", 0, 100), expected["logp"], atol=2e-5)


def test_cli_bed_regions(tmp_path: Path, checkpoint: Path, fasta) -> None:
    path, _ = fasta
    bed = tmp_path / "r.bed"
    bed.write_text("track name=x\n# comment\nchrB\t10\t40\tname\nchrA\t0\t30\n")
    out = tmp_path / "b.bedGraph"
    result = invoke(
        ["score-track", "-c", str(checkpoint), "-f", str(path), "--bed", str(bed), "-o", str(out)],
    )
    assert result.exit_code == 0, result.output
    rows = [line.split("\t") for line in out.read_text().splitlines()[1:]]
    assert len(rows) == 30 + 30
    assert rows[0][:2] == ["chrA", "0"] and rows[-1][:3] == ["chrB", "39", "40"]  # FASTA order


@pytest.mark.shared_data
def test_cli_on_real_chr20(tmp_path: Path, chr20_sample: Path, checkpoint: Path) -> None:
    """A bgzip-free real reference: the plain-gzip chr20 piece, as the user has it."""
    out = tmp_path / "chr20.bw"
    region = "chr20:1000001-2000000:200001-203000"  # the contig name holds a colon
    result = invoke(
        [
            "score-track", "-c", str(checkpoint), "-f", str(chr20_sample), "-r", region,
            "-o", str(out), "--what", "logp", "--what", "entropy",
        ],
        env={"GOATDNA_CACHE": str(tmp_path / "cache")},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    with gzip.open(chr20_sample, "rt") as handle:
        handle.readline()
        seq = "".join(line.strip() for line in handle)[200000:203000]
    logp = _read_bigwig(tmp_path / "chr20.logp.bw", "chr20:1000001-2000000", 200000, 203000)
    entropy = _read_bigwig(tmp_path / "chr20.entropy.bw", "chr20:1000001-2000000", 200000, 203000)
    assert not np.isnan(logp).any() and not np.isnan(entropy).any()
    assert (logp < 0).all() and ((entropy > 0) & (entropy <= math.log(4) + 1e-6)).all()
    expected = _brute_force(_tiny_model(), seq[:150], TRAIN_LENGTH, 8, "forward")["logp"]
    forward_only = tmp_path / "f.bw"
    region_150 = "chr20:1000001-2000000:200001-200150"
    again = invoke(
        ["score-track", "-c", str(checkpoint), "-f", str(chr20_sample), "-r", region_150,
         "-o", str(forward_only), "--strands", "forward"],
        env={"GOATDNA_CACHE": str(tmp_path / "cache")},
    )  # fmt: skip
    assert again.exit_code == 0, again.output
    got = _read_bigwig(forward_only, "chr20:1000001-2000000", 200000, 200150)
    np.testing.assert_allclose(got, expected, atol=2e-5, equal_nan=True)


# ---------------------------------------------------------------------------------------------
# bad input


def test_parse_region_and_bed_errors(tmp_path: Path) -> None:
    assert parse_region("20:1,000,001-1,000,100") == Region("20", 1_000_000, 1_000_100)
    assert parse_region("a:b:5-9") == Region("a:b", 4, 9)
    for bad in ("20", "20:5", "20:0-10", "20:10-5", ":1-5", "20:x-9"):
        with pytest.raises(GoatDNAError, match="--region"):
            parse_region(bad)
    bed = tmp_path / "bad.bed"
    bed.write_text("chrA\t0\t10\nchrA\tten\t20\n")
    with pytest.raises(GoatDNAError, match=r"line 2: start and end must be integers"):
        read_bed(bed)
    bed.write_text("chrA\t0\n")
    with pytest.raises(GoatDNAError, match="line 1: expected contig, start, end"):
        read_bed(bed)
    bed.write_text("chrA\t10\t10\n")
    with pytest.raises(GoatDNAError, match="0 <= start < end"):
        read_bed(bed)


def test_resolve_regions_errors(fasta) -> None:
    path, _ = fasta
    with Reference(path) as reference:
        with pytest.raises(GoatDNAError, match="ends beyond contig 'chrB' \\(90 bases"):
            resolve_regions([Region("chrB", 0, 91)], reference)
        with pytest.raises(GoatDNAError, match="the FASTA names it 'chrA'"):
            resolve_regions([Region("A", 0, 10)], reference)
        with pytest.raises(GoatDNAError, match="overlap"):
            resolve_regions([Region("chrA", 0, 10), Region("chrA", 9, 20)], reference)
        with pytest.raises(GoatDNAError, match="at least 2"):
            resolve_regions([Region("chrA", 5, 6)], reference)


def _cli_error(args: list[str]) -> str:
    return assert_one_error_line(invoke(["score-track", *args]))


def test_cli_bad_inputs_one_line_exit_2_no_output(tmp_path: Path, checkpoint: Path, fasta) -> None:
    path, _ = fasta
    out = tmp_path / "x.bw"
    base = ["-c", str(checkpoint), "-f", str(path), "-o", str(out)]
    assert "ends beyond contig" in _cli_error([*base, "-r", "chrB:1-91"])
    assert "'chrA'" in _cli_error([*base, "-r", "A:1-50"])
    assert "--context 1" in _cli_error([*base, "-r", "chrA:1-50", "--context", "1"])
    assert "--stride 16" in _cli_error([*base, "-r", "chrA:1-50", "--stride", "16"])
    bed = tmp_path / "bad.bed"
    bed.write_text("chrA 5 1\n")
    assert "line 1" in _cli_error([*base, "--bed", str(bed)])
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"not a checkpoint")
    assert "junk.ckpt" in _cli_error(
        ["-c", str(junk), "-f", str(path), "-o", str(out), "-r", "chrA:1-50"]
    )
    assert "unknown extension" in _cli_error(
        [*base[:-1], str(tmp_path / "x.txt"), "-r", "chrA:1-50"]
    )
    assert "--what" in _cli_error([*base, "-r", "chrA:1-50", "--what", "gc"])
    assert "--zoom-levels 11" in _cli_error([*base, "-r", "chrA:1-50", "--zoom-levels", "11"])
    assert "not both" in _cli_error([*base, "-r", "chrA:1-50", "--bed", str(bed)])
    assert not out.exists() and not list(tmp_path.glob(".x.bw*"))


def test_cli_regions_neither_or_both_each_say_what_happened(
    tmp_path: Path, checkpoint: Path, fasta
) -> None:
    """No regions at all is not "both": each case has its own line (the neither case once said
    "..., not both")."""
    path, _ = fasta
    out = tmp_path / "x.bw"
    bed = tmp_path / "r.bed"
    bed.write_text("chrA\t0\t50\n")
    base = ["-c", str(checkpoint), "-f", str(path), "-o", str(out)]
    neither = _cli_error(base)
    assert "--region" in neither and "--bed" in neither and "both" not in neither, neither
    both = _cli_error([*base, "-r", "chrA:1-50", "--bed", str(bed)])
    assert "not both" in both, both
    assert not out.exists() and not list(tmp_path.glob(".x.bw*"))


@pytest.mark.shared_data
def test_cli_contig_naming_mismatch_on_real_b37_names(
    tmp_path: Path, checkpoint: Path, chr20_sample: Path
) -> None:
    """Real b37 naming: contig '20' asked for as 'chr20' names the FASTA's spelling."""
    b37 = tmp_path / "b37.fa"
    with gzip.open(chr20_sample, "rt") as handle:
        handle.readline()
        b37.write_text(">20\n" + "".join(handle.readline() for _ in range(20)))
    out = tmp_path / "x.bw"
    args = ["-c", str(checkpoint), "-f", str(b37), "-o", str(out), "-r", "chr20:1-100"]
    message = _cli_error(args)
    assert "contig 'chr20' is not in b37.fa; the FASTA names it '20'" in message
    assert not list(tmp_path.glob("*.bw")) and not list(tmp_path.glob(".x.bw*"))


def _interrupt_after(blocks: int):
    calls = []

    def progress(bases: int) -> None:
        calls.append(bases)
        if len(calls) == blocks:
            raise KeyboardInterrupt

    return progress, calls


def test_interrupted_run_leaves_no_output_and_resume_is_byte_identical(
    tmp_path: Path, model: DNADecoder, fasta
) -> None:
    path, _ = fasta
    regions = [Region("chrA", 0, 700), Region("chrB", 0, 90)]
    options = TrackOptions(16, 8, ("logp", "entropy"), block_bases=64)
    for suffix in (".bw", ".bedGraph"):
        clean_dir, cut_dir = tmp_path / f"clean{suffix}", tmp_path / f"cut{suffix}"
        clean_dir.mkdir()
        cut_dir.mkdir()
        with Reference(path) as reference:
            clean = write_tracks(
                model, reference, regions, TrackRequest(clean_dir / f"t{suffix}", options)
            )
            progress, calls = _interrupt_after(4)
            with pytest.raises(KeyboardInterrupt):
                write_tracks(
                    model,
                    reference,
                    regions,
                    TrackRequest(cut_dir / f"t{suffix}", options),
                    progress=progress,
                )
            assert [p.name for p in cut_dir.iterdir()] == [f".t{suffix}.goatdna-work"]  # no output
            progress, calls = _interrupt_after(0)  # count the blocks the resumed run scores
            resumed = write_tracks(
                model,
                reference,
                regions,
                TrackRequest(cut_dir / f"t{suffix}", options, resume=True),
                progress=progress,
            )
        # the 4 finished blocks come back at once (not rescored), then the blocks after them
        assert calls[0] == block_first_base(4, options) == 16 + 31 * 8
        for what in ("logp", "entropy"):
            assert resumed.paths[what].read_bytes() == clean.paths[what].read_bytes()
        assert sorted(p.name for p in cut_dir.iterdir()) == [
            f"t.entropy{suffix}",
            f"t.logp{suffix}",
        ]


def test_resume_with_other_inputs_is_refused(tmp_path: Path, model: DNADecoder, fasta) -> None:
    path, _ = fasta
    out = tmp_path / "t.bw"
    with Reference(path) as reference:
        progress, _ = _interrupt_after(2)
        with pytest.raises(KeyboardInterrupt):
            write_tracks(
                model,
                reference,
                [Region("chrA", 0, 700)],
                TrackRequest(out, TrackOptions(16, 8, block_bases=64)),
                progress=progress,
            )
        with pytest.raises(GoatDNAError, match="--resume with different .*stride differ"):
            write_tracks(
                model,
                reference,
                [Region("chrA", 0, 700)],
                TrackRequest(out, TrackOptions(16, 4, block_bases=64), resume=True),
            )
        with pytest.raises(GoatDNAError, match="pass --resume to continue it, or --force"):
            write_tracks(  # without --resume the earlier run's blocks are not thrown away
                model,
                reference,
                [Region("chrA", 0, 700)],
                TrackRequest(out, TrackOptions(16, 4, block_bases=64)),
            )
        block = out.parent / ".t.bw.goatdna-work" / "block-000001.npz"
        block.write_bytes(block.read_bytes()[:-7])  # a damaged block: said, scored again
        said: list[str] = []
        progress, calls = _interrupt_after(0)
        write_tracks(
            model,
            reference,
            [Region("chrA", 0, 700)],
            TrackRequest(out, TrackOptions(16, 8, block_bases=64), resume=True),
            progress=progress,
            message=said.append,
        )
        assert any("block-000001.npz: damaged" in line for line in said), said
        assert calls[0] == 16 + 7 * 8  # only block 0 was kept
        out.unlink()
        with pytest.raises(GoatDNAError, match="--resume: no interrupted score-track run"):
            write_tracks(
                model,
                reference,
                [Region("chrA", 0, 700)],
                TrackRequest(out, TrackOptions(16, 8, block_bases=64), resume=True),
            )
        write_tracks(  # nothing there: a plain run
            model,
            reference,
            [Region("chrA", 0, 700)],
            TrackRequest(out, TrackOptions(16, 4, block_bases=64)),
        )
        out.unlink()
        progress, _ = _interrupt_after(1)
        with pytest.raises(KeyboardInterrupt):
            write_tracks(
                model,
                reference,
                [Region("chrA", 0, 700)],
                TrackRequest(out, TrackOptions(16, 4, block_bases=64), force=True),
                progress=progress,
            )
        write_tracks(  # --force starts the interrupted run's work over
            model,
            reference,
            [Region("chrA", 0, 700)],
            TrackRequest(out, TrackOptions(16, 8, block_bases=64), force=True),
        )
    assert [p.name for p in tmp_path.iterdir()] == ["t.bw"]


class _Rank:
    """A stand-in for a launched Fabric: rank ``rank`` of ``world`` on the CPU, in this process.

    Rank 0 publishes what it broadcasts in ``shared``; the other ranks receive it from there, so
    the ranks of one run can be played one after another.
    """

    device = torch.device("cpu")

    def __init__(self, rank: int, world: int, shared: dict) -> None:
        self.global_rank, self.world_size, self.shared = rank, world, shared

    def broadcast(self, obj, src: int = 0):
        if self.global_rank == 0:
            self.shared["broadcast"] = obj
        return self.shared["broadcast"]

    def barrier(self) -> None:
        pass

    def to_device(self, module):
        return module

    def autocast(self):
        return contextlib.nullcontext()


def test_resume_keeps_the_blocks_every_rank_finished(tmp_path: Path, model: DNADecoder, fasta):
    """Rank 0 of 2 is killed after 2 blocks, rank 1 finishes its share; one process resumes it
    scoring only rank 0's missing blocks, and the track is the uninterrupted one's bytes."""
    path, _ = fasta
    regions = [Region("chrA", 0, 300), Region("chrB", 0, 90)]
    options = TrackOptions(16, 8, ("logp",), strands="forward", block_bases=64)
    total = sum(block_count(r.length, options) for r in regions)
    share0 = len(rank_block(total, 0, 2))
    with Reference(path) as reference:
        clean = write_tracks(
            model, reference, regions, TrackRequest(tmp_path / "clean.bedGraph", options)
        )
        out = tmp_path / "cut.bedGraph"
        shared: dict = {}
        progress, _ = _interrupt_after(2)
        with pytest.raises(KeyboardInterrupt):
            write_tracks(
                model, reference, regions, TrackRequest(out, options), _Rank(0, 2, shared), progress
            )
        assert (
            write_tracks(model, reference, regions, TrackRequest(out, options), _Rank(1, 2, shared))
            is None
        )
        assert not out.exists()
        progress, calls = _interrupt_after(0)
        resumed = write_tracks(
            model, reference, regions, TrackRequest(out, options, resume=True), None, progress
        )
    plan = [(r.length, b) for r in regions for b in range(block_count(r.length, options))]
    sizes = [
        min(block_first_base(b + 1, options), n) - block_first_base(b, options) for n, b in plan
    ]
    finished = [0, 1, *range(share0, total)]  # rank 0's first two blocks, all of rank 1's
    assert calls[0] == sum(sizes[g] for g in finished)  # not scored again
    assert calls[1:] == sizes[2:share0]  # only rank 0's missing blocks are scored
    assert resumed is not None and out.read_bytes() == clean.paths["logp"].read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clean.bedGraph", "cut.bedGraph"]


@pytest.mark.slow
def test_two_processes_write_the_bedgraph_of_one(tmp_path: Path, checkpoint: Path, fasta) -> None:
    path, _ = fasta
    args = ["score-track", "-c", str(checkpoint), "-f", str(path), "--stride", "6",
            "-r", "chrA:101-400", "-r", "chrB:1-90", "--accelerator", "cpu"]  # fmt: skip
    one = tmp_path / "one.bedGraph"
    assert invoke([*args, "-o", str(one)]).exit_code == 0
    two = tmp_path / "two.bedGraph"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "goatdna.cli.app", *args, "-o", str(two), "--devices", "2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "GLOBAL_RANK: 1, MEMBER: 2/2" in proc.stderr + proc.stdout  # two ranks really ran
    assert two.read_bytes() == one.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.bedGraph", "two.bedGraph"]


def test_score_track_is_one_library_call_writing_the_commands_bytes(
    tmp_path: Path, checkpoint: Path, fasta
) -> None:
    """`goatdna score-track` only builds a `ScoreTrackRequest`: the library call with the same
    request checks it and writes the same file, byte for byte."""
    from goatdna.inference.tracks import ScoreTrackRequest, score_track
    from goatdna.runtime import Runtime

    path, _ = fasta
    cli_out, lib_out = tmp_path / "cli.bedGraph", tmp_path / "lib.bedGraph"
    args = ["score-track", "-c", str(checkpoint), "-f", str(path), "-r", "chrA:1-100"]
    cli = invoke([*args, "--what", "entropy", "-o", str(cli_out)])
    assert cli.exit_code == 0, cli.output
    request = ScoreTrackRequest(checkpoint, path, lib_out, ("chrA:1-100",), what=("entropy",))
    result = score_track(request, Runtime())
    assert result is not None and result.paths == {"entropy": lib_out}
    assert lib_out.read_bytes() == cli_out.read_bytes()
    with pytest.raises(GoatDNAError, match="no regions to score: give --region .* or --bed") as e:
        score_track(ScoreTrackRequest(checkpoint, path, tmp_path / "x.bw"), Runtime())
    assert "both" not in str(e.value)
    assert not (tmp_path / "x.bw").exists()
