"""The nucleotide token table: one byte per base, shared by every shard and every model.

On-disk contract (docs/formats.md shows this docstring): the low 7 bits of a byte are the token, ``A=0, C=1, G=2, T=3,
N=4``; IUPAC ambiguity codes (R Y K M S W B D H V) are stored as N. Bit ``0x80`` marks a base
that was lowercase (soft-masked repeat) in the source FASTA, so ``byte & 0x7F`` is the token and
``byte & 0x80`` the repeat flag. Anything else is not DNA and is rejected.

This is the one home of the numpy token table, the encoder and the reverse complement (issue 42):
every reader, writer and room imports them from here (``tests/test_io.py`` fails on a
second definition elsewhere).

The ids are the model's vocabulary too (`goatdna.model.vocab`, where `IGNORE_TARGET` is N). This
module cannot import that one (any goatdna.model import loads torch; goatdna.io and data_prep are
numpy-only), so the ids are written in both places and ``tests/test_tokens.py`` pins them equal.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from goatdna.errors import GoatDNAError

A, C, G, T, N = 0, 1, 2, 3, 4
NUM_BASES = N
"""A C G T are the tokens below NUM_BASES (= N): ``token < NUM_BASES`` means a known base."""
BASES = "ACGTN"
VOCAB_SIZE = 5
TOKEN_MASK = 0x7F
REPEAT_FLAG = 0x80
INVALID = 0xFF  # marker in the lookup table for bytes that are not nucleotides
IUPAC_AMBIGUOUS = "RYKMSWBDHV"

TOKEN_TABLE: dict[str, int] = {"A": A, "C": C, "G": G, "T": T, "N": N}


def _build_byte_lut() -> np.ndarray:
    """256-entry table: ASCII byte -> token byte (flag included), INVALID for non-DNA."""
    lut = np.full(256, INVALID, dtype=np.uint8)
    for letter, token in TOKEN_TABLE.items():
        lut[ord(letter)] = token
        lut[ord(letter.lower())] = token | REPEAT_FLAG
    for letter in IUPAC_AMBIGUOUS:
        lut[ord(letter)] = N
        lut[ord(letter.lower())] = N | REPEAT_FLAG
    return lut


BYTE_LUT: np.ndarray = _build_byte_lut()
"""ASCII -> token byte; ``BYTE_LUT[b] == INVALID`` means ``b`` is not a nucleotide character."""

UPPER_DECODE = np.frombuffer(BASES.encode(), dtype=np.uint8)
LOWER_DECODE = np.frombuffer(BASES.lower().encode(), dtype=np.uint8)

COMPLEMENT = np.array([T, G, C, A, N], dtype=np.uint8)
"""Token -> complementary token (A<->T, C<->G, N->N), for reverse-complement augmentation."""


Unknown = Literal["raise", "N"]
"""What `encode` does with a byte that is not a nucleotide: raise (FASTA, tables, prompts), or
store it as N (VCF alleles, which are checked to be A/C/G/T before they are encoded)."""


class InvalidNucleotide(GoatDNAError):
    """A byte that is not a nucleotide: ``char`` at 1-based ``position`` of the encoded text.

    Callers that know where the text came from (a table's row and column) catch it and say so;
    the table and the check stay here."""

    def __init__(self, char: str, position: int) -> None:
        super().__init__(
            f"invalid nucleotide {char!r} at position {position} (1-based): "
            "only A C G T N, IUPAC ambiguity codes and their lowercase forms are allowed"
        )
        self.char, self.position = char, position


def encode_bytes(raw: bytes | np.ndarray, unknown: Unknown = "raise") -> np.ndarray:
    """Map ASCII sequence bytes to token bytes; a non-nucleotide raises, or is N if ``unknown="N"``."""
    ascii_bytes = np.frombuffer(raw, dtype=np.uint8) if isinstance(raw, bytes) else raw
    tokens = BYTE_LUT[ascii_bytes]
    if unknown == "N":
        return np.where(tokens == INVALID, np.uint8(N), tokens).astype(np.uint8)
    bad = np.flatnonzero(tokens == INVALID)
    if bad.size:
        pos = int(bad[0])
        raise InvalidNucleotide(chr(int(ascii_bytes[pos])), pos + 1)
    return tokens


def encode(sequence: str, unknown: Unknown = "raise") -> np.ndarray:
    """Encode a nucleotide string as uint8 token bytes (lowercase sets the repeat flag).

    ``unknown`` says what a character that is not a nucleotide becomes (see `Unknown`); a
    non-ASCII character always raises.
    """
    try:
        raw = sequence.encode("ascii")
    except UnicodeEncodeError as err:
        raise GoatDNAError(
            f"invalid character {sequence[err.start]!r} at position {err.start + 1} (1-based): "
            "sequences must be ASCII nucleotides"
        ) from None
    return encode_bytes(raw, unknown)


def decode(tokens: np.ndarray) -> str:
    """Decode token bytes back to letters; bases with the repeat flag come back lowercase.

    IUPAC ambiguity codes were stored as N, so they decode as ``N``/``n``.
    """
    arr = np.asarray(tokens, dtype=np.uint8)
    letters = np.where(
        arr & REPEAT_FLAG, LOWER_DECODE[arr & TOKEN_MASK], UPPER_DECODE[arr & TOKEN_MASK]
    )
    return letters.astype(np.uint8).tobytes().decode("ascii")


def reverse_complement(tokens: np.ndarray) -> np.ndarray:
    """Reverse complement of plain tokens (0..4, no flag) along the last axis.

    A (B, W) array gives each row's reverse complement (training windows); a 1-D array the
    sequence's. Mask the repeat flag off first (``tokens & TOKEN_MASK``).
    """
    return COMPLEMENT[np.asarray(tokens)[..., ::-1]]


_TEXT_COMPLEMENT = str.maketrans(
    "ACGTNRYKMSWBDHV" + "ACGTNRYKMSWBDHV".lower(), "TGCANYRMKSWVHDB" + "TGCANYRMKSWVHDB".lower()
)
"""Letter -> complementary letter, IUPAC codes and case kept (R<->Y, K<->M, B<->V, D<->H)."""


def reverse_complement_text(sequence: str) -> str:
    """Reverse complement of nucleotide text, before it is encoded (BED rows on the minus strand).

    Text keeps what tokens cannot: an IUPAC code's own complement and the case (soft-mask), so
    a table column holding the minus-strand sequence reads as the FASTA would have it.
    """
    return sequence.translate(_TEXT_COMPLEMENT)[::-1]
