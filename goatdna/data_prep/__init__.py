"""FASTA -> validated byte tokens -> shards, and the reader for them. Knows nothing of torch."""

from goatdna.data_prep.tokens import (
    BASES,
    COMPLEMENT,
    REPEAT_FLAG,
    TOKEN_MASK,
    TOKEN_TABLE,
    VOCAB_SIZE,
    decode,
    encode,
    reverse_complement_tokens,
)

__all__ = [
    "BASES",
    "COMPLEMENT",
    "REPEAT_FLAG",
    "TOKEN_MASK",
    "TOKEN_TABLE",
    "VOCAB_SIZE",
    "decode",
    "encode",
    "reverse_complement_tokens",
]
