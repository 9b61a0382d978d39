"""`score-variants --calibrate`: trinucleotide contexts, a reproducible stratified null, and
percentiles / z-scores equal to scipy's and numpy's on that null."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import invoke, tiny_config
from scipy.stats import percentileofscore

from goatdna.checkpoint import save_checkpoint
from goatdna.configfile import to_dict
from goatdna.inference.calibration import (
    CONTEXTS,
    NullScores,
    calibrate,
    context_classes,
    sample_null,
)
from goatdna.inference.reference import Reference
from goatdna.inference.variants import Allele
from goatdna.model import DNADecoder

REPO = Path(__file__).resolve().parents[1]
COMPLEMENT = str.maketrans("ACGT", "TGCA")
pytestmark = pytest.mark.usefixtures("one_thread")

_rng = np.random.default_rng(5)
CONTIGS = {
    "chr1": "".join(_rng.choice(list("ACGT"), 300)) + "NN" + "".join(_rng.choice(list("ACGT"), 98)),
    "chr2": "".join(_rng.choice(list("ACGT"), 200)),
}


@pytest.fixture(scope="module")
def fasta(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("calibration") / "ref.fa"
    path.write_text("".join(f">{name}\n{seq}\n" for name, seq in CONTIGS.items()))
    return path


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(3)
    config = tiny_config(train_length=16)
    model = DNADecoder(config)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(8.0 if p.dim() > 1 else 1.0)
    path = tmp_path_factory.mktemp("calibration_ckpt") / "goat.ckpt"
    return save_checkpoint(path, model, {"model": to_dict(config)})


def _context(text: str, p: int) -> str | None:
    """The collapsed trinucleotide by its definition, from the contig string."""
    if p < 1 or p >= len(text) - 1 or "N" in text[p - 1 : p + 2]:
        return None
    tri = text[p - 1 : p + 2]
    return tri.translate(COMPLEMENT)[::-1] if tri[1] in "AG" else tri


def test_contexts_are_the_32_pyrimidine_centred_trinucleotides(fasta, tmp_path) -> None:
    assert len(set(CONTEXTS)) == 32 and {c[1] for c in CONTEXTS} == {"C", "T"}
    reference = Reference(fasta, tmp_path)
    text = CONTIGS["chr1"]
    got = context_classes(reference.contig_tokens("chr1"), np.arange(-1, len(text) + 1))
    for p, k in zip(range(-1, len(text) + 1), got.tolist(), strict=True):
        expected = _context(text, p) if 0 <= p < len(text) else None
        assert (CONTEXTS[k] if k >= 0 else None) == expected, p


def test_the_null_is_a_pure_function_of_the_seed(fasta, tmp_path) -> None:
    draws = [
        sample_null(Reference(fasta, tmp_path / name), ["chr1", "chr2"], seed, per_context=6)
        for name, seed in (("a", 4), ("b", 4), ("c", 5))
    ]
    first, again, other = (d.alleles for d in draws)
    assert first == again and first != other
    np.testing.assert_array_equal(draws[0].contexts, draws[1].contexts)
    assert [CONTEXTS[k] for k in draws[0].contexts] == [
        _context(CONTIGS[a.chrom], a.pos - 1) for a in first
    ]
    assert [(a.chrom, a.pos) for a in first] == sorted((a.chrom, a.pos) for a in first)
    sites = [(a.chrom, a.pos) for a in first]
    assert len(set(sites)) == len(sites)  # without replacement
    by_context: dict[str, int] = {}
    for allele in first:
        text = CONTIGS[allele.chrom]
        assert allele.ref == text[allele.pos - 1] and allele.alt in "ACGT".replace(allele.ref, "")
        context = _context(text, allele.pos - 1)
        assert context is not None
        by_context[context] = by_context.get(context, 0) + 1
    available = {c: 0 for c in CONTEXTS}
    for text in CONTIGS.values():
        for p in range(len(text)):
            context = _context(text, p)
            if context:
                available[context] += 1
    assert by_context == {c: min(6, n) for c, n in available.items() if n}  # stratified
    assert sorted({a.alt for a in first}) == list("ACGT")


def test_another_process_draws_the_same_null(fasta, tmp_path) -> None:
    """A fresh interpreter (other hash seed, nothing shared) draws the same SNVs from the seed."""
    here = sample_null(Reference(fasta, tmp_path / "here"), ["chr1", "chr2"], 8, per_context=5)
    code = (
        "import json, sys; from pathlib import Path; "
        "from goatdna.inference.calibration import sample_null; "
        "from goatdna.inference.reference import Reference; "
        "d = sample_null(Reference(Path(sys.argv[1]), Path(sys.argv[2])), ['chr1', 'chr2'], 8, 5); "
        "print(json.dumps([[a.chrom, a.pos, a.ref, a.alt] for a in d.alleles]))"
    )
    env = dict(os.environ, PYTHONHASHSEED="123", PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", code, str(fasta), str(tmp_path / "there")],
                          capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    there = json.loads(proc.stdout.strip().splitlines()[-1])
    assert there == [[a.chrom, a.pos, a.ref, a.alt] for a in here.alleles]


def test_percentile_and_z_equal_scipy_and_numpy(fasta, tmp_path) -> None:
    reference = Reference(fasta, tmp_path)
    text = CONTIGS["chr1"]
    k = CONTEXTS.index(_context(text, 10))
    null_llr = np.array([-1.0, 0.5, 0.5, 2.0, -3.0, 0.5, 7.0])  # ties included
    null = NullScores({}, np.array(["chr1"] * 9), np.arange(9), np.array(["A"] * 9),
                      np.array(["C"] * 9), np.array([k] * 7 + [(k + 1) % 32] * 2),
                      np.concatenate([null_llr, [100.0, 200.0]]))  # fmt: skip
    ref = text[10]
    alleles = [Allele(0, "chr1", 11, ".", ref, "ACGT".replace(ref, "")[0])] * 5
    alleles += [Allele(1, "chr1", 11, ".", ref + text[11], ref)]  # a deletion: no context
    llr = np.array([0.5, -10.0, 7.0, 1.0, 3.0, 0.5])
    statuses = ["ok"] * 5 + ["ok"]
    columns = calibrate(alleles, statuses, llr, reference, null)
    for row in range(5):
        assert columns["context"][row] == CONTEXTS[k]
        assert columns["llr_percentile"][row] == pytest.approx(
            percentileofscore(null_llr, llr[row], kind="mean")
        )
        expected_z = (llr[row] - null_llr.mean()) / null_llr.std(ddof=1)
        assert columns["llr_z"][row] == pytest.approx(expected_z)
    assert columns["context"][5] is None and np.isnan(columns["llr_percentile"][5])


def _vcf(path: Path) -> Path:
    rows = []
    for name, text in CONTIGS.items():
        for p in range(3, len(text) - 3, 37):
            if text[p] != "N":
                rows.append(f"{name}\t{p + 1}\t.\t{text[p]}\t{'ACGT'.replace(text[p], '')[1]}")
    rows.append(f"chr2\t50\t.\t{CONTIGS['chr2'][49:51]}\t{CONTIGS['chr2'][49]}")  # a deletion
    header = ["##fileformat=VCFv4.2", "##contig=<ID=chr1>", "##contig=<ID=chr2>",
              "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]  # fmt: skip
    path.write_text("\n".join(header + [r + "\t.\t.\t." for r in rows]) + "\n")
    return path


def test_calibrate_cli_makes_the_null_once_and_reuses_it(checkpoint, fasta, tmp_path, monkeypatch):
    import goatdna.inference.calibration as calibration

    vcf = _vcf(tmp_path / "calls.vcf")
    null = tmp_path / "null.npz"

    def args(out: Path, *extra: str) -> list[str]:
        return ["score-variants", "-c", str(checkpoint), "--fasta", str(fasta), "--vcf",
                str(vcf), "-o", str(out), "--window", "8", "--null-size", "4", *extra]  # fmt: skip

    first = tmp_path / "first.parquet"
    res = invoke(args(first, "--null", str(null), "--seed", "9"))
    assert res.exit_code == 0, res.output + str(res.exception)
    table = pd.read_parquet(first)
    assert list(table.columns[-3:]) == ["context", "llr_percentile", "llr_z"]
    snv = table.ref.str.len() == 1
    has = [bool(s) and _context(CONTIGS[c], p - 1) is not None
           for s, c, p in zip(snv, table.chrom, table.pos, strict=True)]  # fmt: skip
    assert 0 < sum(has) < len(has)  # an SNV next to the N run has no context, nor the deletion
    assert table.llr_percentile.notna().tolist() == has == table.context.notna().tolist()
    snv = pd.Series(has, index=table.index)
    saved = NullScores.load(null)
    assert saved.fingerprint["seed"] == 9 and saved.fingerprint["contigs"] == ["chr1", "chr2"]
    for row in table[snv].itertuples():
        values = saved.llr[saved.context == CONTEXTS.index(row.context)]
        assert row.llr_percentile == pytest.approx(percentileofscore(values, row.llr, kind="mean"))

    def no_scoring(*_args, **_kwargs):
        raise AssertionError("the saved null must be reused, not scored again")

    monkeypatch.setattr(calibration, "score_null", no_scoring)
    second = tmp_path / "second.parquet"
    res = invoke(args(second, "--null", str(null), "--seed", "9"))
    assert res.exit_code == 0, res.output + str(res.exception)
    assert "reusing the null" in res.stdout
    pd.testing.assert_frame_equal(pd.read_parquet(second), table)
    for extra, message in (
        (("--null", str(null), "--seed", "10"), "seed differ"),
        (("--null", str(null), "--seed", "9", "--window", "10"), "window differ"),
    ):
        res = invoke(args(tmp_path / "third.tsv", *extra))
        assert res.exit_code == 2 and message in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "third.tsv").exists()
    res = invoke(args(tmp_path / "out.vcf.gz", "--calibrate"))
    assert res.exit_code == 2 and "write one of those" in res.stderr
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a null")
    res = invoke(args(tmp_path / "fourth.tsv", "--null", str(junk)))
    assert res.exit_code == 2 and "not a goatdna null file" in res.stderr, res.stderr
    res = invoke(args(tmp_path / "fourth.tsv", "--calibrate", "--null-size", "1"))
    assert res.exit_code == 2 and "--null-size 1: must be >= 2" in res.stderr, res.stderr
    assert not list(tmp_path.glob("*fourth*"))  # no output, no work folder


def test_calibrate_without_a_file_keeps_its_null_in_the_cache(checkpoint, fasta, tmp_path):
    vcf = _vcf(tmp_path / "calls.vcf")
    outs = [tmp_path / "a.tsv", tmp_path / "b.tsv"]
    for out in outs:
        res = invoke(["score-variants", "-c", str(checkpoint), "--fasta", str(fasta),
                                  "--vcf", str(vcf), "-o", str(out), "--window", "8",
                                  "--null-size", "3", "--calibrate"])  # fmt: skip
        assert res.exit_code == 0, res.output + str(res.exception)
    assert "reusing the null" in res.stdout
    assert len(list((tmp_path / ".goatdna-cache" / "nulls").glob("null-*.npz"))) == 1
    assert outs[0].read_bytes() == outs[1].read_bytes()
