"""Reading FASTA: soft-mask, N and IUPAC handling, CRLF, gzip/bgzip, and .fai repair."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest
from Bio import bgzf
from helpers import assert_one_error_line, invoke

from goatdna.data_prep import PrepareOptions, ShardedGenome, decode, encode, prepare_genome
from goatdna.io.text import detect_compression

WHOLE = PrepareOptions(workers=1, progress=False, val_fraction=0.0, test_fraction=0.0)

TINY = b">a first contig\nACGTacgtNN\nRYKMSWbdhv\nnnAC\n>b\nGGGG\nCCat\n>empty\n>c\nTTTT\n"
# contig a: 24 bases, c: 4; "empty" has no bases and is left out.


def _prepare(path: Path, out: Path, options: PrepareOptions = WHOLE) -> ShardedGenome:
    return prepare_genome(path, out, options)


def _records(genome: ShardedGenome) -> dict[str, tuple[int, int, int, int]]:
    return {r.name: (r.length, r.n_count, r.softmask_count, r.gc_count) for r in genome.records()}


def test_softmask_n_and_iupac(tmp_path):
    src = tmp_path / "tiny.fa"
    src.write_bytes(TINY)
    genome = _prepare(src, tmp_path / "out")
    data = np.asarray(genome.tokens("train"))
    expected = encode("ACGTacgtNNRYKMSWbdhvnnAC" + "GGGGCCat" + "TTTT")
    np.testing.assert_array_equal(data, expected)
    # the contract, byte by byte: token in the low bits, 0x80 where the source was lowercase
    assert list(data[:10]) == [0, 1, 2, 3, 0x80, 0x81, 0x82, 0x83, 4, 4]
    assert decode(data[:24]) == "ACGTacgtNNNNNNNNnnnnnnAC"
    assert _records(genome) == {
        # (length, N: NN + RYKMSW + bdhv + nn, soft: acgt bdhv nn, GC: CG + cg + C)
        "a": (24, 14, 10, 5),
        "b": (8, 0, 2, 6),
        "c": (4, 0, 0, 0),
    }


def test_crlf_gzip_and_bgzip_give_identical_shards(tmp_path):
    plain = tmp_path / "p.fa"
    plain.write_bytes(TINY)
    crlf = tmp_path / "crlf.fa"
    crlf.write_bytes(TINY.replace(b"\n", b"\r\n"))
    gz = tmp_path / "g.fa.gz"
    gz.write_bytes(gzip.compress(TINY))
    bgz = tmp_path / "b.fa.gz"
    with bgzf.BgzfWriter(str(bgz), "wb") as writer:
        writer.write(TINY)
    assert [detect_compression(p) for p in (plain, gz, bgz)] == ["none", "gzip", "bgzip"]
    reference = _prepare(plain, tmp_path / "o_plain")
    ref_bytes = (reference.root / "train.bin").read_bytes()
    for src in (crlf, gz, bgz):
        genome = _prepare(src, tmp_path / f"o_{src.name}")
        assert (genome.root / "train.bin").read_bytes() == ref_bytes, src.name
        assert [r.sha256 for r in genome.records()] == [r.sha256 for r in reference.records()]
    assert ShardedGenome(tmp_path / "o_g.fa.gz").manifest["source"]["compression"] == "gzip"
    assert (tmp_path / "o_g.fa.gz" / "cache" / "g.fa").is_file()  # decompressed once


def test_gzip_cache_is_announced_and_reused(tmp_path, capsys):
    gz = tmp_path / "g.fa.gz"
    gz.write_bytes(gzip.compress(TINY))
    _prepare(gz, tmp_path / "out")
    assert "decompressing it once" in capsys.readouterr().err
    _prepare(gz, tmp_path / "out", PrepareOptions(**{**WHOLE.__dict__, "force": True}))
    assert "using the decompressed copy" in capsys.readouterr().err


def test_long_contig_read_in_many_chunks_matches(tmp_path):
    """Chunk boundaries (not multiples of the line width) must not drop or repeat bases."""
    rng = np.random.default_rng(3)
    seq = "".join(rng.choice(list("ACGTacgtN"), 10_007))
    src = tmp_path / "long.fa"
    src.write_text(">x\n" + "\n".join(seq[i : i + 61] for i in range(0, len(seq), 61)) + "\n")
    opts = PrepareOptions(**{**WHOLE.__dict__, "chunk_bases": 997})
    genome = _prepare(src, tmp_path / "out", opts)
    assert decode(genome.tokens("train")) == seq.replace("N", "N")


def test_stale_fai_is_rebuilt(tmp_path, capsys):
    src = tmp_path / "s.fa"
    src.write_bytes(b">a\nACGT\n")
    _prepare(src, tmp_path / "o1")
    fai = Path(str(src) + ".fai")
    assert fai.is_file()
    # the FASTA changes after its index was written
    src.write_bytes(b">a\nACGTAC\nGG\n>z\nTT\n")
    old = src.stat().st_mtime - 100
    os.utime(fai, (old, old))
    genome = _prepare(src, tmp_path / "o2")
    assert "older than" in capsys.readouterr().err
    assert decode(genome.tokens("train")) == "ACGTACGGTT"


@pytest.mark.parametrize(
    "bad_fai",
    [
        "a\t10\t8\t4\t5\nb\t6\t30\t4\t5\n",  # another file's geometry
        "a\t3\t3\t3\t4\n",  # wrong length, one contig missing
        "nonsense\n",  # not an index at all
        "a\t10\t3\t10\t11\na\t2\t3\t4\t5\n",  # duplicate keys
    ],
)
def test_mismatched_fai_is_rebuilt(tmp_path, capsys, bad_fai):
    src = tmp_path / "m.fa"
    src.write_bytes(TINY)
    fai = Path(str(src) + ".fai")
    fai.write_text(bad_fai)
    newer = src.stat().st_mtime + 100
    os.utime(fai, (newer, newer))  # newer than the FASTA: pyfaidx alone would trust it
    genome = _prepare(src, tmp_path / "out")
    assert "does not match" in capsys.readouterr().err
    assert decode(genome.tokens("train")) == "ACGTacgtNNNNNNNNnnnnnnACGGGGCCatTTTT"


@pytest.mark.parametrize(
    "data",
    [
        b">a\nACGT\nACGT\n>b\nAC",  # no final newline
        b";comment line\n>a\nACGT\nACGT\n\n>b\nAC\n\n",  # comment first, blank lines between
        b">a\r\nACGT\r\nACGT\r\n>b\r\nAC",  # CRLF without a final line break
    ],
)
def test_line_layout_edge_cases(tmp_path, data):
    src = tmp_path / "e.fa"
    src.write_bytes(data)
    genome = _prepare(src, tmp_path / "out")
    assert decode(genome.tokens("train")) == "ACGTACGTAC"
    assert [(r.name, r.length) for r in genome.records()] == [("a", 8), ("b", 2)]


def test_file_names_that_lie_about_compression(tmp_path):
    plain_named_gz = tmp_path / "plain.fa.gz"
    plain_named_gz.write_bytes(TINY)
    bgz_named_fa = tmp_path / "bgzip.fa"
    with bgzf.BgzfWriter(str(bgz_named_fa), "wb") as writer:
        writer.write(TINY)
    expected = "ACGTacgtNNNNNNNNnnnnnnACGGGGCCatTTTT"
    for src in (plain_named_gz, bgz_named_fa):
        genome = _prepare(src, tmp_path / f"o_{src.name}")
        assert decode(genome.tokens("train")) == expected


def test_a_rejected_fasta_leaves_no_fresh_index(backbone: Path, tmp_path: Path) -> None:
    fasta = tmp_path / "dup.fa"
    fasta.write_text(">a\nACGTACGTAC\n>a\nACGTACGTAC\n")  # a name twice: pyfaidx refuses it
    bed = tmp_path / "r.bed"
    bed.write_text("a\t0\t8\n")
    res = invoke(["embed", "-c", str(backbone), "--fasta", str(fasta), "--bed",
                              str(bed), "--out", str(tmp_path / "e.npz")])  # fmt: skip
    line = assert_one_error_line(res, "duplicate contig name 'a'")  # the shared reader's check
    assert "bgzip" not in line  # the file is not compressed: no gzip advice
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dup.fa", "r.bed"]
