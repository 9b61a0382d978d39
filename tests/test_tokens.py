import numpy as np
import pytest

from goatdna.errors import GoatDNAError
from goatdna.io.tokens import (
    REPEAT_FLAG,
    TOKEN_MASK,
    decode,
    encode,
    reverse_complement,
    reverse_complement_text,
)


def test_token_table_is_the_on_disk_contract():
    assert encode("ACGTN").tolist() == [0, 1, 2, 3, 4]
    assert encode("acgtn").tolist() == [0x80, 0x81, 0x82, 0x83, 0x84]
    assert encode("RYKMSWBDHV").tolist() == [4] * 10
    assert (encode("rykmswbdhv") & TOKEN_MASK).tolist() == [4] * 10
    assert all(encode("rykmswbdhv") & REPEAT_FLAG)


def test_decode_restores_case_and_round_trips():
    seq = "ACGTNacgtnNNAcg"
    assert decode(encode(seq)) == seq
    assert encode(seq).dtype == np.uint8


@pytest.mark.parametrize("bad", ["ACGU", "AC1G", "ACE", "AC*", "ACGT\u00e9"])
def test_invalid_characters_name_the_position(bad):
    with pytest.raises(GoatDNAError, match="position"):
        encode(bad)


def test_reverse_complement():
    assert decode(reverse_complement(encode("AACGTN"))) == "NACGTT"


def test_reverse_complement_of_rows_is_each_rows() -> None:
    """Training windows reverse-complement a (B, W) block row by row with the same function."""
    rows = np.stack([encode("AACGT"), encode("GGNTA")])
    both = reverse_complement(rows)
    assert [decode(r) for r in both] == ["ACGTT", "TANCC"]
    assert both.tolist() == [reverse_complement(r).tolist() for r in rows]


def test_reverse_complement_text_keeps_iupac_and_case() -> None:
    assert reverse_complement_text("ACGTNacgtn") == "nacgtNACGT"
    assert reverse_complement_text("RYKMSWBDHV") == "BDHVWSKMRY"
    text = "ACgtNRykmsWBdhv"
    assert reverse_complement_text(reverse_complement_text(text)) == text
    # its tokens are the token reverse complement (IUPAC codes are N as tokens)
    assert decode(encode(reverse_complement_text("ACGTRY")) & TOKEN_MASK) == decode(
        reverse_complement(encode("ACGTRY") & TOKEN_MASK)
    )


def test_unknown_characters_raise_or_become_n() -> None:
    """One table, one switch: FASTA and tables raise on non-DNA; VCF alleles store N."""
    with pytest.raises(GoatDNAError, match="position 3"):
        encode("AC*T")
    assert encode("AC*TR", unknown="N").tolist() == [0, 1, 4, 3, 4]
    assert encode("acgu", unknown="N").tolist() == [0x80, 0x81, 0x82, 4]
    with pytest.raises(GoatDNAError, match="ASCII"):
        encode("AC\u00e9", unknown="N")


def test_model_vocabulary_is_the_shards_vocabulary() -> None:
    """The ids are written twice, once per side of the torch boundary (see goatdna/model/vocab.py)."""
    from goatdna.hf.tokenization_goatdna import VOCAB
    from goatdna.io import tokens
    from goatdna.model import IGNORE_TARGET, ModelConfig, vocab
    from goatdna.model.classifier import COMPLEMENT_TOKENS, PAD_TOKEN

    ids = ("A", "C", "G", "T", "N")
    assert [getattr(vocab, b) for b in ids] == [getattr(tokens, b) for b in ids]
    assert vocab.BASES == tokens.BASES
    assert vocab.VOCAB_SIZE == tokens.VOCAB_SIZE == ModelConfig().vocab_size
    assert vocab.NUM_BASES == tokens.NUM_BASES
    assert list(vocab.COMPLEMENT) == tokens.COMPLEMENT.tolist() == list(COMPLEMENT_TOKENS)
    assert IGNORE_TARGET == PAD_TOKEN == tokens.N
    assert VOCAB == tokens.TOKEN_TABLE


def test_vcf_alleles_encode_every_non_base_as_n() -> None:
    """`encode_allele` (now `encode(..., unknown="N")`) keeps its old table: ACGTN by letter,
    any case, everything else N."""
    from goatdna.inference.variants import encode_allele
    from goatdna.io.tokens import TOKEN_TABLE

    text = "".join(chr(b) for b in range(1, 128))
    expected = [TOKEN_TABLE.get(c.upper(), 4) for c in text]
    assert encode_allele(text).tolist() == expected
