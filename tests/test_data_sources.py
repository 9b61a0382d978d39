"""Several FASTA files in one dataset: unique record names, per-source hold-outs, the manifest's
sources, `info`, resume, and the one-line errors of `goatdna prepare a.fa b.fa --source-names`."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pysam
import pytest
from helpers import invoke

from goatdna import faults
from goatdna.data_prep import ShardedGenome, SyntheticGenomeConfig, write_synthetic_fasta

OUTPUT_FILES = ("train.bin", "val.bin", "test.bin", "manifest.json")


def _cli(*args) -> object:
    return invoke(args, env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def fastas(tmp_path_factory) -> dict[str, Path]:
    """human: bgzip, contigs syn1..syn3; mouse: plain gzip, syn1..syn2 (syn1, syn2 clash);
    fly: plain text, contigs fly1..fly2 (no clash)."""
    root = tmp_path_factory.mktemp("sources")
    human = write_synthetic_fasta(
        root / "human.fa", SyntheticGenomeConfig(total_length=60_000, n_contigs=3, seed=1)
    )
    pysam.tabix_compress(str(human), str(root / "human.fa.bgz"))
    mouse = write_synthetic_fasta(
        root / "mouse.fa", SyntheticGenomeConfig(total_length=40_000, n_contigs=2, seed=2)
    )
    (root / "mouse.fa.gz").write_bytes(gzip.compress(mouse.read_bytes()))
    fly = write_synthetic_fasta(
        root / "fly.fa",
        SyntheticGenomeConfig(total_length=30_000, n_contigs=2, seed=3, contig_prefix="fly"),
    )
    return {
        "human": root / "human.fa.bgz",
        "mouse": root / "mouse.fa.gz",
        "fly": fly,
        "human_plain": human,
    }


@pytest.fixture(scope="module")
def multi(fastas, tmp_path_factory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("multi") / "out"
    result = _cli(
        "prepare", fastas["human"], fastas["mouse"], fastas["fly"],
        "--source-names", "human,mouse,fly", "--out", out, "--workers", "1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out, result


def _single(fasta: Path, out: Path, *extra) -> ShardedGenome:
    result = _cli("prepare", fasta, "--out", out, "--workers", "1", *extra)
    assert result.exit_code == 0, result.output
    return ShardedGenome(out)


def test_clashing_contig_names_are_prefixed_with_their_source(multi, fastas, tmp_path):
    out, result = multi
    genome = ShardedGenome(out)
    manifest = genome.manifest
    assert "source" not in manifest
    assert [s["name"] for s in manifest["sources"]] == ["human", "mouse", "fly"]
    assert [s["compression"] for s in manifest["sources"]] == ["bgzip", "gzip", "none"]
    assert manifest["sources"][0]["renamed"] == {"syn1": "human:syn1", "syn2": "human:syn2"}
    assert manifest["sources"][1]["renamed"] == {"syn1": "mouse:syn1", "syn2": "mouse:syn2"}
    assert manifest["sources"][2]["renamed"] == {}
    assert "human:syn1" in result.stderr and "source:contig" in result.stderr
    names = {(r.source, r.name) for r in genome.records()}
    assert names == {
        ("human", "human:syn1"), ("human", "human:syn2"), ("human", "syn3"),
        ("mouse", "mouse:syn1"), ("mouse", "mouse:syn2"), ("fly", "fly1"), ("fly", "fly2"),
    }  # fmt: skip
    assert all(r["source"] in {"human", "mouse", "fly"} for r in manifest["records"])
    assert genome.source_names() == ["human", "mouse", "fly"]
    genome.verify()
    # every record holds exactly the bytes the same FASTA prepared alone gives it
    for name, fasta in (("human", fastas["human_plain"]), ("mouse", fastas["mouse"])):
        alone = _single(fasta, tmp_path / name)
        expected = {(r.name, r.split): r.sha256 for r in alone.records()}
        renamed = genome.sources()[genome.source_names().index(name)]["renamed"]
        back = {new: old for old, new in renamed.items()}
        got = {(back.get(r.name, r.name), r.split): r.sha256 for r in genome.records()}
        assert {k: got[k] for k in expected} == expected


def test_holdouts_apply_per_source(fastas, tmp_path):
    out = tmp_path / "out"
    result = _cli(
        "prepare", fastas["human"], fastas["mouse"], "--source-names", "human,mouse",
        "--val-contigs", "human:syn1", "--test-contigs", "syn2", "--out", out, "--workers", "1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    genome = ShardedGenome(out)
    splits = {(r.source, r.name): r.split for r in genome.records()}
    assert splits[("human", "human:syn1")] == "val"
    assert splits[("human", "human:syn2")] == "test"  # a bare name: every source holding it
    assert splits[("mouse", "mouse:syn2")] == "test"
    assert splits[("human", "syn3")] == "train"
    assert splits[("mouse", "mouse:syn1")] == "train"  # human:syn1 names human's only
    modes = [s["split_mode"] for s in genome.sources()]
    assert modes == ["contigs", "contigs"]


def test_fraction_holdouts_split_every_source(multi):
    genome = ShardedGenome(multi[0])
    for source in genome.source_names():
        mine = [r for r in genome.records() if r.source == source]
        assert {r.split for r in mine} == {"train", "val", "test"}


def test_info_shows_bases_per_split_per_source(multi):
    out, _ = multi
    result = _cli("info", out)
    assert result.exit_code == 0, result.output
    assert "sources (3)" in result.stdout
    genome = ShardedGenome(out)
    for source in genome.source_names():
        mine = [r for r in genome.records() if r.source == source]
        bases = [sum(r.length for r in mine if r.split == s) for s in ("train", "val", "test")]
        cells = r"\s*│\s*".join([source, r"\S+", str(len(mine)), *(f"{b:,}" for b in bases)])
        assert __import__("re").search(cells, result.stdout), (source, result.stdout)


def test_single_fasta_manifest_keeps_its_shape_and_reads_as_one_source(fastas, tmp_path):
    genome = _single(fastas["fly"], tmp_path / "fly")
    assert "sources" not in genome.manifest and genome.manifest["source"]["name"] == "fly.fa"
    assert all("source" not in r for r in genome.manifest["records"])
    assert genome.source_names() == ["fly"]
    assert {r.source for r in genome.records()} == {"fly"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--source-names", "a"], "--source-names gives 1 names for 2 FASTA files"),
        (["--source-names", "a,a"], "'a' is given twice"),
        (["--source-names", "a,b c"], "not a valid source name"),
        (["--source-names", "a,b", "--val-contigs", "chrZ"], "--val-contigs: contig 'chrZ'"),
        (["--source-names", "a,b", "--test-contigs", "a:nope"], "source a ("),
    ],
)
def test_bad_source_options_are_one_line_errors(fastas, tmp_path, args, message):
    out = tmp_path / "out"
    result = _cli("prepare", fastas["human"], fastas["mouse"], "--out", out, *args)
    assert result.exit_code == 2, result.output
    last = result.stderr.strip().splitlines()[-1]  # after any console message
    assert last.startswith("error: ") and message in last
    assert not out.exists()


def test_default_source_names_come_from_the_files_and_must_differ(fastas, tmp_path):
    result = _cli("prepare", fastas["human"], fastas["human_plain"], "--out", tmp_path / "o")
    assert result.exit_code == 2 and "both be source 'human'" in result.stderr


def test_the_same_fasta_twice_under_two_names_is_refused(fastas, tmp_path):
    """It would double the genome's bases in every split: one line naming the file."""
    out = tmp_path / "o"
    result = _cli("prepare", fastas["human"], fastas["human"], "--source-names", "a,b",
                  "--out", out)  # fmt: skip
    assert result.exit_code == 2, result.output
    assert f"{fastas['human']} is given twice (as sources 'a' and 'b')" in result.stderr
    assert not out.exists()


@pytest.mark.slow
def test_killed_multi_source_run_resumes_to_identical_bytes(fastas, multi, tmp_path):
    out = tmp_path / "out"
    args = [
        fastas["human"], fastas["mouse"], fastas["fly"],
        "--source-names", "human,mouse,fly", "--out", out, "--workers", "1",
    ]  # fmt: skip
    env = {**os.environ, **faults.arm("prepare.record_journaled", 10)}
    cmd = [sys.executable, "-m", "goatdna.cli.app", "prepare", *map(str, args)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert len(list((out / ".prepare").glob("record-*.json"))) == 10
    other = _cli(*["prepare", *args[:2], "--source-names", "human,mouse", *args[5:], "--resume"])
    assert other.exit_code == 2 and "--resume with different inputs" in other.stderr
    resumed = _cli("prepare", *args, "--resume")
    assert resumed.exit_code == 0, resumed.output
    reference = multi[0]
    for name in OUTPUT_FILES:
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    again = _cli("prepare", *args)
    assert again.exit_code == 0 and "nothing to do" in again.stderr
    assert json.loads((out / "manifest.json").read_text())["sources"][0]["name"] == "human"


def test_split_bed_names_contigs_per_source(fastas, tmp_path):
    bed = tmp_path / "split.bed"
    bed.write_text(
        "human:syn1\t0\t5000\ttrain\nhuman:syn1\t5000\t6000\tval\nsyn3\t0\t4000\ttest\n"
        "mouse:syn2\t100\t3000\ttrain\n"
    )
    out = tmp_path / "out"
    args = [fastas["human"], fastas["mouse"], "--source-names", "human,mouse", "--out", out]
    result = _cli("prepare", *args, "--split-bed", bed, "--workers", "1")
    assert result.exit_code == 0, result.output
    got = [(r.source, r.name, r.split, r.start, r.end) for r in ShardedGenome(out).records()]
    assert got == [
        ("human", "human:syn1", "train", 0, 5000), ("human", "human:syn1", "val", 5000, 6000),
        ("human", "syn3", "test", 0, 4000), ("mouse", "mouse:syn2", "train", 100, 3000),
    ]  # fmt: skip
    bed.write_text("syn1\t0\t100\ttrain\n")  # in both FASTA files: which one?
    ambiguous = _cli("prepare", *args[:-1], tmp_path / "o2", "--split-bed", bed)
    assert ambiguous.exit_code == 2 and "write it as source:contig" in ambiguous.stderr


def test_contigs_option_selects_per_source(fastas, tmp_path):
    out = tmp_path / "out"
    result = _cli(
        "prepare", fastas["human"], fastas["fly"], "--source-names", "human,fly",
        "--contigs", "human:syn3,fly1", "--out", out, "--workers", "1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    names = {(r.source, r.name) for r in ShardedGenome(out).records()}
    assert names == {("human", "syn3"), ("fly", "fly1")}
