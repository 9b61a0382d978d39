"""`model/flops.py` against torch's FlopCounterMode: the formula's forward third, term by term.

`flops_per_token(config, T) = 6 N + 12 n_layers d_model T` is a training count; its forward third,
``2 N + 4 n_layers d_model T`` per token, is what a forward pass of B rows of T tokens should
cost in matmul FLOPs (FlopCounterMode counts matmuls and attention, 2 FLOPs per multiply-add; it
ignores elementwise work, as the formula does). The measured count differs from
``B T flops_per_token / 3`` by exactly these terms, each asserted below:

* **norms**: RMSNorm weights are in N (`matmul_params` drops only the embedding table) but are an
  elementwise scale, not a matmul: ``-2 * norm_params`` per token.
* **head padding**: the output GEMM runs on the weight zero-padded from ``vocab_size`` (5) to 8 rows
  (`DNADecoder.logits`): ``+2 * d_model * (8 - vocab_size)`` per token.
* **GOAT's prior**: the formula charges its parameters per token (``2 * prior_params``); the model
  runs the prior's MLP (``phi (T, 2R+2) -> M -> 1`` per head) and the rotation
  (``k_rel (T, 2R) @ W_h (2R, 2R)``) once per position, shared by the batch rows.
* attention: SDPA's score and value products over the full ``T x T`` (torch's formula, like ours,
  does not halve for the causal mask). On CPU SDPA dispatches to
  ``aten._scaled_dot_product_flash_attention_for_cpu``, which FlopCounterMode has no formula for,
  so the test maps it to torch's own `sdpa_flop_count`.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from goatdna.model import DNADecoder, ModelConfig, flops_per_token

CONFIG = ModelConfig(
    n_layers=2,
    d_model=64,
    n_heads=2,
    mlp_hidden=96,
    train_length=64,
    goat_modes=4,
    goat_mlp_hidden=8,
    attention="sdpa",
)
PADDED_HEAD_ROWS = 8


def _cpu_sdpa_flops(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _measured_forward_flops(model: DNADecoder, batch: int, length: int) -> int:
    idx = torch.randint(0, 5, (batch, length))
    cpu_sdpa = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    counter = FlopCounterMode(display=False, custom_mapping={cpu_sdpa: _cpu_sdpa_flops})
    with torch.no_grad(), counter:
        model(idx)
    return counter.get_total_flops()


def _prior_flops_per_position(config: ModelConfig) -> int:
    """One layer's GOAT prior matmuls for one position: its MLP and the q_rel rotation."""
    H, R, M = config.n_heads, config.goat_modes, config.goat_mlp_hidden
    features = 2 * R + 2
    return 2 * H * features * M + 2 * H * M + 2 * H * (2 * R) * (2 * R)


@pytest.mark.parametrize("positional", ["rope", "goat", "goat authors"])
def test_forward_flops_match_the_formula_term_by_term(positional: str) -> None:
    """``goat authors``: goat_qk_layout 'authors' holds each head's d_p position rows of the
    query/key weights without multiplying them; N leaves them out (they were charged)."""
    layout = "authors" if positional.endswith("authors") else "content"
    config = replace(CONFIG, positional=positional.split()[0], goat_qk_layout=layout)
    model = DNADecoder(config).eval()
    batch, length = 3, 40
    tokens = batch * length
    measured = _measured_forward_flops(model, batch, length)

    formula = flops_per_token(config, length) * tokens / 3
    parts = model.param_breakdown()
    norms = -2 * parts["norms"] * tokens
    head_padding = 2 * config.d_model * (PADDED_HEAD_ROWS - config.vocab_size) * tokens
    prior = 0
    if config.positional == "goat":
        run = config.n_layers * _prior_flops_per_position(config) * length
        prior = run - 2 * parts["prior"] * tokens
    else:
        assert parts["prior"] == 0
    assert measured == formula + norms + head_padding + prior

    # The named terms are small next to N and the attention products: the formula is a sound MFU
    # denominator. Here they sum to 0.2% (RoPE) and 0.5% (GOAT, whose prior is charged per batch
    # row but computed per position); every one shrinks relative to N as the model grows.
    assert measured == pytest.approx(formula, rel=0.01)


def test_attention_term_grows_with_the_square_of_the_length() -> None:
    """Doubling T doubles the per-token attention term of the formula and of the measurement."""
    config = replace(CONFIG, positional="rope")
    model = DNADecoder(config).eval()
    per_token = {t: _measured_forward_flops(model, 1, t) / t for t in (32, 64)}
    formula = {t: flops_per_token(config, t) / 3 for t in (32, 64)}
    assert per_token[64] - per_token[32] == pytest.approx(formula[64] - formula[32], rel=1e-12)
    assert formula[64] - formula[32] == 4 * config.n_layers * config.d_model * 32
