"""The paper's genome.py model built from the authors' ``goat.GoatAttention`` (goat-attention
0.1.1, a dev dependency), and goatdna's `DNADecoder` holding the same weights: the reference of
tests/test_model_goat_conformance.py's whole-model check and of benchmarks/authors_bench.py's
whole-model timing. One definition for both, so the model that is timed is the one that is
checked to compute goatdna's function."""

from __future__ import annotations

import dataclasses

import torch
from goat import GoatAttention

from goatdna.model import DNADecoder, ModelConfig, from_goat_attention, goat_attention_config

# genome.py's GoatAttention options at its argparse defaults (--goat_pos_rank 2, --goat_abs_rank 8,
# --goat_prior_init seeded, --dropout 0; kv heads = heads)
GENOME_PY_GOAT = {"dropout": 0.0, "pos_rank": 2, "abs_rank": 8, "prior_init": "seeded"}


def genome_goat_attention(d: int = 512, heads: int = 8, train: int = 1024) -> GoatAttention:
    """genome.py's GOAT attention; at the defaults its own shape (d_model 512, 8 heads,
    --seq_len 1024)."""
    return GoatAttention.for_gpt(
        embed_dim=d, num_heads=heads, kv_num_heads=heads, training_seq_len=train, **GENOME_PY_GOAT
    )


class GenomeBlock(torch.nn.Module):
    """The paper's genome.py block: GPT-2 pre-norm (LayerNorm, GELU MLP x4 with biases) around
    a ``GoatAttention.for_gpt``."""

    def __init__(self, d: int, heads: int, train: int, **kw: object) -> None:
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(d)
        self.attn = GoatAttention.for_gpt(d, heads, training_seq_len=train, **kw)
        self.ln_2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, is_causal=True, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class GenomeGPT(torch.nn.Module):
    """genome.py's GPT shape: token embedding (A C G T N), blocks, final LayerNorm, tied head.
    ``kw`` goes to every block's ``GoatAttention.for_gpt``."""

    def __init__(
        self, d: int = 64, heads: int = 4, train: int = 32, layers: int = 2, **kw: object
    ) -> None:
        super().__init__()
        self.wte = torch.nn.Embedding(5, d)
        self.blocks = torch.nn.ModuleList(GenomeBlock(d, heads, train, **kw) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(d)
        self.lm_head = torch.nn.Linear(d, 5, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def goatdna_from_genome_gpt(gpt: GenomeGPT, config: ModelConfig | None = None) -> DNADecoder:
    """goatdna's `DNADecoder` with ``gpt``'s weights. Its config is ``config`` where given (a
    config file's model section: the strict state-dict load then checks it has gpt's structure),
    else the converted attention's options with block_style gpt2 and tied embeddings."""
    d = gpt.wte.embedding_dim
    if config is None:
        config = dataclasses.replace(
            goat_attention_config(gpt.blocks[0].attn), n_layers=len(gpt.blocks), mlp_hidden=4 * d,
            block_style="gpt2", tie_embeddings=True,
        )  # fmt: skip
    model = DNADecoder(config).eval()
    state = model.state_dict()
    state["embed.weight"][:5] = gpt.wte.weight.detach()
    for n, block in enumerate(gpt.blocks):
        parts = {
            "attn": from_goat_attention(block.attn),
            "attn_norm": block.ln_1,
            "mlp_norm": block.ln_2,
            "mlp.up_proj": block.mlp[0],
            "mlp.down_proj": block.mlp[2],
        }
        for prefix, module in parts.items():
            for name, tensor in module.state_dict().items():
                state[f"blocks.{n}.{prefix}.{name}"] = tensor
    for name, tensor in gpt.ln_f.state_dict().items():
        state[f"norm.{name}"] = tensor
    model.load_state_dict(state, strict=True)
    return model
