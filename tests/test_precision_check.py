"""`goatdna check-precision` on the CPU with the tiny GOAT model: faithful paths pass, a broken
path (a dropped attention term, a cast through too low a precision) fails with exit status 1,
bad input exits 2, and the numbers are the direct recomputation's."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import invoke

import goatdna.model.attention as attention_module


@pytest.fixture(scope="module")
def fasta(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two contigs of random bases with a run of N in the first (windows must skip it)."""
    rng = random.Random(0)
    path = tmp_path_factory.mktemp("ref") / "ref.fa"
    with path.open("w") as fh:
        for name in ("chrA", "chrB"):
            seq = "".join(rng.choice("ACGT") for _ in range(3000))
            seq = seq[:700] + "N" * 40 + seq[740:]
            fh.write(f">{name}\n" + "".join(seq[i : i + 60] + "\n" for i in range(0, 3000, 60)))
    return path


def check(ckpt: Path, fasta: Path, *extra: str):
    return invoke(["check-precision", "-c", str(ckpt), "--fasta", str(fasta),
                               "--accelerator", "cpu", "--windows", "4", *extra])  # fmt: skip


@pytest.fixture(scope="module")
def ckpt(tiny_runs: dict[str, Path]) -> Path:
    return tiny_runs["goat"] / "checkpoints" / "best.ckpt"


@pytest.mark.parametrize("backend", ["sdpa", "explicit"])
def test_float32_paths_pass_and_report_every_number(
    ckpt: Path, fasta: Path, tmp_path: Path, backend: str, one_thread: None
) -> None:
    out = tmp_path / "report.json"
    result = check(ckpt, fasta, "--precision", "32-true", "--attention", backend, "-o", str(out))
    assert result.exit_code == 0, (result.output, result.exception)
    assert "verdict: PASS" in result.output
    report = json.loads(out.read_text())
    assert report["passed"] and report["attention"] == backend
    assert report["windows"] == 4 and report["window_length"] == 128
    assert report["variants"] == 12  # three SNVs at each window's centre
    assert report["nll_diff"] < 1e-5 and report["max_logprob_error"] < 1e-4
    assert report["spearman"] > 0.999
    assert report["thresholds"] == {"max_nll_diff": 0.01, "max_logprob_error": 0.5,
                                    "min_spearman": 0.95}  # fmt: skip
    again = check(ckpt, fasta, "--precision", "32-true", "-o", str(out))
    assert again.exit_code == 2 and "--force" in again.output  # an existing --out is kept
    assert json.loads(out.read_text()) == report


def test_measurements_equal_a_direct_recomputation(
    ckpt: Path, fasta: Path, one_thread: None
) -> None:
    """The report's NLLs are the float64 model's and the float32 model's mean next-base NLL
    over the same windows, computed here from `DNADecoder.forward` directly."""
    from goatdna.checkpoint import load_checkpoint
    from goatdna.inference.precision_check import check_precision, reference_windows
    from goatdna.inference.reference import Reference

    model = load_checkpoint(ckpt, "cpu").model
    with Reference(fasta) as ref:
        report = check_precision(model, ref, None, precision="32-true", attention="sdpa",
                                 device="cpu", windows=3, length=96)  # fmt: skip
        tokens, places = reference_windows(ref, 3, 96)
    assert all(b"N" not in bytes(t) for t in tokens) and places[0] == ("chrA", 0)
    x = torch.from_numpy(tokens)
    with torch.no_grad():
        ref64 = F.log_softmax(model.double()(x[:, :-1]).double(), -1)
    nll64 = -ref64.gather(-1, x[:, 1:, None]).mean().item()
    assert report.nll_reference == pytest.approx(nll64, abs=1e-6)
    assert report.positions == 3 * 95


def _drop_causal_mask(original):
    """Attention that forgets the causal mask outside float64 (the reference's dtype)."""

    def attend(q, k, v, backend, *args, **kwargs):
        if q.dtype == torch.float64:
            return original(q, k, v, backend, *args, **kwargs)
        return F.scaled_dot_product_attention(q, k, v)

    return attend


def _through_float8(original):
    """Attention inputs and output cast through float8 e5m2 (2 mantissa bits) outside float64."""

    def attend(q, k, v, backend, *args, **kwargs):
        if q.dtype == torch.float64:
            return original(q, k, v, backend, *args, **kwargs)
        q, k, v = (t.to(torch.float8_e5m2).to(t.dtype) for t in (q, k, v))
        out = original(q, k, v, backend, *args, **kwargs)
        return out.to(torch.float8_e5m2).to(q.dtype)

    return attend


# The tiny model leans little on attention, so its errors stay small: a dropped causal mask
# fails the default thresholds; the float8 cast (max log-prob error ~0.2, where bf16's is ~0.007)
# fails a tighter one, which bf16 autocast passes (test_bf16_mixed_on_cpu_is_measured).
@pytest.mark.parametrize(
    ("broken", "limits", "measure"),
    [(_drop_causal_mask, [], "NLL difference"),
     (_through_float8, ["--max-logprob-error", "0.05"], "max log-prob error")],
)  # fmt: skip
def test_a_broken_path_fails_with_exit_status_1(
    ckpt: Path, fasta: Path, monkeypatch: pytest.MonkeyPatch, broken, limits: list[str],
    measure: str, one_thread: None,
) -> None:  # fmt: skip
    monkeypatch.setattr(attention_module, "attend", broken(attention_module.attend))
    result = check(ckpt, fasta, "--precision", "32-true", "--attention", "sdpa", *limits)
    assert result.exit_code == 1, (result.output, result.exception)
    assert f"verdict: FAIL: {measure}" in result.output, result.output
    assert "verdict: PASS" not in result.output


def test_bf16_mixed_on_cpu_is_measured(ckpt: Path, fasta: Path, tmp_path: Path,
                                       one_thread: None) -> None:  # fmt: skip
    """bf16 autocast runs on the CPU too: its errors are bf16-sized, above float32's."""
    out = tmp_path / "bf16.json"
    result = check(ckpt, fasta, "--precision", "bf16-mixed", "--attention", "sdpa",
                   "--max-logprob-error", "0.05", "-o", str(out))  # fmt: skip
    assert result.exit_code == 0, (result.output, result.exception)
    report = json.loads(out.read_text())
    assert report["passed"] and report["thresholds"]["max_logprob_error"] == 0.05
    assert 1e-4 < report["max_logprob_error"] < 0.05  # bf16-sized: well above float32's 1e-6
    assert np.isfinite(report["nll_tested"]) and report["nll_diff"] < 1e-3


def test_bad_input_exits_2(ckpt: Path, fasta: Path, tmp_path: Path) -> None:
    for extra, words in ((["--precision", "fp8"], "--precision"),
                         (["--attention", "fast"], "--attention"),
                         (["--length", "100000"], "lower --length"),
                         (["--variants", str(tmp_path / "none.vcf")], "none.vcf")):  # fmt: skip
        result = check(ckpt, fasta, *extra)
        assert result.exit_code == 2, (extra, result.output)
        assert "error:" in result.output and words in result.output, (extra, result.output)


def test_unbounded_sizes_and_bad_thresholds_are_refused_before_work(
    ckpt: Path, fasta: Path, tmp_path: Path
) -> None:
    """Each refused in one line with exit 2 before the FASTA is read (a missing FASTA is not
    reached): the thresholds are bad input, not a failed check (exit 1)."""
    missing = tmp_path / "never-read.fa"
    for extra, words in ((["--max-nll-diff", "nan"], "--max-nll-diff"),
                         (["--max-nll-diff", "-1"], "--max-nll-diff"),
                         (["--max-logprob-error", "-0.5"], "--max-logprob-error"),
                         (["--min-spearman", "2"], "--min-spearman"),
                         (["--batch-size", "0"], "--batch-size"),
                         (["--batch-size", "-2"], "--batch-size"),
                         (["--windows", "100000"], "positions, above"),
                         (["--length", "40000", "--batch-size", "1"], "GiB")):  # fmt: skip
        result = check(ckpt, missing, *extra)
        assert result.exit_code == 2, (extra, result.output)
        assert "error:" in result.output and words in result.output, (extra, result.output)
        assert "never-read" not in result.output, result.output


def test_progress_counts_both_passes_of_every_window(
    ckpt: Path, fasta: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from goatdna.cli.common import ProgressLine

    monkeypatch.setattr(ProgressLine, "EVERY_S", 0.0)
    result = check(ckpt, fasta, "--batch-size", "1")  # 4 windows, one per pass
    assert result.exit_code == 0, result.output
    assert "check-precision: 1/8 window passes" in result.stderr
    assert "check-precision: 7/8 window passes" in result.stderr and "s left" in result.stderr


def test_windows_are_drawn_from_the_n_free_stretches(ckpt: Path, tmp_path: Path) -> None:
    """A contig that opens with a long run of N (as chr1's telomere does): the windows are spread
    over its N-free bases, not refused with advice (lower --length) that did not help; too many
    windows, or too long ones, are refused with the --windows or --length that does fit."""
    from goatdna.inference.precision_check import reference_windows
    from goatdna.inference.reference import Reference

    rng = random.Random(1)
    path = tmp_path / "leading_n.fa"
    seq = "N" * 2000 + "".join(rng.choice("ACGT") for _ in range(1000))
    path.write_text(">chrN\n" + "".join(seq[i : i + 60] + "\n" for i in range(0, 3000, 60)))
    with Reference(path) as ref:
        tokens, places = reference_windows(ref, 4, 128)
        starts = [start for _, start in places]
        assert starts == sorted(starts) and starts[0] == 2000 and starts[-1] + 128 <= 3000
        assert all(start >= 2000 for start in starts) and (tokens <= 3).all()
        assert all(b - a >= 128 for a, b in zip(starts, starts[1:], strict=False))  # spread out
        for (_, start), window in zip(places, tokens, strict=True):
            assert "".join("ACGT"[t] for t in window) == seq[start : start + 128]
        assert len(reference_windows(ref, 873, 128)[0]) == 873  # every N-free start once
        assert len(reference_windows(ref, 1, 1000)[0]) == 1
    for extra, advice in ((["--windows", "874"], "lower --windows to 873 or less"),
                          (["--length", "1001"], "lower --length to 1,000 or less")):  # fmt: skip
        result = invoke(["check-precision", "-c", str(ckpt), "--fasta", str(path),
                                     "--accelerator", "cpu", *extra])  # fmt: skip
        assert result.exit_code == 2, (extra, result.output, result.exception)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and advice in lines[0], lines


def test_windows_equal_a_brute_force_spread_over_every_n_free_start(tmp_path: Path) -> None:
    """`reference_windows` against a position-by-position reference: contigs with N runs
    (leading, trailing, inner, all-N), every N-free start in FASTA order, ``n`` of them taken at
    ranks ``i * total // n``; and the refusal's longest N-free stretch when no window fits."""
    from goatdna.errors import GoatDNAError
    from goatdna.inference.precision_check import reference_windows
    from goatdna.inference.reference import Reference

    rng = random.Random(5)
    contigs = {}
    for name, size in (("c1", 300), ("c2", 40), ("c3", 500), ("c4", 25)):
        seq = [rng.choice("ACGT") for _ in range(size)]
        for _ in range(rng.randrange(1, 6)):
            at = rng.randrange(size)
            seq[at : at + rng.randrange(1, 30)] = "N" * len(seq[at : at + 30])
        contigs[name] = "".join(seq)[:size]
    contigs["c1"] = "NNNNN" + contigs["c1"][5:-3] + "NNN"
    contigs["c4"] = "N" * 25
    path = tmp_path / "runs.fa"
    path.write_text("".join(f">{name}\n{seq}\n" for name, seq in contigs.items()))
    with Reference(path) as ref:
        for length in (2, 3, 17, 60, 131):
            every = [(name, s) for name, seq in contigs.items()
                     for s in range(len(seq) - length + 1) if "N" not in seq[s : s + length]]  # fmt: skip
            for n in sorted({1, 2, 7, len(every)} - {0}):
                if n > len(every):
                    continue
                want = [every[i * len(every) // n] for i in range(n)]
                tokens, places = reference_windows(ref, n, length)
                assert places == want, (length, n)
                for (name, start), window in zip(places, tokens, strict=True):
                    assert "".join("ACGT"[t] for t in window) == contigs[name][start:][:length]
        longest = max(len(run) for seq in contigs.values() for run in seq.split("N"))
        with pytest.raises(GoatDNAError, match=f"lower --length to {longest} or less"):
            reference_windows(ref, 1, longest + 1)


def test_flash_that_would_not_run_is_refused_not_passed(
    ckpt: Path, fasta: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--attention flash without flash-attn (or on the CPU, or in float32, where flash-attn
    does not run) would check SDPA and print PASS for flash: one error line instead."""
    result = check(ckpt, fasta, "--attention", "flash")
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --attention flash"), lines
    assert "flash-attn is not installed" in lines[0] and "--attention sdpa" in lines[0]
    monkeypatch.setattr(attention_module, "flash_attn_func", lambda *a, **k: None)
    for extra in ([], ["--precision", "32-true"]):
        result = check(ckpt, fasta, "--attention", "flash", *extra)
        assert result.exit_code == 2, (extra, result.output, result.exception)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "flash-attn runs only on CUDA" in lines[0], lines


def test_the_command_is_one_library_call(
    ckpt: Path, fasta: Path, tmp_path: Path, one_thread: None
) -> None:
    """`goatdna check-precision` only builds a `PrecisionRequest`: `precision_run` checks it,
    measures, and writes the JSON report the command writes."""
    from goatdna.errors import GoatDNAError
    from goatdna.inference.precision_run import PrecisionRequest, check_precision, write_report

    cli_out, lib_out = tmp_path / "cli.json", tmp_path / "lib.json"
    result = check(ckpt, fasta, "--precision", "32-true", "--attention", "sdpa", "-o", str(cli_out))
    assert result.exit_code == 0, (result.output, result.exception)
    request = PrecisionRequest(
        ckpt, fasta, precision="32-true", attention="sdpa", windows=4, accelerator="cpu"
    )
    report = check_precision(request)
    assert report.passed and report.windows == 4
    write_report(report, lib_out)
    assert lib_out.read_bytes() == cli_out.read_bytes()
    missing = tmp_path / "never-read.fa"
    with pytest.raises(GoatDNAError, match="^max_variants must be >= 1, got 0$"):
        check_precision(PrecisionRequest(ckpt, missing, variants=missing, max_variants=0))
