"""`GoatDNAConfig`: a goatdna `ModelConfig` as a Hugging Face configuration (``model_type`` goatdna).

Every `ModelConfig` field is an attribute of the same name, so ``config.json`` reads like a goatdna
config; the usual transformers names (``hidden_size``, ``num_hidden_layers``,
``num_attention_heads``) are aliases. This file ships verbatim inside every exported folder (with
``goatdna.model.`` imports made relative), so it depends on torch, transformers and the model
files only.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from transformers import PretrainedConfig

from goatdna.model.config import ModelConfig

MODEL_FIELDS = tuple(f.name for f in dataclasses.fields(ModelConfig))


class GoatDNAConfig(PretrainedConfig):
    """A goatdna decoder's shape and positional scheme (GOAT prior or RoPE)."""

    model_type = "goatdna"
    attribute_map = {  # noqa: RUF012  (the transformers convention: a class-level dict)
        "hidden_size": "d_model",
        "num_hidden_layers": "n_layers",
        "num_attention_heads": "n_heads",
        "intermediate_size": "mlp_hidden",
    }

    def __init__(
        self,
        *,
        use_cache: bool = True,
        pad_token_id: int | None = None,
        bos_token_id: int | None = None,
        eos_token_id: int | None = None,
        classifier_pool: str = "mean",
        classifier_dropout: float = 0.1,
        classifier_rc_average: bool = False,
        classifier_layer: int | None = None,
        classifier_max_length: int | None = None,
        regression_label_mean: float = 0.0,
        regression_label_std: float = 1.0,
        **kwargs: Any,
    ) -> None:
        defaults = ModelConfig()
        for name in MODEL_FIELDS:
            setattr(self, name, kwargs.pop(name, getattr(defaults, name)))
        # GoatDNAForSequenceClassification: goatdna's SequenceTaskConfig (goatdna.model.classifier)
        # pool, dropout, reverse-complement averaging and a regression target's standardisation.
        if classifier_pool not in ("mean", "last"):
            raise ValueError(f"classifier_pool must be 'mean' or 'last', got {classifier_pool!r}")
        self.classifier_pool = classifier_pool
        self.classifier_dropout = classifier_dropout
        self.classifier_rc_average = classifier_rc_average
        # The hidden states the head pools (block k's output, 1-based, not normed; None: the
        # final norm's) and the bases a row keeps (its first classifier_max_length; None: all):
        # without them a probe that a sweep fitted on an inner layer would read the final norm.
        n_layers = getattr(self, "n_layers")  # noqa: B009  (set from MODEL_FIELDS above)
        if classifier_layer is not None and not 1 <= classifier_layer <= n_layers:
            raise ValueError(
                f"classifier_layer must be in 1..{n_layers} or None, got {classifier_layer!r}"
            )
        if classifier_max_length is not None and classifier_max_length < 1:
            raise ValueError(f"classifier_max_length must be >= 1, got {classifier_max_length!r}")
        self.classifier_layer = classifier_layer
        self.classifier_max_length = classifier_max_length
        self.regression_label_mean = regression_label_mean
        self.regression_label_std = regression_label_std
        # The head is tied inside DNADecoder itself (``tie_embeddings``); transformers must not tie.
        kwargs.setdefault("tie_word_embeddings", False)
        super().__init__(**kwargs)
        # Set here, after PretrainedConfig: transformers 5 no longer gives a base config use_cache
        # or token ids (they would vanish on load), and 4.x would reset them to None. goatdna
        # reads bare sequences (no BOS/EOS); the tokenizer's "<pad>" is only ever masked out.
        self.use_cache = use_cache
        self.pad_token_id = pad_token_id
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        self.to_model_config()  # validate now: a bad shape fails when the config is made

    def to_model_config(self) -> ModelConfig:
        """The goatdna `ModelConfig` these attributes describe."""
        return ModelConfig(**{name: getattr(self, name) for name in MODEL_FIELDS})
