"""FASTA -> validated byte tokens -> shards, and the reader for them. Knows nothing of torch."""

from goatdna.data_prep.options import PrepareOptions
from goatdna.data_prep.prepare import prepare_genome, prepare_synthetic
from goatdna.data_prep.shards import Record, ShardedGenome
from goatdna.data_prep.synthetic import SyntheticGenomeConfig, write_synthetic_fasta
from goatdna.io.tokens import (
    BASES,
    COMPLEMENT,
    REPEAT_FLAG,
    TOKEN_MASK,
    TOKEN_TABLE,
    VOCAB_SIZE,
    decode,
    encode,
    reverse_complement,
)
from goatdna.io.tokens import reverse_complement as reverse_complement_tokens

__all__ = [
    "BASES",
    "COMPLEMENT",
    "REPEAT_FLAG",
    "TOKEN_MASK",
    "TOKEN_TABLE",
    "VOCAB_SIZE",
    "PrepareOptions",
    "Record",
    "ShardedGenome",
    "SyntheticGenomeConfig",
    "decode",
    "encode",
    "prepare_genome",
    "prepare_synthetic",
    "reverse_complement",
    "reverse_complement_tokens",
    "write_synthetic_fasta",
]
