"""transformers' own common tokenizer tests (tests/test_tokenization_common.py) on GoatDNATokenizer.

The one expected deviation: the tokenizer rejects text that is not nucleotides (a silently
mapped character would change what the model scores), and many common tests feed English
sentences. Each such test is listed in `REJECTS_TEXT` and must fail with exactly that error
(`_rejects_text`); every other common tokenizer test runs unchanged.
"""

from __future__ import annotations

import functools
import unittest
from collections.abc import Callable

from transformers_tests.test_tokenization_common import TokenizerTesterMixin

from goatdna.hf import GoatDNATokenizer

REJECTS_TEXT = (
    "test_batch_encode_plus_batch_sequence_length",
    "test_batch_encode_plus_padding",
    "test_bos_token_with_add_bos_token_false",
    "test_bos_token_with_add_bos_token_true",
    "test_call",
    "test_chat_template",
    "test_chat_template_batched",
    "test_encode_basic_padding",
    "test_encode_plus_with_padding_0",
    "test_encode_plus_with_padding_1",
    "test_mask_output",
    "test_maximum_encoding_length_pair_input",
    "test_number_of_added_tokens",
    "test_pad_token_initialization",
    "test_padding_to_multiple_of",
    "test_right_and_left_truncation",
    "test_save_and_load_tokenizer",
    "test_special_tokens_mask",
    "test_special_tokens_mask_input_pairs",
    "test_token_type_ids",
)
"""Common tokenizer tests that encode English text: each must raise "invalid nucleotide"."""


def _rejects_text(test: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(test)
    def run(self: unittest.TestCase) -> None:
        with self.assertRaisesRegex(ValueError, "invalid nucleotide"):
            test(self)

    return run


class GoatDNATokenizerTest(TokenizerTesterMixin, unittest.TestCase):
    tokenizer_class = GoatDNATokenizer
    test_seq2seq = False

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        GoatDNATokenizer().save_pretrained(cls.tmpdirname)  # what get_tokenizer() loads

    def get_input_output_texts(self, tokenizer: GoatDNATokenizer) -> tuple[str, str]:
        # whitespace is not a token (sequences may be wrapped): it is skipped, not kept
        return "ACGTN acgtn", "ACGTNACGTN"


for _name in REJECTS_TEXT:
    setattr(GoatDNATokenizerTest, _name, _rejects_text(getattr(GoatDNATokenizerTest, _name)))
