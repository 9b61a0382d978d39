"""`GoatDNAForCausalLM`: the goatdna decoder as a transformers causal LM (logits, loss, generate).

The wrapped module is goatdna's own `DNADecoder` (attribute ``model``), so weights, logits and the
loss are goatdna's: ``labels`` are scored with `next_token_loss` (N targets, and transformers'
-100, ignored), the same function training uses. Generation runs through transformers'
``generate``; with ``use_cache=True`` the transformers cache stores GOAT's packed keys at their
true absolute positions (the step's position is the cache's length), so the prior always sees
real positions and a cached greedy decode equals goatdna's own. The generation config suppresses
N (id 4): it is an input-only token and is never generated.

Inputs are unpadded: an ``attention_mask`` with zeros is refused (positions would shift).
This file ships verbatim inside exported folders (with ``goatdna.model.`` imports made relative).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from transformers import GenerationMixin, PreTrainedModel
from transformers.cache_utils import Cache, DynamicCache
from transformers.modeling_outputs import CausalLMOutputWithPast

from goatdna.model.scoring import IGNORE_TARGET, next_token_loss
from goatdna.model.transformer import DNADecoder

from .configuration_goatdna import GoatDNAConfig

HF_IGNORE_INDEX = -100
_CACHE_FIELD = (
    "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"
)


class _CacheView:
    """goatdna's KV-cache interface (``length``, ``check_room``, ``write``) over a transformers cache.

    ``DNADecoder``'s attention writes each layer's packed keys/values through ``write``; the
    transformers cache grows without a fixed size, so there is always room.
    """

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.length = int(cache.get_seq_length())

    def check_room(self, batch_size: int, new_tokens: int) -> None:
        return None

    def write(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        return self.cache.update(k, v, layer)  # all keys/values so far, (B, H, length, d_h)


class GoatDNAPreTrainedModel(PreTrainedModel):
    config_class = GoatDNAConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    _no_split_modules = ["Block"]  # noqa: RUF012

    def _init_weights(self, module: torch.nn.Module) -> None:
        """Weights come from `DNADecoder.reset_parameters` (or a checkpoint); nothing to do here."""


class GoatDNAForCausalLM(GoatDNAPreTrainedModel, GenerationMixin):
    """Next-base prediction over A C G T N with goatdna's decoder; logits (B, L, 5)."""

    def __init__(self, config: GoatDNAConfig) -> None:
        super().__init__(config)
        self.model = DNADecoder(config.to_model_config())
        self.post_init()
        if getattr(self, "generation_config", None) is not None:
            self.generation_config.suppress_tokens = [IGNORE_TARGET]  # never generate N

    def get_input_embeddings(self) -> torch.nn.Module:
        return self.model.embed

    def get_output_embeddings(self) -> None:
        return None  # the head is goatdna's own (tied inside DNADecoder when configured)

    def _start_position(
        self, view: _CacheView | None, position_ids: Tensor | None, length: int
    ) -> int:
        """The absolute position of the first input token (cache length, else position_ids)."""
        start = view.length if view is not None else 0
        if position_ids is not None:
            first = position_ids.reshape(-1, position_ids.shape[-1])
            expected = torch.arange(length, device=first.device) + int(first[0, 0])
            if not bool((first == expected).all()):
                raise ValueError(
                    "goatdna models take consecutive positions, equal in every row (unpadded input)"
                )
            if view is not None and int(first[0, 0]) != view.length:
                raise ValueError(
                    f"position_ids start at {int(first[0, 0])} but the cache holds {view.length} "
                    "positions; positions must stay absolute"
                )
            start = int(first[0, 0])
        return start

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        labels: Tensor | None = None,
        cache: Cache | None = None,
        past_key_values: Cache | None = None,
        use_cache: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: object,
    ) -> CausalLMOutputWithPast | tuple[Any, ...]:
        """input_ids (B, L) -> logits (B, L, 5); ``labels`` (B, L) -> mean next-base loss.

        ``hidden_states`` (when asked) follow the transformers convention: the embedding output,
        each block's output, and for the last entry the final norm's output.
        """
        if attention_mask is not None and not bool(attention_mask.bool().all()):
            raise ValueError(
                "goatdna models take unpadded sequences: attention_mask must be all ones "
                "(batch sequences of equal length, or run them one at a time)"
            )
        cache = cache if cache is not None else past_key_values
        if use_cache is None:
            use_cache = bool(getattr(self.config, "use_cache", False)) and cache is not None
        if use_cache and cache is None:
            cache = DynamicCache()
        view = _CacheView(cache) if use_cache and cache is not None else None
        start = self._start_position(view, position_ids, input_ids.shape[1])

        want_hidden = (
            output_hidden_states
            if output_hidden_states is not None
            else bool(getattr(self.config, "output_hidden_states", False))
        )
        states: list[Tensor] | None = [] if want_hidden else None
        normed = self.model.hidden(input_ids, start, view, states=states)  # (B, L, d_model)
        logits = self.model.logits(normed)  # (B, L, vocab_size)
        # transformers' convention: the last entry is the final norm's output
        hidden = (*states[:-1], normed) if states is not None else None

        loss = None
        if labels is not None:
            targets = labels[:, 1:].masked_fill(labels[:, 1:] == HF_IGNORE_INDEX, IGNORE_TARGET)
            loss = next_token_loss(logits[:, :-1], targets.long())
        output = CausalLMOutputWithPast(
            loss=loss,
            logits=logits,
            hidden_states=hidden,
            # the field's name differs between transformers versions (see _CACHE_FIELD)
            **{_CACHE_FIELD: cache if use_cache else None},  # type: ignore[arg-type]
        )
        if return_dict is False:
            return output.to_tuple()
        return output
