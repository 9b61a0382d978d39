"""The classifier's torch pieces: padding never changes a row's features; RC of padded rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import tiny_config

from goatdna.io.tokens import reverse_complement
from goatdna.model import DNADecoder, ModelConfig
from goatdna.model.classifier import (
    SequenceTaskConfig,
    SequenceTaskModel,
    pad_sequences,
    reverse_complement_padded,
)


@pytest.mark.parametrize("positional", ["goat", "rope"])
@pytest.mark.parametrize("pool", ["mean", "last"])
def test_padding_does_not_change_features(positional: str, pool: str) -> None:
    torch.manual_seed(0)
    config = ModelConfig(positional=positional, n_layers=2, d_model=32, n_heads=2,
                         mlp_hidden=64, goat_modes=2, train_length=64)  # fmt: skip
    task = SequenceTaskConfig("classification", ("a", "b", "c"), pool=pool)
    classifier = SequenceTaskModel(DNADecoder(config), task).eval()
    rng = np.random.default_rng(0)
    seqs = [rng.integers(0, 5, n).astype(np.uint8) for n in (5, 40, 17)]
    tokens, lengths = pad_sequences(seqs)
    assert tokens.shape == (3, 40) and lengths.tolist() == [5, 40, 17]
    with torch.no_grad():
        batched = classifier.features(tokens, lengths)
        for i, seq in enumerate(seqs):
            alone_tokens = torch.as_tensor(seq).long()[None]
            hidden = classifier.model.hidden(alone_tokens)[0].double()  # (L, D)
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


def _task_model(task: SequenceTaskConfig) -> SequenceTaskModel:
    torch.manual_seed(0)
    config = tiny_config(train_length=64)
    return SequenceTaskModel(DNADecoder(config), task).eval()


def test_predictions_average_strands_and_undo_the_label_scaling() -> None:
    """One model maps head outputs to what a user reads: probabilities (both strands averaged
    when trained so) or values in label units."""
    rng = np.random.default_rng(2)
    seqs = [rng.integers(0, 4, n).astype(np.uint8) for n in (12, 30)]
    tokens, lengths = pad_sequences(seqs)
    rc = reverse_complement_padded(tokens, lengths)
    classify = _task_model(SequenceTaskConfig("classification", ("x", "y"), rc_average=True))
    with torch.no_grad():
        both = classify.predict(tokens, lengths)
        torch.testing.assert_close(both, classify.predict(rc, lengths), atol=1e-6, rtol=0)
        one = classify.predict(tokens, lengths, both_strands=False)
        torch.testing.assert_close(one, classify(tokens, lengths).softmax(-1))
        torch.testing.assert_close(both.sum(-1), torch.ones(2))
        assert torch.equal(classify.label_units(both), both.double())
    regress = _task_model(SequenceTaskConfig("regression", label_mean=5.0, label_std=2.0))
    with torch.no_grad():
        raw = regress(tokens, lengths)  # standardised
        values = regress.label_units(regress.predict(tokens, lengths))
        torch.testing.assert_close(values, raw.double() * 2.0 + 5.0)
        labels = values[:, 0].float()
        assert float(regress.loss(raw, labels)) < 1e-10  # the loss sees standardised targets


def test_task_config_is_strict() -> None:
    from goatdna.configfile import ConfigKeyError, from_dict

    with pytest.raises(ValueError, match="2 classes"):
        SequenceTaskConfig("classification", ("only",))
    with pytest.raises(ConfigKeyError, match="head.total_steps"):
        from_dict(SequenceTaskConfig, {"task": "regression", "total_steps": 3}, "head")
    with pytest.raises(ConfigKeyError, match="head.pool"):
        from_dict(SequenceTaskConfig, {"task": "regression", "pool": "max"}, "head")


def test_predict_refuses_a_head_section_it_cannot_read_in_one_line(tmp_path) -> None:
    """An older fine-tuned checkpoint (head section with schedule keys, no pooling) is named,
    not guessed at with defaults."""
    from goatdna.checkpoint import load_task_model, save_checkpoint
    from goatdna.configfile import to_dict
    from goatdna.errors import GoatDNAError

    model = _task_model(SequenceTaskConfig("regression")).model
    old_head = {"task": "regression", "classes": [], "n_outputs": 1, "label_mean": 0.0,
                "label_std": 1.0, "steps_per_epoch": 2, "total_steps": 4}  # fmt: skip
    path = save_checkpoint(tmp_path / "old.ckpt", model,
                           {"model": to_dict(model.config), "head": old_head})  # fmt: skip
    with pytest.raises(GoatDNAError, match=r"unknown config key 'head\.n_outputs'") as err:
        load_task_model(path)
    assert "\n" not in str(err.value) and "fine-tune it again" in str(err.value)
