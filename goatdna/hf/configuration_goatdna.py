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

    def __init__(self, **kwargs: Any) -> None:
        defaults = ModelConfig()
        for name in MODEL_FIELDS:
            setattr(self, name, kwargs.pop(name, getattr(defaults, name)))
        # The head is tied inside DNADecoder itself (``tie_embeddings``); transformers must not tie.
        kwargs.setdefault("tie_word_embeddings", False)
        super().__init__(**kwargs)
        self.to_model_config()  # validate now: a bad shape fails when the config is made

    def to_model_config(self) -> ModelConfig:
        """The goatdna `ModelConfig` these attributes describe."""
        return ModelConfig(**{name: getattr(self, name) for name in MODEL_FIELDS})
