"""Real DNA: 1 Mbp of human chr20 (GRCh37, gzipped) prepared and checked against pyfaidx/Biopython."""

from __future__ import annotations

import gzip
import hashlib

import pyfaidx
import pytest
from Bio.SeqUtils import gc_fraction
from helpers import invoke

from goatdna.data_prep import ShardedGenome, decode

# sha256 of the bare bases, from ../shared/data/README.md
SEQUENCE_SHA256 = "a1c9c7a44e911360c3d9eb8a5f28f4bf8bf668e845b05ffded7542d08a6be87d"


@pytest.mark.shared_data
def test_chr20_sample_round_trip(chr20_sample, tmp_path):
    out = tmp_path / "shards"
    result = invoke(["prepare", str(chr20_sample), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "decompressing it once" in result.stderr  # plain gzip: announced cache copy
    assert "holding out the last 5% (val) and 5% (test)" in result.stderr

    # the independent read: our own decompression, pyfaidx's own fetch
    plain = tmp_path / "independent.fa"
    plain.write_bytes(gzip.decompress(chr20_sample.read_bytes()))
    fasta = pyfaidx.Fasta(str(plain), sequence_always_upper=True)
    (name,) = fasta.keys()
    expected = str(fasta[name][:])
    assert len(expected) == 1_000_000
    assert hashlib.sha256(expected.encode()).hexdigest() == SEQUENCE_SHA256

    genome = ShardedGenome(out)
    genome.verify()
    assert genome.split_names() == ["train", "val", "test"]
    pieces = []
    for split in genome.split_names():
        data = genome.tokens(split)
        for rec in genome.records(split):
            assert rec.name == name
            text = decode(data[rec.offset : rec.offset + rec.length])
            assert text.upper() == expected[rec.start : rec.end]
            pieces.append((rec.start, text.upper()))
            # GC count agrees with Biopython on every record
            assert rec.n_count == expected[rec.start : rec.end].count("N")
            acgt = rec.length - rec.n_count
            assert rec.gc_count == round(gc_fraction(expected[rec.start : rec.end]) * acgt)
    assert "".join(t for _, t in sorted(pieces)) == expected
    total_gc = sum(r.gc_count for r in genome.records())
    assert total_gc == round(gc_fraction(expected) * len(expected))
    assert abs(total_gc / 1_000_000 - 0.44729) < 5e-6  # the README's figure

    info = invoke(["info", str(out), "--verify"])
    assert info.exit_code == 0, info.output
    assert "verified: all 3 records" in info.stdout
