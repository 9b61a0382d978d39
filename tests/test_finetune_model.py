"""The classifier's torch pieces: padding never changes a row's features; RC of padded rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from goatdna.data_prep.tables import reverse_complement
from goatdna.model import DNADecoder, ModelConfig
from goatdna.model.classifier import (
    SequenceClassifier,
    hidden_states,
    pad_sequences,
    reverse_complement_padded,
)


@pytest.mark.parametrize("positional", ["goat", "rope"])
@pytest.mark.parametrize("pool", ["mean", "last"])
def test_padding_does_not_change_features(positional: str, pool: str) -> None:
    torch.manual_seed(0)
    config = ModelConfig(positional=positional, n_layers=2, d_model=32, n_heads=2,
                         mlp_hidden=64, goat_modes=2, train_length=64)  # fmt: skip
    classifier = SequenceClassifier(DNADecoder(config), 3, pool=pool).eval()
    rng = np.random.default_rng(0)
    seqs = [rng.integers(0, 5, n).astype(np.uint8) for n in (5, 40, 17)]
    tokens, lengths = pad_sequences(seqs)
    assert tokens.shape == (3, 40) and lengths.tolist() == [5, 40, 17]
    with torch.no_grad():
        batched = classifier.features(tokens, lengths)
        for i, seq in enumerate(seqs):
            alone_tokens = torch.as_tensor(seq).long()[None]
            hidden = hidden_states(classifier.model, alone_tokens)[0].double()  # (L, D)
            expected = hidden.mean(0) if pool == "mean" else hidden[-1]
            torch.testing.assert_close(batched[i].double(), expected, atol=1e-5, rtol=1e-5)


def test_reverse_complement_of_padded_rows() -> None:
    rng = np.random.default_rng(1)
    seqs = [rng.integers(0, 5, n).astype(np.uint8) for n in (3, 9, 6)]
    tokens, lengths = pad_sequences(seqs)
    rc = reverse_complement_padded(tokens, lengths)
    expected, _ = pad_sequences([reverse_complement(s) for s in seqs])
    assert torch.equal(rc, expected)
    assert torch.equal(reverse_complement_padded(rc, lengths), tokens)
