"""DNADecoder: a pre-norm decoder over nucleotide tokens with GOAT or RoPE positions.

embedding (padded to 8 rows) > n_layers x [RMSNorm > attention > residual, RMSNorm > SwiGLU >
residual] > RMSNorm > head over ``vocab_size`` = 5 classes (A C G T N). No linear biases. N is an
input only: ``next_token_loss`` ignores N targets and samplers mask class 4.

``block_style='gpt2'`` is the paper's genome.py block instead: LayerNorm and a GELU MLP
(``up_proj`` > GELU > ``down_proj``, with biases) in the same pre-norm places.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .alibi import AlibiPrior
from .attention import CausalSelfAttention
from .cache import KVCache, LayerCache
from .config import ModelConfig
from .goat import GoatPrior, shared_tails
from .norm import RMSNorm
from .scoring import IGNORE_TARGET, next_token_loss  # noqa: F401  (re-exported)


class SwiGLU(nn.Module):
    """``down(silu(gate(x)) * up(x))`` (Shazeer 2020).

    Gate and up are two matmuls, not one fused ``gate_up``: the fused output's halves were
    strided views (``silu * up`` ran slower on them), backward concatenated their gradients
    and the forward held one more full-width activation (benchmarks/peer_bench.py).
    """

    def __init__(self, d_model: int, hidden: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(d_model, hidden, bias=False)
        self.up_proj = nn.Linear(d_model, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))  # (B, L, d_model)


class GeluMLP(nn.Module):
    """GPT-2's MLP: ``down(gelu(up(x)))`` with biases (``block_style='gpt2'``)."""

    def __init__(self, d_model: int, hidden: int) -> None:
        super().__init__()
        self.up_proj = nn.Linear(d_model, hidden)
        self.down_proj = nn.Linear(hidden, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.gelu(self.up_proj(x)))  # (B, L, d_model)


def make_norm(config: ModelConfig) -> nn.Module:
    """The block style's norm: RMSNorm (``llama``) or LayerNorm with bias (``gpt2``)."""
    if config.block_style == "gpt2":
        return nn.LayerNorm(config.d_model, eps=config.norm_eps)
    return RMSNorm(config.d_model, eps=config.norm_eps)


FUSED_KEYS = {
    "attn.qkv.weight": ("attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight"),
    "attn.out.weight": ("attn.o_proj.weight",),
    "mlp.gate_up.weight": ("mlp.gate_proj.weight", "mlp.up_proj.weight"),
    "mlp.down.weight": ("mlp.down_proj.weight",),
}
"""Block parameters of the fused layout (checkpoints written before the projections were split) -> their separate ones."""


def _split_fused_keys(
    module: nn.Module, state_dict: dict[str, Tensor], prefix: str, *_args: object
) -> None:
    """Load-time remap of a fused-layout state dict (``blocks.N.attn.qkv.weight``, ``.attn.out``,
    ``.mlp.gate_up``, ``.mlp.down``) onto the separate projections, in place.

    The one place old checkpoints are upgraded: a ``load_state_dict`` pre-hook of `DNADecoder`,
    so every loader (run checkpoints, fine-tuned models, export folders, Fabric resumes) gets it,
    under any wrapper prefix. A fused row block is split exactly: [q | k | v] by the config's
    sizes, [gate | up] in halves, so the upgraded model computes what the old one did.
    """
    assert isinstance(module, DNADecoder)
    c = module.config
    q, k, v = c.n_heads * c.qk_rows, c.kv_heads * c.qk_rows, c.kv_heads * c.head_dim
    sizes = {"attn.qkv.weight": [q, k, v], "mlp.gate_up.weight": [c.mlp_hidden] * 2}
    block_prefix = prefix + "blocks."
    for key in [k for k in state_dict if k.startswith(block_prefix)]:
        layer, _, name = key[len(block_prefix) :].partition(".")
        if name not in FUSED_KEYS:
            continue
        weight = state_dict.pop(key)
        parts = weight.split(sizes[name], dim=0) if name in sizes else (weight,)
        for new_name, part in zip(FUSED_KEYS[name], parts, strict=True):
            state_dict[f"{block_prefix}{layer}.{new_name}"] = part


class Block(nn.Module):
    """One pre-norm decoder layer; its attention owns this layer's own prior (``attn.prior``)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.attn_norm = make_norm(config)
        self.attn = CausalSelfAttention(config)
        self.mlp_norm = make_norm(config)
        self.mlp: SwiGLU | GeluMLP = (
            GeluMLP(config.d_model, config.mlp_hidden)
            if config.block_style == "gpt2"
            else SwiGLU(config.d_model, config.mlp_hidden)
        )

    def forward(
        self,
        x: Tensor,
        start_pos: int = 0,
        cache: LayerCache | None = None,
        layer: int = 0,
        positions: Tensor | None = None,
        mask: Tensor | None = None,
        q_tail: Tensor | None = None,
        k_tail: Tensor | None = None,
    ) -> Tensor:
        """``q_tail``/``k_tail``: this layer's GOAT position slots (`DNADecoder._shared_tails`),
        two tensor arguments rather than a tuple so that a reentrant activation checkpoint
        (transformers' ``use_reentrant=True``) detaches them and hands back their gradients."""
        tails = None if q_tail is None or k_tail is None else (q_tail, k_tail)
        x = x + self.attn(self.attn_norm(x), start_pos, cache, layer, positions, mask, tails)
        return x + self.mlp(self.mlp_norm(x))


class DNADecoder(nn.Module):
    """The decoder: a trunk (`hidden`: embedding, blocks, final norm) and a head (`logits`).

    ``forward(idx, start_pos)`` -> logits (B, L, vocab_size) at absolute positions is the head
    applied to the trunk, as transformers' ``LlamaForCausalLM`` is ``lm_head`` over
    ``LlamaModel``. Code outside ``goatdna/model/`` reads hidden states through `hidden`, the
    depth through `n_layers` and a layer's prior through `prior`, never through ``blocks``.

    ``block_class`` (a `Block` subclass, same weights) lets a wrapper give the blocks a mixin:
    `goatdna.hf` makes them transformers' gradient-checkpointing layers.
    """

    def __init__(self, config: ModelConfig, block_class: type[Block] = Block) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.padded_vocab_size, config.d_model)
        self.blocks = nn.ModuleList(block_class(config) for _ in range(config.n_layers))
        self.norm = make_norm(config)
        self.head = (
            None
            if config.tie_embeddings
            else nn.Linear(config.d_model, config.vocab_size, bias=False)
        )
        self.reset_parameters()
        self._register_load_state_dict_pre_hook(_split_fused_keys, with_module=True)

    def reset_parameters(self) -> None:
        """GPT-2 init: N(0, init_std) weights; residual projections scaled by 1/sqrt(2 n_layers).

        The priors keep their own init (``zero``: exactly standard attention; ``alibi``).
        """
        std = self.config.init_std
        residual_std = std / math.sqrt(2 * self.config.n_layers)
        nn.init.normal_(self.embed.weight, std=std)
        if self.head is not None:
            nn.init.normal_(self.head.weight, std=std)
        for block in self.blocks:
            assert isinstance(block, Block)  # ModuleList items are typed as Module
            for linear in (block.attn.q_proj, block.attn.k_proj, block.attn.v_proj):
                nn.init.normal_(linear.weight, std=std)
            if isinstance(block.mlp, SwiGLU):
                nn.init.normal_(block.mlp.gate_proj.weight, std=std)
            nn.init.normal_(block.mlp.up_proj.weight, std=std)
            nn.init.normal_(block.attn.o_proj.weight, std=residual_std)
            nn.init.normal_(block.mlp.down_proj.weight, std=residual_std)
            for module in (block.attn.q_proj, block.attn.k_proj, block.attn.v_proj,
                           block.attn.o_proj, block.mlp.up_proj, block.mlp.down_proj):  # fmt: skip
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    # ------------------------------------------------------------------ forward passes
    @property
    def n_layers(self) -> int:
        """How many decoder blocks the trunk has (valid ``layers`` of `hidden`: 0..n_layers)."""
        return len(self.blocks)

    def prior(self, layer: int) -> GoatPrior | AlibiPrior | None:
        """Block ``layer``'s (0-based) positional prior; None for RoPE and NoPE models."""
        block = self.blocks[layer]
        assert isinstance(block, Block)  # ModuleList items are typed as Module
        return block.attn.prior

    def hidden(
        self,
        idx: Tensor | None,
        start_pos: int = 0,
        cache: LayerCache | None = None,
        layers: int | None = None,
        *,
        states: list[Tensor] | None = None,
        positions: Tensor | None = None,
        mask: Tensor | None = None,
        embeds: Tensor | None = None,
    ) -> Tensor:
        """The trunk: idx (B, L) at positions start_pos.. -> hidden states (B, L, d_model).

        ``layers=None`` runs every block and the final RMSNorm: the vector the head reads (and
        what fine-tuning pools). ``layers=k`` (0..n_layers) stops after block k and returns the
        residual stream there, *not* normed (k=0: the embedding): an intermediate layer's
        embedding is the stream the next block reads, and the final norm belongs to the head's
        input only. With a ``cache``, ``start_pos`` must be ``cache.length`` (positions stay
        absolute), the new keys/values are appended and ``cache.length`` moves
        on; a cache needs every layer. ``states``, when given a list, receives the embedding and
        every block's output (un-normed), for callers that report them all (transformers'
        ``output_hidden_states``). This is the only loop over the blocks.

        Padded batches (transformers' ``attention_mask``): ``positions`` (B, L) give each row's
        own absolute positions and ``mask`` (`attention.padding_mask`, (B, 1, L, Lk)) the keys
        each query sees; ``start_pos`` then counts cache columns, not positions. ``embeds``
        (B, L, d_model) replaces the embedding lookup (``idx`` None): soft prompts.
        """
        n = self.n_layers if layers is None else layers
        if not 0 <= n <= self.n_layers:
            raise ValueError(f"layers must be in 0..{self.n_layers}, got {layers}")
        if (idx is None) == (embeds is None):
            raise ValueError("pass exactly one of token ids and embeds")
        x = self.embed(idx) if embeds is None else embeds  # (B, L, d_model)
        B, L = x.shape[:2]
        if cache is not None:
            if layers is not None:
                raise ValueError("a KV cache needs every layer (layers=None)")
            if start_pos != cache.length:
                raise ValueError(
                    f"start_pos {start_pos}, but the cache holds {cache.length} positions: "
                    "cached positions stay absolute"
                )
            cache.check_room(B, L)
        if states is not None:
            states.append(x)
        tails = self._shared_tails(x, n, range(start_pos, start_pos + L), cache, positions, mask)
        for layer in range(n):
            q_tail, k_tail = (None, None) if tails is None else tails[layer]
            x = self.blocks[layer](
                x, start_pos, cache, layer, positions, mask, q_tail, k_tail
            )  # (B, L, d_model)
            if states is not None:
                states.append(x)
        if cache is not None:
            cache.length = start_pos + L
        return self.norm(x) if layers is None else x

    def _shared_tails(
        self,
        x: Tensor,
        n: int,
        span: range,
        cache: LayerCache | None,
        positions: Tensor | None,
        mask: Tensor | None,
    ) -> list[tuple[Tensor, Tensor]] | None:
        """GOAT's position slots of the first ``n`` layers for ``span``, computed once for all of
        them (`goat.shared_tails`), in training: with autograd on, a layer's prior cannot reuse
        earlier slots (its weights change every step), so they are built here, outside any
        block (a checkpointed block recomputes its own body, not these). Without autograd each
        prior serves its own cached slots (`goat.WindowTails`); None then, and for per-row
        positions and the explicit backend."""
        if self.config.positional != "goat" or n == 0 or not torch.is_grad_enabled():
            return None
        blocks = list(self.blocks[:n])
        first = blocks[0]
        if not all(isinstance(block, Block) for block in blocks):
            return (
                None  # FSDP-wrapped blocks: their weights exist in full only inside their forward
            )
        assert isinstance(first, Block)  # for mypy
        if positions is not None or not first.attn.packs(cache, positions, mask):
            return None
        device = x.device
        if torch.amp.is_autocast_available(device.type) and torch.is_autocast_enabled(device.type):
            dtype = torch.get_autocast_dtype(device.type)  # what q_proj's output will be
        else:
            dtype = x.dtype  # a Linear's output dtype is its input's (they must match)
        priors = [block.attn.prior for block in blocks if isinstance(block, Block)]
        return shared_tails([p for p in priors if isinstance(p, GoatPrior)], span, dtype, device)

    def hidden_at(
        self, idx: Tensor, layers: Sequence[int | None], start_pos: int = 0
    ) -> list[Tensor]:
        """Several layers' hidden states from one pass: entry i is what
        ``hidden(idx, start_pos, layers=layers[i])`` returns (None: the final norm's output),
        the blocks run once, only as deep as the deepest entry needs."""
        for k in layers:
            if k is not None and not 0 <= k <= self.n_layers:
                raise ValueError(f"layers must be in 0..{self.n_layers} or None, got {k}")
        deepest = None if None in layers else max((k for k in layers if k is not None), default=0)
        states: list[Tensor] = []
        final = self.hidden(idx, start_pos, layers=deepest, states=states)
        return [final if k is None else states[k] for k in layers]

    def logits(self, hidden: Tensor) -> Tensor:
        """The head: final-normed hidden (B, L, d_model) (`hidden`) -> logits (B, L, vocab_size).

        A 5-column output GEMM is unaligned for tensor cores, so the head runs with its weight
        zero-padded to a multiple of 8 rows (the tied embedding is already padded) and the
        extra columns are sliced off. The parameter keeps its (vocab_size, d_model) shape, so
        state_dicts, checkpoints and exports are unchanged; padding rows get no gradient.
        """
        V = self.config.vocab_size
        padded = -(-V // 8) * 8
        if self.head is None:
            weight = self.embed.weight[:padded]  # rows >= V: padding tokens' embeddings
            if weight.shape[0] < padded:
                weight = F.pad(weight, (0, 0, 0, padded - weight.shape[0]))
        else:
            weight = F.pad(self.head.weight, (0, 0, 0, padded - V))  # (padded, d_model)
        return F.linear(hidden, weight)[..., :V]  # (B, L, vocab_size)

    def forward(self, idx: Tensor, start_pos: int = 0) -> Tensor:
        """idx (B, L) token ids at positions start_pos..start_pos+L-1 -> logits (B, L, V)."""
        return self.logits(self.hidden(idx, start_pos))

    def new_cache(
        self, batch_size: int, max_length: int, dtype: torch.dtype | None = None
    ) -> KVCache:
        """An empty KV cache on the model's device, in the model's dtype unless ``dtype`` is given
        (e.g. ``torch.bfloat16`` when decoding under bf16 autocast, to halve its memory)."""
        weight = self.embed.weight
        c = self.config
        return KVCache.empty(
            c.n_layers, batch_size, c.kv_heads, max_length, c.head_dim,
            device=weight.device, dtype=dtype or weight.dtype,
        )  # fmt: skip

    def forward_cached(self, idx: Tensor, cache: LayerCache) -> Tensor:
        """Process idx (B, L) at positions cache.length.. and append to the cache -> logits (B, L, V).

        One call with the prompt is the prefill; then call with one token at a time.
        """
        return self.logits(self.hidden(idx, cache.length, cache))

    # ------------------------------------------------------------------ bookkeeping
    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def param_breakdown(self) -> dict[str, int]:
        """Parameters by component: embedding, attention, mlp, norms, prior, head."""
        counts = dict.fromkeys(("embedding", "attention", "mlp", "norms", "prior", "head"), 0)
        for name, p in self.named_parameters():
            if name.startswith("embed."):
                key = "embedding"
            elif name.startswith("head."):
                key = "head"
            elif ".attn.prior." in name:
                key = "prior"
            elif ".attn." in name:
                key = "attention"
            elif ".mlp." in name:
                key = "mlp"
            else:
                key = "norms"
            counts[key] += p.numel()
        return counts
