"""transformers' own common model and configuration tests, run against goatdna's classes.

In the style of transformers' tests/models/llama/test_modeling_llama.py: a `GoatDNAModelTester`
builds tiny configs and inputs, and one ``ModelTesterMixin`` test case per positional scheme
(GOAT, RoPE, ALiBi, NoPE) runs every common test on `GoatDNAModel`, `GoatDNAForCausalLM` and
`GoatDNAForSequenceClassification`. The test files are the installed transformers version's
own (see conftest.py and .ci/transformers_tests). Tests that cannot apply are skipped, each
with its reason, all in `SKIPS`.
"""

from __future__ import annotations

import unittest

import torch
from transformers_tests.test_configuration_common import ConfigTester
from transformers_tests.test_modeling_common import (
    ModelTesterMixin,
    ids_tensor,
    random_attention_mask,
)

from goatdna.hf import (
    GoatDNAConfig,
    GoatDNAForCausalLM,
    GoatDNAForSequenceClassification,
    GoatDNAModel,
)

SCHEMES = ("goat", "rope", "alibi", "nope")

SKIPS: dict[str, str] = {
    # the sdist does not ship tests/generation/test_utils.py
    "test_generation_tester_mixin_inheritance": (
        "GenerationTesterMixin lives in tests/generation/test_utils.py, which the sdist does "
        "not ship; generate (greedy = goatdna's, left-padded batches, static cache, "
        "inputs_embeds, pipeline) is tested in tests/test_hf_features.py"
    ),
    "test_correct_missing_keys": (
        "saves model.base_model alone; goatdna's classes hold goatdna's own DNADecoder as "
        "`model` (the layout of every goatdna checkpoint and export), a torch module without "
        "save_pretrained; trunk <-> head loading is tested in tests/test_hf_features.py"
    ),
    "test_load_with_mismatched_shapes": (
        "changes config.vocab_size and expects the trunk's embedding to mismatch; in goatdna "
        "vocab_size is the classes the LM head predicts and the embedding has "
        "padded_vocab_size rows (5 bases padded to 8), so vocab_size alone shapes no trunk "
        "weight; the classifier-head mismatch (num_labels) half is covered by "
        "test_can_load_ignoring_mismatched_shapes"
    ),
}
"""Every common test skipped for goatdna, and why it cannot apply. All other skips are
transformers' own conditions (a GPU, flash-attn, deepspeed, MoE layers, ...), each printed with
its reason by ``.ci/transformers_tests`` (pytest -rs). The attention-output tests run: with
``output_attentions`` every layer runs explicitly for that call (goatdna.model.attention_maps)."""


class GoatDNAModelTester:
    """Tiny goatdna configs and inputs for the common tests (one positional scheme each)."""

    def __init__(
        self,
        parent: unittest.TestCase,
        positional: str,
        batch_size: int = 3,
        seq_length: int = 7,
        is_training: bool = True,
        vocab_size: int = 99,
        hidden_size: int = 32,
        num_hidden_layers: int = 2,
        num_attention_heads: int = 2,
        intermediate_size: int = 37,
        num_labels: int = 3,
    ) -> None:
        self.parent = parent
        self.positional = positional
        self.batch_size = batch_size
        self.seq_length = seq_length
        self.is_training = is_training
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.num_labels = num_labels

    def get_config(self) -> GoatDNAConfig:
        return GoatDNAConfig(
            positional=self.positional,
            n_layers=self.num_hidden_layers,
            d_model=self.hidden_size,
            n_heads=self.num_attention_heads,
            mlp_hidden=self.intermediate_size,
            # embedding rows = predicted classes, as transformers' resize tests assume
            vocab_size=self.vocab_size,
            padded_vocab_size=self.vocab_size,
            goat_modes=2,
            goat_mlp_hidden=8,
            train_length=16,
            num_labels=self.num_labels,
        )

    def prepare_config_and_inputs(self) -> tuple[GoatDNAConfig, torch.Tensor, torch.Tensor]:
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size)
        attention_mask = random_attention_mask([self.batch_size, self.seq_length])
        return self.get_config(), input_ids, attention_mask

    def prepare_config_and_inputs_for_common(self) -> tuple[GoatDNAConfig, dict]:
        config, input_ids, attention_mask = self.prepare_config_and_inputs()
        return config, {"input_ids": input_ids, "attention_mask": attention_mask}


def _with_skips(cls: type) -> type:
    for name, reason in SKIPS.items():
        setattr(cls, name, unittest.skip(reason)(getattr(cls, name)))
    return cls


class _GoatDNACommon(ModelTesterMixin):
    positional = "goat"
    all_model_classes = (GoatDNAModel, GoatDNAForCausalLM, GoatDNAForSequenceClassification)

    def setUp(self) -> None:
        self.model_tester = GoatDNAModelTester(self, self.positional)
        self.config_tester = ConfigTester(
            self, config_class=GoatDNAConfig, n_heads=2, d_model=32, goat_modes=2
        )

    def test_config(self) -> None:
        self.config_tester.run_common_tests()


@_with_skips
class GoatModelTest(_GoatDNACommon, unittest.TestCase):
    positional = "goat"


@_with_skips
class RopeModelTest(_GoatDNACommon, unittest.TestCase):
    positional = "rope"


@_with_skips
class AlibiModelTest(_GoatDNACommon, unittest.TestCase):
    positional = "alibi"


@_with_skips
class NopeModelTest(_GoatDNACommon, unittest.TestCase):
    positional = "nope"
