"""goatdna's decoder as transformers models: the trunk, a causal LM and a sequence classifier.

* `GoatDNAModel` (``AutoModel``): the trunk, final-normed hidden states (B, L, d_model).
* `GoatDNAForCausalLM` (``AutoModelForCausalLM``): next-base logits (B, L, 5), loss, generate.
* `GoatDNAForSequenceClassification` (``AutoModelForSequenceClassification``): a `goatdna
  finetune` model (pooling, standardising head, reverse-complement averaging), so an exported
  fine-tuned folder predicts what `goatdna predict` does.

Each holds goatdna's own `DNADecoder` as ``model`` (the state-dict layout of every goatdna
checkpoint and export: ``model.embed``, ``model.blocks``, ``model.norm``, ``model.head``), so
weights, logits and the loss are goatdna's: ``labels`` are scored with `next_token_loss` (N
targets, and transformers' -100, ignored), the same function training uses.

Padding: an ``attention_mask`` with zeros masks the padded keys, and every real token keeps its
true absolute position (``cumsum(attention_mask) - 1`` unless ``position_ids`` are given): GOAT's
prior and RoPE are functions of absolute positions, so a padded row's logits are those of the
row alone, on either padding side, also through the KV cache (left-padded batched ``generate``).
An unpadded batch takes the plain causal path (the fast kernels).

The KV cache (``use_cache``; a transformers ``DynamicCache`` or ``StaticCache``) stores GOAT's
packed keys at their true absolute positions, so a cached greedy decode equals goatdna's own. The
generation config suppresses N (id 4): it is an input-only token and is never generated.
``output_attentions=True`` returns each layer's weights (B, H, Lq, Lk): attention normally runs
as one fused SDPA call that never forms them, so for that call only every layer runs explicitly
(`goatdna.model.attention_maps.recording`: the same q', k', cached keys and mask, softmax times
V). This file ships verbatim inside exported folders (with ``goatdna.model.`` imports made
relative).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.cache_utils import Cache, DynamicCache
from transformers.modeling_outputs import (
    BaseModelOutputWithPast,
    CausalLMOutputWithPast,
    SequenceClassifierOutputWithPast,
)

from goatdna.model.alibi import AlibiPrior
from goatdna.model.attention import padding_mask
from goatdna.model.attention_maps import recording
from goatdna.model.classifier import (
    PAD_TOKEN,
    SequenceHead,
    pool_hidden,
    reverse_complement_padded,
)
from goatdna.model.goat import GoatPrior, alibi_slopes, goat_frequencies
from goatdna.model.scoring import IGNORE_TARGET, next_token_loss
from goatdna.model.transformer import Block, DNADecoder

from .configuration_goatdna import GoatDNAConfig

try:  # transformers >= 4.52
    from transformers.modeling_layers import GradientCheckpointingLayer
except ImportError:  # pragma: no cover - older transformers: no gradient checkpointing
    GradientCheckpointingLayer = None  # type: ignore[misc,assignment]


if GradientCheckpointingLayer is not None:

    class GoatDNABlock(GradientCheckpointingLayer, Block):
        """goatdna's `Block` (same weights, same forward) as a transformers gradient-checkpointing
        layer: ``gradient_checkpointing_enable()`` recomputes each block in backward (the trunk
        turns the KV cache off while it does, so no key is written twice)."""

    BLOCK_CLASS: type[Block] = GoatDNABlock
else:  # pragma: no cover
    BLOCK_CLASS = Block

HF_IGNORE_INDEX = -100
_CACHE_FIELD = (
    "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"
)


class _CacheView:
    """goatdna's KV-cache interface (``length``, ``check_room``, ``write``) over a transformers cache.

    ``DNADecoder``'s attention writes each layer's packed keys/values through ``write``. A
    ``DynamicCache`` returns the keys so far; a ``StaticCache`` returns its whole preallocated
    buffer, whose unwritten columns the padding mask leaves out (`attention.attend`).
    """

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.length = int(cache.get_seq_length())

    def check_room(self, batch_size: int, new_tokens: int) -> None:
        return None

    def write(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        return self.cache.update(k, v, layer)  # all keys/values so far, (B, H, length, d_h)


def _preallocated(cache: Cache | None) -> bool:
    """Whether ``cache`` returns a fixed-size buffer (``StaticCache``) rather than the keys so far."""
    if cache is None or not hasattr(cache, "get_max_cache_shape"):
        return False
    return int(cache.get_max_cache_shape()) > 0


def _cache_argument(cache: Cache | None, past_key_values: Cache | None) -> Cache | None:
    """The cache passed as ``cache`` (transformers >= 5.x's name) or ``past_key_values``."""
    if past_key_values is None:
        return cache
    if _CACHE_FIELD == "cache":
        warnings.warn(
            "`past_key_values` is deprecated in this transformers version; pass `cache`",
            FutureWarning,
            stacklevel=3,
        )
    return past_key_values


def _traced() -> bool:
    """Inside torch.compile / torch.export: no data-dependent branch may be taken."""
    return bool(torch.compiler.is_compiling()) or bool(torch.jit.is_tracing())


def _padding(
    attention_mask: Tensor | None,
    position_ids: Tensor | None,
    past: int,
    batch: int,
    length: int,
    device: torch.device,
) -> tuple[Tensor | None, Tensor | None]:
    """(real key columns (B, past+L) or None when nothing is padded, positions (B, L) or None).

    A padded row's real tokens sit at ``cumsum(attention_mask) - 1``: their true positions, as
    in the row alone. Under torch.compile/export the mask is always applied (no data-dependent
    "all ones?" branch).
    """
    total = past + length
    key_valid = None
    if attention_mask is not None:
        if attention_mask.dim() != 2:
            raise ValueError(
                "attention_mask must be (batch, length) of 0/1, got shape "
                f"{tuple(attention_mask.shape)}"
            )
        if attention_mask.shape[-1] < total:
            raise ValueError(
                f"attention_mask has {attention_mask.shape[-1]} columns, but the cache holds "
                f"{past} positions and {length} are new: it must cover all {total}"
            )
        key_valid = attention_mask[:, :total].bool()
        if not _traced() and bool(key_valid.all()):
            key_valid = None
    if position_ids is not None:
        positions = position_ids.to(device=device, dtype=torch.long).expand(batch, length)
    elif key_valid is not None:
        positions = (key_valid.long().cumsum(-1) - 1).clamp(min=0)[:, past:]
    else:
        positions = None
    return key_valid, positions


@dataclass
class _TrunkOutput:
    hidden: Tensor  # final-normed (B, L, d_model)
    states: tuple[Tensor, ...] | None  # embedding, every block's output, the final norm's output
    cache: Cache | None


def _tupled(attentions: list[Tensor] | None) -> tuple[Tensor, ...] | None:
    return tuple(attentions) if attentions is not None else None


def _uninitialised(tensor: Tensor) -> bool:
    """transformers marks tensors it has loaded; only the others are (re)initialised."""
    return not getattr(tensor, "_is_hf_initialized", False)


@torch.no_grad()
def _normal(tensor: Tensor, std: float) -> None:
    if _uninitialised(tensor):
        tensor.normal_(0.0, std)


@torch.no_grad()
def _fill(tensor: Tensor, value: float | Tensor) -> None:
    if _uninitialised(tensor):
        if isinstance(value, Tensor):
            tensor.copy_(value)
        else:
            tensor.fill_(value)


def _init_goat_prior(module: GoatPrior, goat_init: str) -> None:
    """`GoatPrior`'s own init, for what a checkpoint did not provide. An ablated term's zero
    buffer (`GoatPrior.removed_terms`, not in any checkpoint) is filled with its zeros."""
    removed = module.removed_terms()
    if not module.native():
        # goat-attention's options: the construction values, then what goat_init sets
        values: dict[str, Any] = {"alpha": 0.0, "beta": 0.0, "slope": 0.0, "sink": 0.0,
                                  "gain": 1.0, "gate_scale": -10.0, "gate_bias": 10.0}  # fmt: skip
        if module.key_mlp is None and "mlp_w1" not in removed:
            values.update(mlp_b1=0.0, mlp_w2=0.0, mlp_b2=0.0)
            _normal(module.mlp_w1, module.mlp_w1.shape[1] ** -0.5)
        values.update(module.initial_values(goat_init))
        for name, value in values.items():
            if name in dict(module.named_parameters()):
                target = module.get_parameter(name)
                _fill(target, value.to(target.device) if isinstance(value, Tensor) else value)
    else:
        for name in ("alpha", "beta", "sink", "mlp_b1", "mlp_w2", "mlp_b2"):
            _fill(getattr(module, name), 0.0)
        slopes = alibi_slopes(module.num_heads) if goat_init == "alibi" else 0.0
        _fill(module.slope, slopes if isinstance(slopes, float) else slopes.float())
        if "mlp_w1" not in removed:
            _normal(module.mlp_w1, module.mlp_w1.shape[1] ** -0.5)
        if hasattr(module, "gate_scale"):  # goat_qk_layout 'authors' keeps the (unused) gate
            _fill(module.gate_scale, -10.0)
            _fill(module.gate_bias, 10.0)
    for name in removed:
        _fill(getattr(module, name), 0.0)
    # the fixed frequencies are a non-persistent buffer: never in a checkpoint
    _fill(module.freqs, goat_frequencies(module.num_modes, module.freq_base).float())


class GoatDNAPreTrainedModel(PreTrainedModel):
    config_class = GoatDNAConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    _no_split_modules = ["Block", "GoatDNABlock"]  # noqa: RUF012
    supports_gradient_checkpointing = GradientCheckpointingLayer is not None
    _supports_sdpa = True  # goatdna's attention is one SDPA call (or flash-attn, config.attention)
    model: DNADecoder

    def _init_weights(self, module: nn.Module) -> None:
        """goatdna's init (`DNADecoder.reset_parameters`, `GoatPrior`'s own, `SequenceHead`'s),
        for what a checkpoint did not provide; transformers calls it children first.

        Hand-written rather than ``transformers.initialization`` (absent before transformers 5):
        a tensor transformers has loaded carries ``_is_hf_initialized`` and is left alone.
        """
        config = self.config
        std = config.init_std
        if isinstance(module, nn.Embedding):
            _normal(module.weight, std)
        elif isinstance(module, nn.Linear):
            _normal(module.weight, std)
            if module.bias is not None:
                _fill(module.bias, 0.0)
        elif isinstance(module, nn.RMSNorm) and module.weight is not None:
            _fill(module.weight, 1.0)
        elif isinstance(module, nn.LayerNorm):  # block_style gpt2
            _fill(module.weight, 1.0)
            _fill(module.bias, 0.0)
        elif isinstance(module, Block):  # residual projections: std / sqrt(2 n_layers)
            residual = std / (2 * config.n_layers) ** 0.5
            _normal(module.attn.o_proj.weight, residual)
            _normal(module.mlp.down_proj.weight, residual)
        elif isinstance(module, GoatPrior):
            _init_goat_prior(module, config.goat_init)
        elif isinstance(module, SequenceHead):
            _fill(module.center, 0.0)
            _fill(module.scale, 1.0)
        elif isinstance(module, AlibiPrior):
            pass  # nothing learned, nothing stored

    # ------------------------------------------------------------------ embeddings
    def get_input_embeddings(self) -> nn.Module:
        return self.model.embed

    def set_input_embeddings(self, value: nn.Module) -> None:
        if not isinstance(value, nn.Embedding):
            raise TypeError(
                f"the input embedding must be an nn.Embedding, got {type(value).__name__}"
            )
        self.model.embed = value

    def resize_token_embeddings(self, *args: Any, **kwargs: Any) -> nn.Embedding:
        """transformers' resize, then goatdna's shape fields follow it: the embedding's rows are
        ``padded_vocab_size``, the head's rows ``vocab_size`` (the classes it predicts), so the
        resized model saves and loads again."""
        embedding = super().resize_token_embeddings(*args, **kwargs)
        rows = self.model.embed.weight.shape[0]
        self.config.padded_vocab_size = max(rows, self.config.vocab_size)
        self.model.config = self.config.to_model_config()
        return embedding

    # ------------------------------------------------------------------ the trunk
    @contextlib.contextmanager
    def _attentions(self, output_attentions: bool | None) -> Iterator[list[Tensor] | None]:
        """Around one forward: with ``output_attentions`` (or the config's), a list that
        receives each layer's weights (B, H, Lq, Lk) when the forward is done, else None."""
        wanted = output_attentions
        if wanted is None:
            wanted = bool(getattr(self.config, "output_attentions", False))
        if not wanted:
            yield None
            return
        collected: list[Tensor] = []
        with recording(self.model) as weights:
            yield collected
        collected.extend(weights[layer] for layer in sorted(weights))

    def _trunk(
        self,
        input_ids: Tensor | None,
        inputs_embeds: Tensor | None,
        attention_mask: Tensor | None,
        position_ids: Tensor | None,
        past_key_values: Cache | None,
        use_cache: bool | None,
        output_hidden_states: bool | None,
        output_attentions: bool | None,
    ) -> _TrunkOutput:
        """Run `DNADecoder.hidden` with transformers' inputs (see the module docstring)."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids and inputs_embeds")
        first = input_ids if input_ids is not None else inputs_embeds
        assert first is not None
        B, L = first.shape[:2]
        device = first.device

        if use_cache is None:
            use_cache = bool(getattr(self.config, "use_cache", False))
        if self.training and any(
            getattr(layer, "gradient_checkpointing", False) for layer in self.model.modules()
        ):
            use_cache = False  # a recomputed block would write its keys twice
        cache = past_key_values if use_cache else None
        if use_cache and cache is None:
            cache = DynamicCache()
        view = _CacheView(cache) if cache is not None else None
        past = view.length if view is not None else 0
        total = past + L
        key_valid, positions = _padding(attention_mask, position_ids, past, B, L, device)
        simple = key_valid is None and not _preallocated(cache)
        if simple and positions is not None:  # given position_ids: consecutive from `past`?
            expected = torch.arange(past, total, device=device)
            simple = not _traced() and bool((positions == expected).all())

        states: list[Tensor] | None = (
            []
            if (
                output_hidden_states
                if output_hidden_states is not None
                else getattr(self.config, "output_hidden_states", False)
            )
            else None
        )
        if simple:
            normed = self.model.hidden(input_ids, past, view, states=states, embeds=inputs_embeds)
        else:
            if key_valid is None:
                key_valid = torch.ones(B, total, dtype=torch.bool, device=device)
            if positions is None:
                positions = torch.arange(past, total, device=device).expand(B, L)
            if input_ids is not None:  # a pad id beyond the embedding's rows: never read anyway
                rows = self.model.embed.num_embeddings
                input_ids = input_ids.masked_fill(~key_valid[:, past:] & (input_ids >= rows), 0)
            normed = self.model.hidden(
                input_ids,
                past,
                view,
                states=states,
                positions=positions,
                mask=padding_mask(key_valid, L),
                embeds=inputs_embeds,
            )
        # transformers' convention: the last entry is the final norm's output
        hidden = (*states[:-1], normed) if states is not None else None
        return _TrunkOutput(normed, hidden, cache)


class GoatDNAModel(GoatDNAPreTrainedModel):
    """The trunk: final-normed hidden states (B, L, d_model), what fine-tuning pools.

    It keeps the checkpoint's layout (``model.*``), so every goatdna export loads as
    ``AutoModel`` with no missing or renamed weight; only the LM head (``model.head``) is
    dropped, as transformers' trunks have none.
    """

    _keys_to_ignore_on_load_unexpected = [r"^model\.head\."]  # noqa: RUF012

    def __init__(self, config: GoatDNAConfig) -> None:
        super().__init__(config)
        self.model = DNADecoder(config.to_model_config(), BLOCK_CLASS)
        self.model.head = None  # the trunk has no LM head (a checkpoint's is ignored)
        self.post_init()

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        cache: Cache | None = None,
        **kwargs: object,
    ) -> BaseModelOutputWithPast | tuple[Any, ...]:
        with self._attentions(output_attentions) as attentions:
            trunk = self._trunk(
                input_ids, inputs_embeds, attention_mask, position_ids,
                _cache_argument(cache, past_key_values),
                use_cache, output_hidden_states, output_attentions,
            )  # fmt: skip
        output = BaseModelOutputWithPast(
            last_hidden_state=trunk.hidden,
            hidden_states=trunk.states,
            attentions=_tupled(attentions),
            **{_CACHE_FIELD: trunk.cache},
        )
        return output.to_tuple() if return_dict is False else output


class GoatDNAForCausalLM(GoatDNAPreTrainedModel, GenerationMixin):
    """Next-base prediction over A C G T N with goatdna's decoder; logits (B, L, 5)."""

    def __init__(self, config: GoatDNAConfig) -> None:
        super().__init__(config)
        self.model = DNADecoder(config.to_model_config(), BLOCK_CLASS)
        self.post_init()
        if getattr(self, "generation_config", None) is not None:
            self.generation_config.suppress_tokens = [IGNORE_TARGET]  # never generate N

    def create_masks_for_generate(
        self, *args: object, attention_mask: Tensor | None = None, **kwargs: object
    ) -> Tensor | None:
        """The 2-D padding mask as it is: goatdna builds its own mask from it (`_trunk`), also
        for a ``StaticCache``, where transformers would otherwise pass a 4-D one."""
        return attention_mask

    def get_output_embeddings(self) -> nn.Module | None:
        return self.model.head  # None when tied inside DNADecoder (tie_embeddings)

    def set_output_embeddings(self, value: nn.Module) -> None:
        if not isinstance(value, nn.Linear):
            raise TypeError(
                f"the output embedding must be an nn.Linear, got {type(value).__name__}"
            )
        self.model.head = value

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: Tensor | None = None,
        labels: Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        logits_to_keep: int = 0,
        shift_labels: Tensor | None = None,
        cache: Cache | None = None,
        **kwargs: object,
    ) -> CausalLMOutputWithPast | tuple[Any, ...]:
        """input_ids (B, L) -> logits (B, L, 5); ``labels`` (B, L) -> mean next-base loss.

        ``shift_labels`` (B, L), already shifted (target t for position t), replaces ``labels``
        (transformers' sequence-parallel convention). ``logits_to_keep`` k > 0 computes the head
        on the last k positions only (generation). ``hidden_states`` (when asked) follow the
        transformers convention: the embedding output, each block's output, and for the last
        entry the final norm's output.
        """
        with self._attentions(output_attentions) as attentions:
            trunk = self._trunk(
                input_ids, inputs_embeds, attention_mask, position_ids,
                _cache_argument(cache, past_key_values),
                use_cache, output_hidden_states, output_attentions,
            )  # fmt: skip
        normed = trunk.hidden[:, -logits_to_keep:] if logits_to_keep else trunk.hidden
        logits = self.model.logits(normed)  # (B, L, vocab_size)

        loss = None
        if shift_labels is not None or labels is not None:
            if logits_to_keep:
                raise ValueError("labels need every position's logits (logits_to_keep=0)")
            if shift_labels is not None:
                scored, targets = logits, shift_labels
            else:
                assert labels is not None
                scored, targets = logits[:, :-1], labels[:, 1:]
            targets = targets.masked_fill(targets == HF_IGNORE_INDEX, IGNORE_TARGET)
            loss = next_token_loss(scored, targets.long())
        output = CausalLMOutputWithPast(
            loss=loss,
            logits=logits,
            hidden_states=trunk.states,
            attentions=_tupled(attentions),
            # the field's name differs between transformers versions (see _CACHE_FIELD)
            **{_CACHE_FIELD: trunk.cache},
        )
        return output.to_tuple() if return_dict is False else output


def _first_bases(
    input_ids: Tensor | None, inputs_embeds: Tensor | None, lengths: Tensor, keep: int | None
) -> tuple[Tensor | None, Tensor | None, Tensor]:
    """Rows (real tokens first) cut to their first ``keep`` positions (None: all), as
    fine-tuning trained on them."""
    if keep is None:
        return input_ids, inputs_embeds, lengths
    return (
        input_ids[:, :keep] if input_ids is not None else None,
        inputs_embeds[:, :keep] if inputs_embeds is not None else None,
        lengths.clamp(max=keep),
    )


class GoatDNAForSequenceClassification(GoatDNAPreTrainedModel):
    """A `goatdna finetune` model: ``SequenceTaskModel``'s pooling, head and strand averaging.

    The weights are the fine-tuned checkpoint's own (``model.*`` backbone, ``head.*`` the
    standardising `SequenceHead`). Rows are read as their real tokens in order (any padding
    side) and run exactly as `goatdna predict` runs them: right-padded with N, pooled over the
    real positions (``classifier_pool``) of the layer the probe reads (``classifier_layer``; a
    row's first ``classifier_max_length`` bases), through the head, and with ``classifier_rc_average``
    averaged with the reverse complement's probabilities (classification) or values.

    ``logits``: classification, the log of the predicted probabilities when strands are averaged
    (so ``softmax(logits)`` is `goatdna predict`'s ``prob_*``), else the head's logits;
    regression (``problem_type="regression"`` or one label), the value in label units. The loss
    is goatdna's: cross-entropy, or MSE of the standardised value. A checkpoint's LM head
    (``model.head``) is not part of the classifier and is ignored. ``hidden_states`` and
    ``attentions`` are the forward strand's, on the rows as run (real tokens first, then N).
    """

    _keys_to_ignore_on_load_unexpected = [r"^model\.head\."]  # noqa: RUF012

    def __init__(self, config: GoatDNAConfig) -> None:
        super().__init__(config)
        labels = config.num_labels
        assert labels is not None  # PretrainedConfig's default is 2
        self.num_labels = labels
        self.model = DNADecoder(config.to_model_config(), BLOCK_CLASS)
        self.model.head = None  # no LM head: the classifier's head is `head`
        self.head = SequenceHead(config.d_model, labels, config.classifier_dropout)
        self.post_init()

    @property
    def regression(self) -> bool:
        kind = getattr(self.config, "problem_type", None)
        return kind == "regression" or (kind is None and self.config.num_labels == 1)

    def _outputs(
        self,
        tokens: Tensor | None,
        embeds: Tensor | None,
        lengths: Tensor,
        states: list[Tensor] | None = None,
    ) -> Tensor:
        """`SequenceTaskModel.outputs`: right-padded rows -> head outputs (B, n_outputs)."""
        layer = getattr(self.config, "classifier_layer", None)  # None: the final norm's
        hidden = self.model.hidden(tokens, embeds=embeds, states=states, layers=layer)  # causal
        if states is not None and layer is None:
            states[-1] = hidden  # transformers' convention: the final norm's output last
        return self.head(pool_hidden(hidden, lengths, self.config.classifier_pool))

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        inputs_embeds: Tensor | None = None,
        labels: Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: object,
    ) -> SequenceClassifierOutputWithPast | tuple[Any, ...]:
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids and inputs_embeds")
        first = input_ids if input_ids is not None else inputs_embeds
        assert first is not None
        B, L = first.shape[:2]
        if attention_mask is None:
            lengths = torch.full((B,), L, dtype=torch.long, device=first.device)
        else:
            real = attention_mask.bool()
            lengths = real.sum(-1)
            # each row's real tokens first, in order (a stable sort of the padding flags)
            order = torch.sort((~real).to(torch.int8), dim=-1, stable=True).indices
            if input_ids is not None:
                input_ids = input_ids.gather(1, order)
            if inputs_embeds is not None:
                inputs_embeds = inputs_embeds.gather(
                    1, order[..., None].expand(-1, -1, inputs_embeds.shape[-1])
                )
        keep = getattr(self.config, "classifier_max_length", None)  # as `goatdna predict` keeps
        input_ids, inputs_embeds, lengths = _first_bases(input_ids, inputs_embeds, lengths, keep)
        if input_ids is not None:  # N after the end, exactly as goatdna pads
            columns = torch.arange(input_ids.shape[1], device=input_ids.device)
            input_ids = input_ids.masked_fill(columns[None, :] >= lengths[:, None], PAD_TOKEN)

        want_states = (
            output_hidden_states
            if output_hidden_states is not None
            else getattr(self.config, "output_hidden_states", False)
        )
        states: list[Tensor] | None = [] if want_states else None
        with self._attentions(output_attentions) as attentions:  # the forward strand's
            outputs = self._outputs(input_ids, inputs_embeds, lengths, states)  # (B, n_outputs)
        rc = None
        if self.config.classifier_rc_average:
            if input_ids is None:
                raise ValueError("classifier_rc_average needs input_ids (the reverse strand)")
            rc = self._outputs(reverse_complement_padded(input_ids, lengths), None, lengths)

        mean, std = self.config.regression_label_mean, self.config.regression_label_std
        multi_label = self.config.problem_type == "multi_label_classification"
        if self.regression:
            value = outputs if rc is None else 0.5 * (outputs + rc)
            logits = value * std + mean
        elif rc is None:
            logits = outputs
        elif multi_label:  # independent labels: the strands' probabilities, as log-odds
            logits = torch.logit(0.5 * (outputs.float().sigmoid() + rc.float().sigmoid()))
        else:
            logits = torch.log(0.5 * (outputs.float().softmax(-1) + rc.float().softmax(-1)))

        loss = None
        if labels is not None:
            if self.regression:
                target = (labels.to(logits.dtype) - mean) / std
                loss = F.mse_loss(((logits - mean) / std).float().view(-1), target.float().view(-1))
            elif multi_label:
                loss = F.binary_cross_entropy_with_logits(logits.float(), labels.float())
            else:
                loss = F.cross_entropy(logits.float().view(B, -1), labels.long().view(-1))
        output = SequenceClassifierOutputWithPast(
            loss=loss,
            logits=logits,
            hidden_states=tuple(states) if states is not None else None,
            attentions=_tupled(attentions),
        )
        return output.to_tuple() if return_dict is False else output
