import numpy as np
import pytest

from goatdna.data_prep import REPEAT_FLAG, TOKEN_MASK, decode, encode, reverse_complement_tokens
from goatdna.errors import GoatDNAError


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
    assert decode(reverse_complement_tokens(encode("AACGTN"))) == "NACGTT"


def test_model_vocabulary_is_the_shards_vocabulary() -> None:
    """The ids are written twice, once per side of the torch boundary (see goatdna/model/vocab.py)."""
    from goatdna.data_prep import tokens
    from goatdna.hf.tokenization_goatdna import VOCAB
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
