"""The authors' ``goat.GoatAttention`` (goat-attention 0.1.1) <-> goatdna's `CausalSelfAttention`.

``from_goat_attention(module)`` builds a goatdna attention layer that computes the same function
as a causal ``GoatAttention`` (as ``GoatAttention.for_gpt`` builds it: 1-D positions, self-attention;
bias or not, fused or separate q/k/v, any ``pos_rank`` R, ``abs_rank`` M, ``prior_init``,
``kv_num_heads`` and ``prior_gate``); ``goat_attention_state_dict(layer)`` is the way back, a state
dict that ``GoatAttention(**goat_attention_kwargs(config))`` loads. The layer's config says
goat-attention's parameterisation with goatdna's options (`ModelConfig`): ``goat_key_mlp='shared'``,
``goat_slope='softplus'``, ``goat_alignment_slot=False``, ``goat_features='float32'`` and so on.

The weights map one to one. goat-attention projects a full head (d_h rows per head) for queries
and keys and keeps the first d_c = d_h - (2R + 1) rows as content (the rest are computed and
overwritten by the position slots), and it holds the query-norm gate's two vectors even with the
gate off: the converted layer has ``goat_qk_layout='authors'``, which carries those tensors (never
read), so a state dict goes to goatdna and back unchanged, bit for bit. A layer of goatdna's own
layout (``'content'``: d_c rows) goes back too, its missing rows zeros and the gate at the
package's initial values (nothing reads them).

Refusals raise `GoatAttentionConversionError`, a `ValueError` defined here: `goatdna.model` is
the bottom layer (torch only, no other goatdna import; see pyproject's import-linter contracts), so
it cannot raise `goatdna.errors.GoatDNAError`; like the rest of model (`ModelConfig`'s checks) it
raises a `ValueError` that says what to change. No goatdna command calls the converter (it is
Python API for users converting weights), so no CLI needs to translate it. Not shipped by
``goatdna export`` (the wrapper does not reach it), though it would be safe to: torch only.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from .attention import CausalSelfAttention
from .config import ModelConfig
from .goat import GoatPrior

_WHAT = "from_goat_attention"


class GoatAttentionConversionError(ValueError):
    """A GoatAttention module or goatdna layer that has no counterpart on the other side; the
    message names the option and what to change (one line)."""


def _refuse(message: str) -> GoatAttentionConversionError:
    return GoatAttentionConversionError(f"{_WHAT}: {message}")


def _base_of(freqs: Tensor, name: str) -> float:
    """The frequency base ``B`` of goat-attention's float32 table ``B^(-k/max(K-1, 1))``.

    The module keeps the table, not the base; the base is read back from its last entry and
    checked to rebuild the table bit for bit (goatdna computes the float32 frequencies itself)."""
    count = freqs.numel()
    if count < 2:
        return 10_000.0  # one frequency (1) or none: the base does not enter
    approx = 1.0 / float(freqs[-1])
    for base in (float(f"{approx:.6g}"), float(f"{approx:.9g}"), approx):
        r = torch.arange(count, dtype=torch.float32)
        if torch.equal(base ** (-r / max(count - 1, 1)), freqs.detach().float().cpu()):
            return base
    raise _refuse(f"cannot recover the frequency base of {name} (a table that is no base^-k/(K-1))")


def _check_module(module: Any) -> None:
    """One line for each GoatAttention that goatdna's causal decoder layer cannot be."""
    try:
        from goat import GoatAttention  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError as exc:  # pragma: no cover - goat-attention is a dev dependency
        raise _refuse("needs goat-attention (pip install goat-attention==0.1.1)") from exc
    if not isinstance(module, GoatAttention):
        raise _refuse(f"expected a goat.GoatAttention, got {type(module).__name__}")
    if module.pos_encoding != "1d":
        raise _refuse(
            f"pos_encoding={module.pos_encoding!r} (ViT, 2-D grid) has no 1-D goatdna form: "
            "build the module with pos_encoding='1d' (GoatAttention.for_gpt)"
        )
    if module.kdim != module.embed_dim or module.vdim != module.embed_dim:
        raise _refuse(
            f"kdim/vdim ({module.kdim}/{module.vdim}) != embed_dim ({module.embed_dim}): "
            "cross-attention has no goatdna form; convert self-attention modules only"
        )
    if module.add_bias_kv or module.add_zero_attn:
        raise _refuse(
            "add_bias_kv/add_zero_attn append key/value slots goatdna's causal layer has not: "
            "build the module without them"
        )
    if not module.enable_key_bias:
        raise _refuse(
            "enable_key_bias=False leaves no key-bias slot (d_p = 2R); goatdna's prior always has "
            "u_h(j): build the module with enable_key_bias=True"
        )
    if module.training_seq_len is None:
        raise _refuse(
            "training_seq_len=None normalises positions by each call's length; give the module "
            "a training_seq_len (for_gpt's default is 2048)"
        )
    scale = float(module.goat_prior_scale)
    if scale != 1.0:
        raise _refuse(
            f"goat_prior_scale is {scale} (a prior-scale schedule in progress): call "
            "set_goat_prior_scale(1.0) first"
        )


def goat_attention_config(module: Any) -> ModelConfig:
    """The `ModelConfig` whose attention layer computes ``module`` (a one-layer shape; d_model,
    heads and the prior's options are the module's)."""
    _check_module(module)
    heads, kv_heads = module.num_heads, module.kv_num_heads
    bias = module.out_proj.bias is not None
    return ModelConfig(
        positional="goat",
        n_layers=1,
        d_model=module.embed_dim,
        n_heads=heads,
        n_kv_heads=None if kv_heads == heads else kv_heads,
        attention="sdpa",
        attention_bias=bias,
        train_length=int(module.training_seq_len),
        goat_modes=module.R,
        goat_freq_base=_base_of(module.rel_freqs_base, "rel_freqs_base"),
        goat_abs_modes=module.M,
        goat_abs_freq_base=_base_of(module.abs_freqs_base, "abs_freqs_base"),
        goat_key_mlp="shared",
        goat_mlp_hidden=module.key_bias.fc1.out_features,
        goat_slope="softplus",
        goat_init=module.prior_init,
        goat_split_key_bias=False,
        goat_alignment_slot=False,
        goat_features="float32",
        goat_prior_gate=module.prior_gate,
        goat_qk_layout="authors",
    )


def _full_rows(weight: Tensor, heads: int, head_dim: int, content_dim: int) -> Tensor:
    """A ``goat_qk_layout='content'`` projection (d_c rows per head) in the package's shape: each
    head's d_c rows, then zero rows up to ``head_dim`` (the package overwrites their outputs).
    An ``'authors'`` projection (``head_dim`` rows already) as it is."""
    if content_dim == head_dim or weight.shape[0] == heads * head_dim:
        return weight
    rows = weight.reshape(heads, content_dim, *weight.shape[1:])
    full = rows.new_zeros(heads, head_dim, *weight.shape[1:])
    full[:, :content_dim] = rows
    return full.reshape(heads * head_dim, *weight.shape[1:])


def from_goat_attention(module: Any) -> CausalSelfAttention:
    """A goatdna attention layer computing what the causal ``goat.GoatAttention`` ``module`` does.

    ``layer(x, start_pos)`` equals ``module(x, x, x, is_causal=True, position_offset_q=start_pos,
    position_offset_k=start_pos)[0]`` (float32: within float32 rounding), the KV cache and padded
    batches included. Refused in one line (`GoatAttentionConversionError`): 2-D (ViT) modules, cross-attention
    (kdim/vdim), ``add_bias_kv``/``add_zero_attn``, ``enable_key_bias=False``, no
    ``training_seq_len``. ``dropout`` is not carried over (goatdna's attention has none; the
    function in eval mode is the same).
    """
    config = goat_attention_config(module)
    layer = CausalSelfAttention(config)
    prior = layer.prior
    assert isinstance(prior, GoatPrior) and prior.key_mlp is not None
    E, kvE = module.embed_dim, module.kv_embed_dim
    if module.in_proj is not None:
        w, b = module.in_proj.weight, module.in_proj.bias
        q_w, k_w, v_w = w.split([E, kvE, kvE])
        q_b, k_b, v_b = b.split([E, kvE, kvE]) if b is not None else (None, None, None)
    else:
        q_w, k_w, v_w = module.q_proj.weight, module.k_proj.weight, module.v_proj.weight
        q_b, k_b, v_b = module.q_proj.bias, module.k_proj.bias, module.v_proj.bias
    with torch.no_grad():  # goat_qk_layout 'authors': every tensor has the package's shape
        layer.q_proj.weight.copy_(q_w)
        layer.k_proj.weight.copy_(k_w)
        layer.v_proj.weight.copy_(v_w)
        layer.o_proj.weight.copy_(module.out_proj.weight)
        if config.attention_bias:
            assert q_b is not None and k_b is not None and v_b is not None
            layer.q_proj.bias.copy_(q_b)
            layer.k_proj.bias.copy_(k_b)
            layer.v_proj.bias.copy_(v_b)
            layer.o_proj.bias.copy_(module.out_proj.bias)
        for ours, theirs in _PRIOR_NAMES.items():
            _prior_tensor(prior, ours).copy_(_module_tensor(module, theirs))
        prior.gate_scale.copy_(module.prior_gate_scale_raw)
        prior.gate_bias.copy_(module.prior_gate_bias)
    return layer


_PRIOR_NAMES = {
    "alpha": "lambda_sym",
    "beta": "lambda_asym",
    "slope": "recency_slope_raw",
    "sink": "sink_bump",
    "gain": "sink_gain",
    "key_mlp.fc1.weight": "key_bias.fc1.weight",
    "key_mlp.fc1.bias": "key_bias.fc1.bias",
    "key_mlp.fc2.weight": "key_bias.fc2.weight",
    "key_mlp.fc2.bias": "key_bias.fc2.bias",
}
"""goatdna prior parameter -> goat-attention's name for it (same shape, same meaning)."""


def _prior_tensor(prior: GoatPrior, name: str) -> Tensor:
    return prior.get_parameter(name)


def _module_tensor(module: Any, name: str) -> Tensor:
    return module.get_parameter(name)


def goat_attention_kwargs(config: ModelConfig) -> dict[str, Any]:
    """Keyword arguments of ``GoatAttention.for_gpt`` for the module a layer of ``config`` is
    (the way back; ``fuse_qkv`` is the caller's choice)."""
    _check_authors_config(config)
    return {
        "embed_dim": config.d_model,
        "num_heads": config.n_heads,
        "kv_num_heads": config.kv_heads,
        "bias": config.attention_bias,
        "pos_rank": config.goat_modes,
        "abs_rank": config.goat_abs_modes,
        "pos_base": config.goat_freq_base,
        "abs_base": (
            config.goat_freq_base
            if config.goat_abs_freq_base is None
            else config.goat_abs_freq_base
        ),
        "training_seq_len": config.train_length,
        "prior_init": config.goat_init,
        "prior_gate": config.goat_prior_gate,
    }


_ABLATIONS = {
    "goat_directional": (
        False,
        "b_r fixed at 0: goat-attention 0.1.1 has no switch for it (its lambda_asym is always "
        "a trained parameter)",
    ),
    "goat_sink": (
        False,
        "no first-token bump: goat-attention 0.1.1 has no switch for it (its sink_bump is "
        "always a trained parameter)",
    ),
    "goat_key_mlp": (
        "none",
        "no key-only MLP term: goat-attention 0.1.1's only switch, enable_key_bias=False, also "
        "removes the slope, the sink and d_p's key slot",
    ),
    "goat_equal_content": (
        True,
        "heads of d_model / n_heads + d_p dims: goat-attention 0.1.1's heads are always "
        "embed_dim / num_heads wide",
    ),
}
"""The ablation switches (docs/ablations.md) -> (the value that ablates, why goat-attention
cannot express it). Exporting the ablated term as zeros would compute the same function once,
but the package would train it: not the same model, so refused."""


def _refuse_ablation(what: str, key: str) -> GoatAttentionConversionError:
    value, why = _ABLATIONS[key]
    return GoatAttentionConversionError(
        f"{what}: model.{key} is {value!r} ({why}); convert a layer without that ablation"
    )


def _check_authors_config(config: ModelConfig, what: str = "goat_attention_kwargs") -> None:
    for key, (ablated, _) in _ABLATIONS.items():
        if getattr(config, key) == ablated:
            raise _refuse_ablation(what, key)
    wanted = {
        "positional": "goat",
        "goat_key_mlp": "shared",
        "goat_slope": "softplus",
        "goat_alignment_slot": False,
        "goat_split_key_bias": False,
        "goat_learn_freqs": False,
    }
    for key, value in wanted.items():
        if getattr(config, key) != value:
            raise GoatAttentionConversionError(
                f"{what}: model.{key} is {getattr(config, key)!r}; "
                f"goat-attention's layout needs {value!r} (convert layers built by "
                "from_goat_attention or configured with its options)"
            )
    if config.goat_abs_modes is None or config.goat_init not in ("seeded", "uniform"):
        raise GoatAttentionConversionError(
            f"{what}: set model.goat_abs_modes and model.goat_init "
            "('seeded' or 'uniform') as goat-attention's layout has them"
        )
    hidden = min(2 * (2 * config.goat_abs_modes + 2), 4)
    if config.goat_mlp_hidden not in (None, hidden):
        raise GoatAttentionConversionError(
            f"{what}: model.goat_mlp_hidden is {config.goat_mlp_hidden}; "
            f"goat-attention's key-bias MLP has {hidden} (set it to null)"
        )


def _check_layer_ablations(layer: CausalSelfAttention, prior: GoatPrior) -> None:
    """`_check_authors_config`'s ablation refusals for a layer (which keeps no config)."""
    what = "goat_attention_state_dict"
    if not prior.directional:
        raise _refuse_ablation(what, "goat_directional")
    if not prior.has_sink:
        raise _refuse_ablation(what, "goat_sink")
    if prior.key_mlp_kind == "none":
        raise _refuse_ablation(what, "goat_key_mlp")
    if layer.n_heads * layer.head_dim != layer.o_proj.out_features:
        raise _refuse_ablation(what, "goat_equal_content")


def goat_attention_state_dict(
    layer: CausalSelfAttention, *, fuse_qkv: bool = True
) -> dict[str, Tensor]:
    """The way back: a state dict that ``GoatAttention.for_gpt(**kwargs, fuse_qkv=fuse_qkv)``
    loads (strict), ``kwargs`` from `goat_attention_kwargs` of the layer's config; the module
    then computes what ``layer`` does. Only layers in goat-attention's parameterisation
    (`from_goat_attention`'s, or a config with its options) have one; others are refused."""
    prior = layer.prior
    if isinstance(prior, GoatPrior):
        _check_layer_ablations(layer, prior)
    if not isinstance(prior, GoatPrior) or prior.key_mlp is None or prior.alignment_slot:
        raise GoatAttentionConversionError(
            "goat_attention_state_dict: the layer's prior is not in goat-attention's layout "
            "(model.goat_key_mlp 'shared', goat_slope 'softplus', goat_alignment_slot false)"
        )
    if prior.slope_fn != "softplus" or prior.abs_modes is None:
        raise GoatAttentionConversionError(
            "goat_attention_state_dict: set model.goat_slope 'softplus' and model.goat_abs_modes "
            "(goat-attention's layout)"
        )
    H, Hkv, hd, dc = layer.n_heads, layer.kv_heads, layer.head_dim, layer.qk_dim
    q_w = _full_rows(layer.q_proj.weight.detach(), H, hd, dc)
    k_w = _full_rows(layer.k_proj.weight.detach(), Hkv, hd, dc)
    v_w = layer.v_proj.weight.detach()
    out: dict[str, Tensor] = {}
    biased = layer.q_proj.bias is not None
    if biased:
        q_b = _full_rows(layer.q_proj.bias.detach(), H, hd, dc)
        k_b = _full_rows(layer.k_proj.bias.detach(), Hkv, hd, dc)
        v_b = layer.v_proj.bias.detach()
    if fuse_qkv:
        out["in_proj.weight"] = torch.cat([q_w, k_w, v_w])
        if biased:
            out["in_proj.bias"] = torch.cat([q_b, k_b, v_b])
    else:
        out.update({"q_proj.weight": q_w, "k_proj.weight": k_w, "v_proj.weight": v_w})
        if biased:
            out.update({"q_proj.bias": q_b, "k_proj.bias": k_b, "v_proj.bias": v_b})
    out["out_proj.weight"] = layer.o_proj.weight.detach()
    if biased:
        out["out_proj.bias"] = layer.o_proj.bias.detach()
    for ours, theirs in _PRIOR_NAMES.items():
        out[theirs] = _prior_tensor(prior, ours).detach().float()
    if hasattr(prior, "gate_scale"):  # the gate on, or its vectors kept (layout 'authors')
        out["prior_gate_scale_raw"] = prior.gate_scale.detach().float()
        out["prior_gate_bias"] = prior.gate_bias.detach().float()
    else:  # goat-attention keeps the gate's parameters even when it is off: its defaults
        out["prior_gate_scale_raw"] = torch.full((H,), -10.0)
        out["prior_gate_bias"] = torch.full((H,), 10.0)
    for name, count, base in (
        ("rel_freqs_base", prior.num_modes, prior.freq_base),
        ("abs_freqs_base", prior.abs_modes, prior.abs_freq_base),
    ):
        r = torch.arange(count, dtype=torch.float32)
        out[name] = base ** (-r / max(count - 1, 1))
    return {name: tensor.clone() for name, tensor in out.items()}


__all__ = [
    "from_goat_attention",
    "goat_attention_config",
    "goat_attention_kwargs",
    "goat_attention_state_dict",
]
