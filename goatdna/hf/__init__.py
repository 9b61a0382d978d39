"""Leaving goatdna: Hugging Face classes for goatdna models, and the export folder.

Importing this package registers ``model_type`` goatdna with transformers' Auto classes, so
``AutoConfig``, ``AutoModel``, ``AutoModelForCausalLM``, ``AutoModelForSequenceClassification``
and ``AutoTokenizer.from_pretrained(folder)`` load an
exported folder with goatdna's own code. Without goatdna, the folder's bundled code does the same
through ``trust_remote_code=True``. Needs the ``hf`` extra: ``pip install "goatdna[hf]"``.
"""

from __future__ import annotations

try:
    from transformers import (
        AutoConfig,
        AutoModel,
        AutoModelForCausalLM,
        AutoModelForSequenceClassification,
        AutoTokenizer,
    )
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError(
        "goatdna.hf needs transformers and safetensors: pip install 'goatdna[hf]'"
    ) from err

from .configuration_goatdna import GoatDNAConfig
from .modeling_goatdna import (
    GoatDNAForCausalLM,
    GoatDNAForSequenceClassification,
    GoatDNAModel,
    GoatDNAPreTrainedModel,
)
from .tokenization_goatdna import GoatDNATokenizer

AutoConfig.register(GoatDNAConfig.model_type, GoatDNAConfig, exist_ok=True)
AutoModel.register(GoatDNAConfig, GoatDNAModel, exist_ok=True)
AutoModelForCausalLM.register(GoatDNAConfig, GoatDNAForCausalLM, exist_ok=True)
AutoModelForSequenceClassification.register(
    GoatDNAConfig, GoatDNAForSequenceClassification, exist_ok=True
)
AutoTokenizer.register(GoatDNAConfig, slow_tokenizer_class=GoatDNATokenizer, exist_ok=True)

__all__ = [
    "GoatDNAConfig",
    "GoatDNAForCausalLM",
    "GoatDNAForSequenceClassification",
    "GoatDNAModel",
    "GoatDNAPreTrainedModel",
    "GoatDNATokenizer",
]
