"""`GoatDNATokenizer`: one token per base, with the ids goatdna's shards use (A C G T N = 0..4).

Lowercase (soft-masked) bases are read as their uppercase token and IUPAC ambiguity codes as N,
exactly as `goatdna prepare` stores them; any other character is an error naming it, because a
silently mapped character would change what the model scores. A goatdna model reads bare
sequences (no BOS/EOS); the one special token is ``<pad>`` (the id after the bases, 5), so
``tokenizer(..., padding=True)`` and transformers' collators work: padded positions carry
``attention_mask`` 0 and the model never reads them. This file ships inside exported folders (its import of
goatdna/model's dependency-free ``vocab.py`` becomes a relative one) and needs transformers only.
"""

from __future__ import annotations

import json
import os

from transformers import PreTrainedTokenizer

from goatdna.model.vocab import BASES

VOCAB: dict[str, int] = {letter: i for i, letter in enumerate(BASES)}
"""Token ids, the model's vocabulary (`goatdna.model.vocab`, equal to the shards' ids)."""

IUPAC_AMBIGUOUS = "RYKMSWBDHV"
PAD = "<pad>"
VOCAB_FILE = "vocab.json"


class GoatDNATokenizer(PreTrainedTokenizer):
    """Character-level DNA tokenizer: ``"ACgtn"`` -> ``[0, 1, 2, 3, 4]``."""

    vocab_files_names = {"vocab_file": VOCAB_FILE}  # noqa: RUF012
    model_input_names = ["input_ids", "attention_mask"]  # noqa: RUF012

    def __init__(self, vocab_file: str | None = None, **kwargs: object) -> None:
        if vocab_file is not None:
            with open(vocab_file, encoding="utf-8") as handle:
                stored = json.load(handle)
            if stored != VOCAB:
                raise ValueError(
                    f"{vocab_file}: vocabulary {stored} differs from goatdna's A C G T N = 0..4"
                )
        self._vocab = dict(VOCAB)
        self._letters = {i: letter for letter, i in VOCAB.items()}
        kwargs.setdefault("model_max_length", 1 << 40)  # positions extrapolate; no hard limit
        kwargs.setdefault("clean_up_tokenization_spaces", False)
        kwargs.setdefault("pad_token", PAD)
        super().__init__(**kwargs)

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    def get_vocab(self) -> dict[str, int]:
        """The bases and every added token (``<pad>``, and any the user added)."""
        return {**self._vocab, **self.added_tokens_encoder}

    def _tokenize(self, text: str, **kwargs: object) -> list[str]:
        tokens = []
        for i, char in enumerate(text):
            upper = char.upper()
            if upper in self._vocab:
                tokens.append(upper)
            elif upper in IUPAC_AMBIGUOUS:
                tokens.append("N")
            elif char.isspace():
                continue
            else:
                raise ValueError(
                    f"invalid nucleotide {char!r} at position {i + 1}: only A C G T N, IUPAC "
                    "ambiguity codes and their lowercase forms are allowed"
                )
        return tokens

    def _convert_token_to_id(self, token: str) -> int:
        return self._vocab[token]

    def _convert_id_to_token(self, index: int) -> str:
        return self._letters[int(index)]

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return "".join(tokens)

    def save_vocabulary(
        self, save_directory: str, filename_prefix: str | None = None
    ) -> tuple[str, ...]:
        name = (filename_prefix + "-" if filename_prefix else "") + VOCAB_FILE
        path = os.path.join(save_directory, name)
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(self._vocab, handle, indent=2)
            handle.write("\n")
        return (path,)
