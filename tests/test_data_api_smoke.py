"""The contract API on the shared synthetic fixture: reader, records, memmaps, verify."""

from __future__ import annotations

import numpy as np
import pytest

from goatdna.data_prep import Record, ShardedGenome, decode
from goatdna.errors import GoatDNAError


def test_synthetic_shards_contract(synthetic_shards):
    genome = ShardedGenome(synthetic_shards)
    assert genome.split_names() == ["train", "val", "test"]
    total = sum(genome.split_length(s) for s in genome.split_names())
    assert total == 1_500_000
    for split in genome.split_names():
        tokens = genome.tokens(split)
        assert isinstance(tokens, np.memmap) and tokens.dtype == np.uint8
        assert tokens.shape == (genome.split_length(split),)
        records = genome.records(split)
        assert all(isinstance(r, Record) and r.split == split for r in records)
        # records tile the split file in order
        assert records[0].offset == 0
        for a, b in zip(records, records[1:], strict=False):
            assert b.offset == a.offset + a.length
        assert records[-1].offset + records[-1].length == genome.split_length(split)
        assert set(np.unique(tokens & 0x7F)) <= {0, 1, 2, 3, 4}
    assert len(genome.manifest_sha256) == 64
    genome.verify()


def test_unknown_split_and_missing_dir(synthetic_shards, tmp_path):
    genome = ShardedGenome(synthetic_shards)
    with pytest.raises(GoatDNAError, match="unknown split 'dev'"):
        genome.tokens("dev")
    with pytest.raises(GoatDNAError, match="does not exist"):
        ShardedGenome(tmp_path / "nope")
    with pytest.raises(GoatDNAError, match="no manifest.json"):
        ShardedGenome(tmp_path)


def test_record_decodes_to_source(synthetic_shards):
    genome = ShardedGenome(synthetic_shards)
    rec = genome.records("val")[0]
    text = (synthetic_shards / "synthetic.fa").read_text()
    contig = text.split(">")[1 + int(rec.name.removeprefix("syn")) - 1]
    seq = "".join(contig.splitlines()[1:])
    data = genome.tokens("val")[rec.offset : rec.offset + rec.length]
    assert decode(data) == seq[rec.start : rec.end]
