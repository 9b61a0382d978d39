"""Contig selection and split plans: every base of a kept contig lands in exactly one split."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from goatdna.data_prep import PrepareOptions, ShardedGenome, decode, prepare_genome

CONTIGS = {
    "chr1": 50,
    "chr2": 37,
    "chr20": 23,
    "chr21": 19,
    "chr1_KI270706v1_random": 11,
    "chrUn_GL000195v1": 9,
    "chr6_GL000250v2_alt": 13,
    "chrEBV": 7,
    "HLA-A*01:01:01:01": 8,
    "chrM": 5,
}


@pytest.fixture
def genome_fa(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    rng = np.random.default_rng(1)
    seqs = {n: "".join(rng.choice(list("ACGTacgtN"), length)) for n, length in CONTIGS.items()}
    text = "".join(
        f">{n}\n" + "\n".join(s[i : i + 10] for i in range(0, len(s), 10)) + "\n"
        for n, s in seqs.items()
    )
    path = tmp_path / "hg.fa"
    path.write_text(text)
    return path, seqs


def _opts(**kw) -> PrepareOptions:
    return PrepareOptions(workers=1, progress=False, **kw)


def _split_contents(genome: ShardedGenome, seqs: dict[str, str]) -> dict[str, list[tuple]]:
    """Check every record decodes to its source interval; return (name, start, end) per split."""
    out: dict[str, list[tuple]] = {}
    for split in genome.split_names():
        data = genome.tokens(split)
        for rec in genome.records(split):
            assert decode(data[rec.offset : rec.offset + rec.length]) == seqs[rec.name][
                rec.start : rec.end
            ].replace("N", "N")
            out.setdefault(split, []).append((rec.name, rec.start, rec.end))
    return out


def _assert_tiles(genome: ShardedGenome, names: list[str]) -> None:
    """Each kept contig is covered exactly once, without gaps, across the splits."""
    for name in names:
        spans = sorted((r.start, r.end) for r in genome.records() if r.name == name)
        assert spans[0][0] == 0 and spans[-1][1] == CONTIGS[name]
        for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False):
            assert a_end == b_start


def test_default_hg38_like_contig_split_and_excludes(tmp_path, genome_fa, capsys):
    path, seqs = genome_fa
    genome = prepare_genome(path, tmp_path / "out", _opts())
    got = _split_contents(genome, seqs)
    assert got == {
        "train": [("chr1", 0, 50), ("chr2", 0, 37), ("chrM", 0, 5)],
        "val": [("chr20", 0, 23)],
        "test": [("chr21", 0, 19)],
    }
    assert genome.manifest["split_mode"] == "contigs"
    assert "left out 5 by --exclude-contigs" in capsys.readouterr().err
    assert genome.split_length("train") == 92


def test_contig_regex_min_length_and_explicit_holdouts(tmp_path, genome_fa):
    path, seqs = genome_fa
    opts = _opts(
        contigs=["chr[0-9]+", "chrEBV", "chrM"],
        min_contig_length=6,
        val_contigs=["chr2"],
        test_contigs=["chr21"],
    )
    genome = prepare_genome(path, tmp_path / "out", opts)
    got = _split_contents(genome, seqs)
    # chrEBV is named exactly: kept despite the default EBV exclusion; chrM (5 bp) is too short;
    # the regex is a full match, so chr1_KI270706v1_random is not selected
    assert got == {
        "train": [("chr1", 0, 50), ("chr20", 0, 23), ("chrEBV", 0, 7)],
        "val": [("chr2", 0, 37)],
        "test": [("chr21", 0, 19)],
    }


def test_tail_fraction_fallback_covers_every_base(tmp_path, genome_fa, capsys):
    path, seqs = genome_fa
    opts = _opts(contigs=["chr1", "chr2"], val_fraction=0.1, test_fraction=0.2)
    genome = prepare_genome(path, tmp_path / "out", opts)
    assert "holding out the last 10% (val) and 20% (test)" in capsys.readouterr().err
    got = _split_contents(genome, seqs)
    assert got["val"] == [("chr1", 35, 40), ("chr2", 26, 30)]
    assert got["test"] == [("chr1", 40, 50), ("chr2", 30, 37)]
    _assert_tiles(genome, ["chr1", "chr2"])
    assert sum(genome.split_length(s) for s in genome.split_names()) == 87


def test_split_bed_records(tmp_path, genome_fa, capsys):
    path, seqs = genome_fa
    bed = tmp_path / "s.bed"
    bed.write_text(
        "# HyenaDNA-style\nchr2\t0\t30\ttrain\nchr1\t10\t20\tvalid\nchr1\t0\t10\ttrain\n"
        "chr1\t20\t50\ttest\nchrM\t0\t5\tval\n"
    )
    genome = prepare_genome(path, tmp_path / "out", _opts(split_bed=bed))
    got = _split_contents(genome, seqs)
    assert got == {
        "train": [("chr1", 0, 10), ("chr2", 0, 30)],
        "val": [("chr1", 10, 20), ("chrM", 0, 5)],
        "test": [("chr1", 20, 50)],
    }
    assert genome.manifest["split_mode"] == "bed"
    assert "bases outside every interval are not kept" in capsys.readouterr().err


def test_manifest_fields(tmp_path, genome_fa):
    path, _ = genome_fa
    genome = prepare_genome(path, tmp_path / "out", _opts())
    m = genome.manifest
    assert m["format"] == "goatdna-shards" and m["format_version"] == 1
    assert m["source"]["name"] == "hg.fa" and m["source"]["size"] == path.stat().st_size
    import hashlib

    assert m["source"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert m["token_table"]["tokens"] == {"A": 0, "C": 1, "G": 2, "T": 3, "N": 4}
    assert m["token_table"]["repeat_flag"] == 0x80
    for split, info in m["splits"].items():
        assert info["length"] == sum(r["length"] for r in m["records"] if r["split"] == split)
        assert (genome.root / info["file"]).stat().st_size == info["length"]
    keys = {
        "name",
        "split",
        "start",
        "end",
        "offset",
        "length",
        "n_count",
        "softmask_count",
        "gc_count",
        "sha256",
    }
    assert all(set(r) == keys for r in m["records"])
    data = genome.tokens("train")
    for rec in genome.records("train"):
        chunk = np.asarray(data[rec.offset : rec.offset + rec.length])
        assert rec.sha256 == hashlib.sha256(chunk.tobytes()).hexdigest()
        assert rec.n_count == int(((chunk & 0x7F) == 4).sum())
        assert rec.softmask_count == int((chunk >= 0x80).sum())
        assert rec.gc_count == int(np.isin(chunk & 0x7F, [1, 2]).sum())
