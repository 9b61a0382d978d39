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
