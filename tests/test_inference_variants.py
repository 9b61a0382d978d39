"""`goatdna score-variants`: exact LLRs against a brute-force computation, statuses, outputs.

Tables (``--variants TABLE``): the crafted VCF written as a table must give the same statuses and
numbers as the VCF, and the table's own columns come back in order with their types.

The brute force re-derives the windows from the score's definition on the contig *string* and
scores each full sequence alone with the scoring primitive (`sequence_log_probs`), so it shares
neither the window code nor the shared-prefix KV-cache path with the implementation.
"""

from __future__ import annotations

import gzip
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pysam
import pytest
import torch
from helpers import assert_one_error_line, invoke, tiny_config

from goatdna.checkpoint import load_checkpoint, save_checkpoint
from goatdna.configfile import to_dict
from goatdna.inference.reference import Reference
from goatdna.inference.variant_io import read_alleles
from goatdna.inference.variants import VariantOptions, allele_status, score_alleles
from goatdna.io.tokens import encode
from goatdna.model import DNADecoder
from goatdna.model.scoring import sequence_log_probs

REPO = Path(__file__).resolve().parents[1]
COMPLEMENT = str.maketrans("ACGTN", "TGCAN")

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Random-init 1-layer GOAT and RoPE decoders saved as checkpoints (training length 32)."""
    folder = tmp_path_factory.mktemp("variant_ckpts")
    paths = {}
    for positional in ("goat", "rope"):
        torch.manual_seed(7)
        config = tiny_config(positional=positional)
        model = DNADecoder(config)
        with torch.no_grad():  # larger weights than GPT-2 init: log-probs that vary with context
            for p in model.parameters():
                p.mul_(8.0 if p.dim() > 1 else 1.0)
        paths[positional] = save_checkpoint(
            folder / f"{positional}.ckpt", model, {"model": to_dict(config)}
        )
    return paths


def _contig_text(fasta: Path, name: str) -> str:
    seq, keep = [], False
    opener = gzip.open if fasta.name.endswith(".gz") else open
    with opener(fasta, "rt") as handle:
        for line in handle:
            if line.startswith(">"):
                keep = line[1:].split()[0] == name
            elif keep:
                seq.append(line.strip())
    return "".join(seq).upper()


def _ll(model, text: str) -> float:
    """LL(s) from the definition: sum over t >= 1 of log p(s_t | s_<t), N targets excluded."""
    if len(text) < 2:
        return 0.0
    tokens = torch.from_numpy(encode(text).astype(np.int64))[None, :]
    return float(sequence_log_probs(model, tokens).double().sum())


def brute_force(
    model, contig: str, pos: int, ref: str, alt: str, window: int, fair: bool = True
) -> dict[str, float]:
    """The score's definition (docs/variants.md) on the contig string, each sequence alone."""
    f = window // 2
    ref, alt = ref.upper(), alt.upper()
    start, end = pos - 1, pos - 1 + len(ref)
    first, last = max(0, start - f), min(len(contig), end + f)
    left, right = contig[first:start], contig[end:last]
    d = abs(len(alt) - len(ref)) if fair else 0
    more_left, more_right = contig[max(0, first - d) : first], contig[last : last + d]

    def rc(s: str) -> str:
        return s.translate(COMPLEMENT)[::-1]

    def shorter(allele: str) -> bool:
        return len(allele) < max(len(ref), len(alt))

    fwd_seq = {a: left + a + right + (more_right if shorter(a) else "") for a in (ref, alt)}
    rev_seq = {a: rc((more_left if shorter(a) else "") + left + a + right) for a in (ref, alt)}
    fwd = _ll(model, fwd_seq[alt]) - _ll(model, fwd_seq[ref])
    rev = _ll(model, rev_seq[alt]) - _ll(model, rev_seq[ref])
    span = (first - (len(more_left) if d else 0), last + (len(more_right) if d else 0))
    return {"llr": (fwd + rev) / 2, "llr_fwd": fwd, "llr_rev": rev, "span": span}


def _sample(alleles, statuses):
    """20 SNVs, 20 indels spread over the file and every allele of two multi-allelic records."""
    ok = [(i, a) for i, (a, s) in enumerate(zip(alleles, statuses, strict=True)) if s == "ok"]
    snvs = [x for x in ok if len(x[1].ref) == len(x[1].alt) == 1]
    indels = [x for x in ok if len(x[1].ref) != len(x[1].alt)]
    per_record = pd.Series([a.record for _, a in ok]).value_counts()
    multi = sorted(per_record[per_record > 1].index)[:2]
    assert len(multi) == 2
    picked = snvs[:: max(1, len(snvs) // 20)][:20] + indels[:: max(1, len(indels) // 20)][:20]
    picked += [x for x in ok if x[1].record in multi]
    assert sum(len(a.ref) > len(a.alt) for _, a in picked) >= 5  # deletions
    assert sum(len(a.ref) < len(a.alt) for _, a in picked) >= 5  # insertions
    return picked


@pytest.mark.parametrize(
    ("positional", "window", "fair"),
    [("goat", 32, True), ("goat", 25, True), ("rope", 32, True), ("goat", 32, False)],
)
def test_llr_equals_brute_force_on_real_snvs_and_indels(
    checkpoints, chr20_reference, kgp_vcf, positional, window, fair, tmp_path
) -> None:
    model = load_checkpoint(checkpoints[positional]).model
    reference = Reference(chr20_reference, tmp_path)
    vcf = read_alleles(kgp_vcf)
    head = vcf.alleles[:3000]
    statuses = [allele_status(a, reference) for a in head]
    picked = _sample(head, statuses)
    alleles = [a for _, a in picked]
    contig = _contig_text(chr20_reference, "20")
    for shared in (True, False):
        options = VariantOptions(window, "both", batch_size=7, shared_prefix=shared,
                                 length_fair=fair)  # fmt: skip
        scores, windows = score_alleles(model, alleles, ["ok"] * len(alleles), reference, options)
        for row, allele in enumerate(alleles):
            expected = brute_force(model, contig, allele.pos, allele.ref, allele.alt, window, fair)
            llr_fwd = scores[row, 1] - scores[row, 0]
            llr_rev = scores[row, 3] - scores[row, 2]
            assert llr_fwd == pytest.approx(expected["llr_fwd"], abs=1e-4), allele
            assert llr_rev == pytest.approx(expected["llr_rev"], abs=1e-4), allele
            assert tuple(windows[row]) == expected["span"], allele
    assert np.abs(scores[:, 1] - scores[:, 0]).max() > 1e-3  # the model does tell alleles apart


def _write_vcf(path: Path, contigs: list[str], rows: list[str]) -> Path:
    header = ["##fileformat=VCFv4.2"] + [f"##contig=<ID={c}>" for c in contigs]
    header += [
        '##INFO=<ID=END,Number=1,Type=Integer,Description="End">',
        "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO",
    ]
    path.write_text("\n".join(header + rows) + "\n")
    return path


CRAFTED_CONTIG = "ACGTTGCAAGGCTTACCGATAGCTAGGATCCAGTnnacgtacgttagcTAGGCATCGATCGGATCCTAGCATGCAAGT"


@pytest.fixture()
def crafted(tmp_path: Path) -> tuple[Path, Path]:
    fasta = tmp_path / "crafted.fa"
    fasta.write_text(f">chr1\n{CRAFTED_CONTIG[:40]}\n{CRAFTED_CONTIG[40:]}\n>chr2\nACGTACGTAC\n")
    c = CRAFTED_CONTIG.upper()
    rows = [
        f"chr1\t1\tfirst\t{c[0]}\tG\t.\t.\t.",  # no left flank
        f"chr1\t5\tmulti\t{c[4]}\tA,<DEL>,*,C\t.\t.\tEND=5",  # ok, symbolic, symbolic, ok
        f"chr1\t10\tdel\t{c[9:13]}\t{c[9]}\t.\t.\t.",  # deletion
        f"chr1\t20\tins\t{c[19]}\t{c[19]}TTAG\t.\t.\t.",  # insertion
        "chr1\t22\tmismatch\tAAAA\tA\t.\t.\t.",  # REF differs from the FASTA
        f"chr1\t25\tiupac\t{c[24]}\tR\t.\t.\t.",  # non-ACGT ALT
        f"chr1\t26\tsame\t{c[25]}\t{c[25].lower()}\t.\t.\t.",  # identical (case-insensitive)
        f"chr1\t30\tbnd\t{c[29]}\t{c[29]}]chr2:3]\t.\t.\t.",  # breakend
        f"chr1\t38\tlower\t{c[37]}\tT\t.\t.\t.",  # soft-masked, N in the left flank
        f"chr1\t40\tsv\t{c[39]}\t<INS:ME:ALU>,<CN0>\t.\t.\tEND=41",
        f"chr1\t{len(c)}\tlast\t{c[-1]}\tA\t.\t.\t.",  # no right flank
        "1\t3\tnoprefix\tG\tA\t.\t.\t.",  # missing contig; the FASTA has chr1
        "chrUn\t3\tgone\tG\tA\t.\t.\t.",  # missing contig without a suggestion
    ]
    vcf = _write_vcf(tmp_path / "crafted.vcf", ["chr1", "chr2", "1", "chrUn"], rows)
    return fasta, vcf


EXPECTED_STATUS = {
    ("first", "G"): "ok",
    ("multi", "A"): "ok",
    ("multi", "<DEL>"): "symbolic",
    ("multi", "*"): "symbolic",
    ("multi", "C"): "ok",
    ("del", None): "ok",
    ("ins", None): "ok",
    ("mismatch", "A"): "ref_mismatch",
    ("iupac", "R"): "non_acgt_allele",
    ("same", None): "identical",
    ("bnd", None): "symbolic",
    ("lower", "T"): "ok",
    ("sv", "<INS:ME:ALU>"): "symbolic",
    ("sv", "<CN0>"): "symbolic",
    ("last", "A"): "ok",
    ("noprefix", "A"): "missing_contig",
    ("gone", "A"): "missing_contig",
}


def test_every_status_on_crafted_records(checkpoints, crafted, tmp_path) -> None:
    fasta, vcf = crafted
    out = tmp_path / "crafted.tsv"
    args = ["score-variants", "-c", str(checkpoints["goat"]), "--fasta", str(fasta),
            "--vcf", str(vcf), "--out", str(out), "--window", "12", "--accelerator", "cpu"]  # fmt: skip
    res = invoke(args)
    assert res.exit_code == 0, res.output + str(res.exception)
    table = pd.read_csv(out, sep="\t", keep_default_na=False, na_values=[""])
    assert len(table) == len(EXPECTED_STATUS)  # one row per ALT allele, input order
    for (vid, alt), row in zip(EXPECTED_STATUS, table.itertuples(), strict=True):
        assert row.id == vid and (alt is None or row.alt == alt)
        assert row.status == EXPECTED_STATUS[(vid, alt)], row
        assert math.isnan(row.llr) == (row.status != "ok")
    for status in (
        "ok",
        "symbolic",
        "ref_mismatch",
        "missing_contig",
        "non_acgt_allele",
        "identical",
    ):
        assert status in res.stdout
    assert "1 (FASTA has chr1)" in res.stdout  # the naming suggestion
    model = load_checkpoint(checkpoints["goat"]).model
    contig = CRAFTED_CONTIG.upper()
    for row in table[table.status == "ok"].itertuples():
        expected = brute_force(model, contig, row.pos, row.ref, row.alt, 12)
        assert row.llr == pytest.approx(expected["llr"], abs=1e-5)  # 6 decimals in the TSV
        assert row.llr_fwd == pytest.approx(expected["llr_fwd"], abs=1e-5)
    first, last = table.iloc[0], table[table.id == "last"].iloc[0]
    assert first.window_start == 0 and first.window_end == 1 + 6  # clipped on the left
    assert last.window_end == len(contig) and last.window_start == len(contig) - 1 - 6


def test_forward_strand_only(checkpoints, crafted, tmp_path) -> None:
    fasta, vcf = crafted
    out = tmp_path / "fwd.tsv"
    args = ["score-variants", "-c", str(checkpoints["rope"]), "--fasta", str(fasta),
            "--vcf", str(vcf), "--out", str(out), "--window", "9", "--strands", "forward"]  # fmt: skip
    assert invoke(args).exit_code == 0
    table = pd.read_csv(out, sep="\t")
    ok = table[table.status == "ok"]
    assert ok.llr_rev.isna().all() and np.allclose(ok.llr, ok.llr_fwd)
    model = load_checkpoint(checkpoints["rope"]).model
    for row in ok.itertuples():
        expected = brute_force(model, CRAFTED_CONTIG.upper(), row.pos, row.ref, row.alt, 9)
        assert row.llr == pytest.approx(expected["llr_fwd"], abs=1e-5)


@pytest.fixture(scope="module")
def whole_vcf_run(checkpoints, chr20_reference, kgp_vcf, tmp_path_factory) -> Path:
    """The whole real VCF scored once (window 2, big batches: the row-count test stays cheap)."""
    out = tmp_path_factory.mktemp("whole_vcf") / "scores.tsv"
    args = ["score-variants", "-c", str(checkpoints["goat"]), "--fasta", str(chr20_reference),
            "--vcf", str(kgp_vcf), "--out", str(out), "--window", "2", "--batch-size", "8192",
            "--chunk-size", "100000"]  # fmt: skip
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        res = invoke(args)
    finally:
        torch.set_num_threads(threads)
    assert res.exit_code == 0, res.output + str(res.exception)
    return out


def test_row_count_equals_alt_alleles_of_the_real_vcf(whole_vcf_run, kgp_vcf) -> None:
    with pysam.VariantFile(str(kgp_vcf)) as handle:
        expected = [(r.pos, alt) for r in handle for alt in r.alts]
    table = pd.read_csv(whole_vcf_run, sep="\t", dtype={"chrom": str})
    assert len(table) == len(expected) == 29144  # 28,998 records, multi-allelic ones split
    assert list(zip(table.pos, table.alt, strict=True)) == expected  # input order
    counts = table.status.value_counts().to_dict()
    # every REF matches the FASTA (README); with --window 2 alleles longer than 2 are too_long
    long = sum(max(len(r), len(a)) > 2 for r, a in zip(table.ref, table.alt, strict=True)
               if not a.startswith("<"))  # fmt: skip
    assert long > 100
    assert counts == {"ok": 29120 - long, "symbolic": 24, "too_long": long}
    assert table[table.status == "too_long"].llr.isna().all()
    assert table[table.status == "ok"].llr.notna().all()


def _subset_vcf(source: Path, path: Path, records: int) -> Path:
    """The first ``records`` records of the real VCF, bgzipped and indexed."""
    with pysam.VariantFile(str(source)) as src:
        dst = pysam.VariantFile(str(path), "wz", header=src.header)
        for i, record in enumerate(src):
            if i >= records:
                break
            dst.write(record)
        dst.close()
    pysam.tabix_index(str(path), preset="vcf", force=True)
    return path


@pytest.fixture(scope="module")
def subset_vcf(kgp_vcf, tmp_path_factory) -> Path:
    """First 1,200 records of the real VCF: SNVs, indels, multi-allelic and symbolic alleles."""
    return _subset_vcf(kgp_vcf, tmp_path_factory.mktemp("subset") / "head.vcf.gz", 1200)


def _args(checkpoint: Path, fasta: Path, vcf: Path, out: Path, *extra: str) -> list[str]:
    return ["score-variants", "-c", str(checkpoint), "--fasta", str(fasta), "--vcf", str(vcf),
            "--out", str(out), "--window", "16", "--chunk-size", "300", "--batch-size", "32",
            *extra]  # fmt: skip


def test_vcf_gz_output_reads_back_with_pysam(checkpoints, chr20_reference, subset_vcf, tmp_path):
    out_vcf, out_tsv = tmp_path / "scored.vcf.gz", tmp_path / "scored.tsv"
    for out in (out_vcf, out_tsv):
        res = invoke(_args(checkpoints["goat"], chr20_reference, subset_vcf, out))
        assert res.exit_code == 0, res.output + str(res.exception)
    assert Path(str(out_vcf) + ".tbi").is_file()
    table = pd.read_csv(out_tsv, sep="\t")
    with pysam.VariantFile(str(out_vcf)) as scored, pysam.VariantFile(str(subset_vcf)) as src:
        info = scored.header.info["GOATDNA_LLR"]
        assert (info.number, info.type) == ("A", "Float")
        values = []
        for a, b in zip(scored, src, strict=True):
            assert (a.chrom, a.pos, a.ref, a.alts, a.info["AF"]) == (
                b.chrom, b.pos, b.ref, b.alts, b.info["AF"],
            )  # fmt: skip
            values.extend(a.info.get("GOATDNA_LLR", (None,) * len(a.alts)))
        assert len(list(scored.fetch("20", 1_010_000, 1_011_000))) > 0  # the index works
    assert len(values) == len(table)
    for value, row in zip(values, table.itertuples(), strict=True):
        if row.status == "ok":
            assert value == pytest.approx(row.llr, rel=1e-5, abs=1e-5)  # 6 significant digits
        else:
            assert value is None
    assert (table.status == "symbolic").any() and (table.status == "ok").any()


def test_resume_is_byte_identical(checkpoints, chr20_reference, subset_vcf, tmp_path, monkeypatch):
    import goatdna.inference.variant_run as variant_run

    whole, resumed = tmp_path / "whole.tsv", tmp_path / "resumed.tsv"
    args = _args(checkpoints["goat"], chr20_reference, subset_vcf, whole)
    assert invoke(args).exit_code == 0

    save = variant_run._save_chunk
    saved: list[int] = []

    def dies_after_two(work, chunk, scores, windows):
        if len(saved) == 2:
            raise KeyboardInterrupt  # as if the job were killed
        save(work, chunk, scores, windows)
        saved.append(chunk)

    monkeypatch.setattr(variant_run, "_save_chunk", dies_after_two)
    args = _args(checkpoints["goat"], chr20_reference, subset_vcf, resumed)
    res = invoke(args)
    assert res.exit_code != 0 and not resumed.exists()  # no partial output
    work = variant_run.work_dir_for(resumed)
    assert sorted(p.name for p in work.glob("chunk-*.npz")) == [
        "chunk-000000.npz",
        "chunk-000001.npz",
    ]
    monkeypatch.setattr(variant_run, "_save_chunk", save)
    res = invoke(args)  # without --resume: refuses to drop the finished chunks
    assert res.exit_code == 2 and "--resume" in res.stderr
    res = invoke([*args, "--resume", "--window", "18"])  # other options: refused
    assert res.exit_code == 2 and "different" in res.stderr
    res = invoke([*args, "--resume"])
    assert res.exit_code == 0, res.output + str(res.exception)
    assert "resumed: 2 chunk(s)" in res.stdout
    assert resumed.read_bytes() == whole.read_bytes()
    assert not work.exists()


@pytest.mark.slow
def test_two_processes_give_the_output_of_one(checkpoints, chr20_reference, subset_vcf, tmp_path):
    one, two = tmp_path / "one.tsv", tmp_path / "two.tsv"
    assert invoke(_args(checkpoints["goat"], chr20_reference, subset_vcf, one)).exit_code == 0
    cmd = [sys.executable, "-m", "goatdna.cli.app",
           *_args(checkpoints["goat"], chr20_reference, subset_vcf, two),
           "--accelerator", "cpu", "--devices", "2"]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "GLOBAL_RANK: 1, MEMBER: 2/2" in proc.stderr + proc.stdout  # two ranks really ran
    assert two.read_bytes() == one.read_bytes()


def _bad(args: list[str], message: str, out: Path) -> None:
    assert_one_error_line(invoke(args), message)
    leftovers = [
        p.name for p in out.parent.iterdir() if p.name.startswith((out.name, f".{out.name}"))
    ]
    assert leftovers == [], leftovers  # no partial output, no work folder


def test_bad_inputs_are_one_line_errors_without_output(checkpoints, crafted, tmp_path) -> None:
    fasta, vcf = crafted
    ckpt = str(checkpoints["goat"])
    out = tmp_path / "o" / "scores.vcf.gz"
    out.parent.mkdir()

    def args(**change: str) -> list[str]:
        opts = {"-c": ckpt, "--fasta": str(fasta), "--vcf": str(vcf), "--out": str(out),
                "--window": "8", **change}  # fmt: skip
        return ["score-variants", *[x for kv in opts.items() for x in kv]]

    not_vcf = tmp_path / "notes.vcf"
    not_vcf.write_text("this is not a VCF\n")
    _bad(args(**{"--vcf": str(not_vcf)}), "not a readable VCF", out)
    _bad(args(**{"--vcf": str(tmp_path / "absent.vcf")}), "file not found", out)
    unsorted = _write_vcf(
        tmp_path / "unsorted.vcf",
        ["chr1"],
        ["chr1\t20\t.\tA\tC\t.\t.\t.", "chr1\t5\t.\tT\tG\t.\t.\t."],
    )
    _bad(args(**{"--vcf": str(unsorted)}), "not sorted", out)
    renamed = _write_vcf(tmp_path / "b37.vcf", ["1"], ["1\t5\t.\tT\tG\t.\t.\t."])
    _bad(args(**{"--vcf": str(renamed)}), "the FASTA names it 'chr1'", out)
    _bad(args(**{"--window": "1"}), "--window 1: must be >= 2", out)
    not_ckpt = tmp_path / "model.ckpt"
    not_ckpt.write_bytes(b"\x00not a checkpoint")
    _bad(args(**{"-c": str(not_ckpt)}), "not a readable goatdna checkpoint", out)
    _bad(args(**{"--out": str(tmp_path / "o" / "scores.csv")}), "must end in .tsv", out)
    _bad(args(**{"--fasta": str(tmp_path / "absent.fa")}), "does not exist", out)
    _bad(args(**{"--strands": "reverse"}), "--strands 'reverse'", out)
    _bad(args(**{"--devices": "zero"}), "--devices", out)


def test_parquet_output_matches_tsv(checkpoints, crafted, tmp_path) -> None:
    pytest.importorskip("pyarrow", reason="pyarrow (a declared dependency) is not installed here")
    fasta, vcf = crafted
    tables = {}
    for suffix in ("tsv", "parquet"):
        out = tmp_path / f"scores.{suffix}"
        args = ["score-variants", "-c", str(checkpoints["goat"]), "--fasta", str(fasta),
                "--vcf", str(vcf), "--out", str(out), "--window", "8"]  # fmt: skip
        assert invoke(args).exit_code == 0
        tables[suffix] = pd.read_parquet(out) if suffix == "parquet" else pd.read_csv(out, sep="\t")
    assert list(tables["parquet"].columns) == list(tables["tsv"].columns)
    assert tables["parquet"].status.tolist() == tables["tsv"].status.tolist()
    np.testing.assert_allclose(tables["parquet"].llr, tables["tsv"].llr, atol=1e-6)


# ---------------------------------------------------------------- tables (--variants)


def _vcf_as_table(vcf: Path) -> pd.DataFrame:
    """One row per ALT allele, with carried columns of several types."""
    rows = []
    with pysam.VariantFile(str(vcf)) as handle:
        for record in handle:
            for alt in record.alts:
                rows.append(
                    {"chrom": record.chrom, "pos": record.pos, "ref": record.ref, "alt": alt}
                )
    table = pd.DataFrame(rows)
    n = len(table)
    table.insert(0, "id", [f"v{i}" for i in range(n)])
    table["label"] = np.arange(n) % 2
    table["effect"] = np.linspace(-1, 1, n)
    table["subset"] = ["a", "b", "c"] * (n // 3) + ["a", "b", "c"][: n % 3]
    table["flag"] = np.arange(n) % 3 == 0
    return table


def _run(args: list[str]):
    res = invoke(args)
    assert res.exit_code == 0, res.output + str(res.exception)
    return res


@pytest.mark.parametrize("suffix", ["tsv", "csv", "parquet"])
def test_table_gives_the_vcf_scores_and_keeps_its_columns(checkpoints, crafted, tmp_path, suffix):
    fasta, vcf = crafted
    table = _vcf_as_table(vcf)
    source = tmp_path / f"variants.{suffix}"
    if suffix == "parquet":
        table.to_parquet(source, index=False)
    else:
        table.to_csv(source, sep="\t" if suffix == "tsv" else ",", index=False)
    common = ["-c", str(checkpoints["goat"]), "--fasta", str(fasta), "--window", "12"]
    out_vcf, out = (
        tmp_path / "from_vcf.tsv",
        tmp_path / f"from_table.{suffix.replace('csv', 'tsv')}",
    )
    _run(["score-variants", *common, "--vcf", str(vcf), "--out", str(out_vcf)])
    res = _run(["score-variants", *common, "--variants", str(source), "--out", str(out)])
    assert "missing_contig" in res.stdout
    from_vcf = pd.read_csv(out_vcf, sep="\t", dtype={"chrom": str})
    got = (
        pd.read_parquet(out)
        if suffix == "parquet"
        else pd.read_csv(out, sep="\t", dtype={"chrom": str})
    )
    carried = ["id", "label", "effect", "subset", "flag"]
    assert list(got.columns[:4]) == ["chrom", "pos", "ref", "alt"]
    assert list(got.columns[4:9]) == carried
    assert list(got.columns[9:]) == [
        c for c in from_vcf.columns if c not in ("chrom", "pos", "id", "ref", "alt")
    ]
    assert got.status.tolist() == from_vcf.status.tolist()
    np.testing.assert_allclose(got.llr, from_vcf.llr, atol=1e-6, equal_nan=True)
    if suffix == "parquet":  # types kept exactly
        for column in carried:
            assert got[column].dtype == table[column].dtype, column
        pd.testing.assert_frame_equal(got[carried], table[carried])
    else:
        assert got.flag.dtype == bool and got.label.dtype == np.int64
        np.testing.assert_allclose(got.effect, table.effect, atol=1e-6)


def test_bad_tables_are_one_line_errors_naming_row_and_column(checkpoints, crafted, tmp_path):
    fasta, _ = crafted
    out = tmp_path / "o" / "scores.tsv"
    out.parent.mkdir()

    def args(source: Path, target: Path = out) -> list[str]:
        return ["score-variants", "-c", str(checkpoints["goat"]), "--fasta", str(fasta),
                "--variants", str(source), "--out", str(target), "--window", "8"]  # fmt: skip

    def table(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    header = "chrom\tpos\tref\talt\n"
    _bad(args(table("a.tsv", "chrom\tpos\tref\nchr1\t3\tG\n")), "no column 'alt'", out)
    _bad(
        args(table("b.tsv", header + "chr1\t3\tG\tA\nchr1\tx3\tG\tA\n")),
        "row 2, column pos: 'x3'",
        out,
    )
    _bad(args(table("c.tsv", header + "chr1\t0\tG\tA\n")), "row 1, column pos", out)
    _bad(args(table("d.tsv", header + "chr1\t3.5\tG\tA\n")), "row 1, column pos", out)
    _bad(args(table("e.tsv", header + "chr1\t3\tG\tA\nchr1\t4\tG\t\n")), "row 2, column alt", out)
    _bad(
        args(table("f.tsv", "chrom\tpos\tref\talt\tllr\nchr1\t3\tG\tA\t1\n")),
        "column 'llr' is one",
        out,
    )
    empty = tmp_path / "empty.tsv"  # a header alone: an empty output, as for an empty VCF
    assert invoke(args(table("g.tsv", header), empty)).exit_code == 0
    assert pd.read_csv(empty, sep="\t").empty
    _bad(args(tmp_path / "absent.tsv"), "--variants", out)
    ok = table("h.tsv", header + "chr1\t3\tG\tA\n")
    vcf_out = out.parent / "scores.vcf.gz"
    _bad(args(ok, vcf_out), "is a table; write .tsv or .parquet", vcf_out)


def test_the_summary_the_command_prints_is_built_by_the_library() -> None:
    """`score-variants` prints `summary_table` and `no_score_warning`: counts by status with
    their meaning, and a warning (with the assembly hint) when no allele was scored."""
    from rich.console import Console

    from goatdna.inference.variant_run import (
        ScoreVariantsSummary,
        no_score_warning,
        summary_table,
    )

    counts = {"missing_contig": 1200, "ref_mismatch": 34}
    missed = ScoreVariantsSummary(
        Path("o.tsv"), 1234, 1000, 64, counts, {"ref_mismatch": "see the FASTA"}
    )
    console = Console(record=True, width=200)
    console.print(summary_table(missed))
    text = console.export_text()
    assert "1,234 ALT alleles of 1,000 records (window 64)" in text
    assert "│ missing_contig │   1,200 │ the FASTA has no contig of that name │" in text
    assert "│ ref_mismatch   │      34 │ see the FASTA                        │" in text
    assert no_score_warning(missed) == (
        "warning: no allele was scored: most are missing_contig, the FASTA has no contig of "
        "that name (is the FASTA the VCF's assembly? their contig names must match)"
    )
    scored = ScoreVariantsSummary(Path("o.tsv"), 2, 2, 64, {"ok": 1, "identical": 1})
    assert no_score_warning(scored) is None
    assert no_score_warning(ScoreVariantsSummary(Path("o.tsv"), 0, 0, 64, {})) is None
