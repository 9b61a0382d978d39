"""goatdna's GOAT options against the authors' package itself (goat-attention 0.1.1, a dev
dependency): `from_goat_attention` gives a layer that computes what ``goat.GoatAttention`` does,
in float32 to 1e-5, at and beyond the training length, with the KV cache, position offsets and
padded batches; the way back loads into ``GoatAttention``; and changing any one term of the prior
breaks the match (so the match is not an accident of a term that never shows)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from genome_gpt import GenomeGPT, genome_goat_attention, goatdna_from_genome_gpt
from goat import GoatAttention

from goatdna.model import (
    GoatAttentionConversionError,
    KVCache,
    ModelConfig,
    from_goat_attention,
    goat_attention_config,
    goat_attention_kwargs,
    goat_attention_state_dict,
)
from goatdna.model.attention import CausalSelfAttention, padding_mask
from goatdna.model.goat import GoatPrior

D, HEADS, TRAIN = 64, 4, 32
LENGTHS = (7, TRAIN, 4 * TRAIN)  # within, at and 4x beyond the training length
TOL = 1e-5

pytestmark = pytest.mark.usefixtures("one_thread")


def trained(module: GoatAttention, seed: int = 0) -> GoatAttention:
    """Prior parameters as training leaves them (not the near-zero init): cosine and sine weights
    of order 1, slopes around 0.05, a sink bump, head gains, an MLP that matters, a gate that
    is neither open nor shut."""
    g = torch.Generator().manual_seed(seed)

    def rand(p: torch.Tensor, std: float, mean: float = 0.0) -> torch.Tensor:
        return mean + std * torch.randn(p.shape, generator=g)

    with torch.no_grad():
        module.lambda_sym.copy_(rand(module.lambda_sym, 0.7))
        module.lambda_asym.copy_(rand(module.lambda_asym, 0.7))
        module.recency_slope_raw.copy_(rand(module.recency_slope_raw, 0.5, -3.0))
        module.sink_bump.copy_(rand(module.sink_bump, 1.0))
        module.sink_gain.copy_(rand(module.sink_gain, 0.3, 1.0))
        for p in module.key_bias.parameters():
            p.copy_(rand(p, 0.5))
        module.prior_gate_scale_raw.copy_(rand(module.prior_gate_scale_raw, 0.3, -1.0))
        module.prior_gate_bias.copy_(rand(module.prior_gate_bias, 0.3, 1.0))
    return module.eval()


def authors(**kw: object) -> GoatAttention:
    torch.manual_seed(0)
    return trained(GoatAttention.for_gpt(D, HEADS, training_seq_len=TRAIN, **kw))


def theirs(module: GoatAttention, x: torch.Tensor, **kw: object) -> torch.Tensor:
    with torch.no_grad():
        return module(x, x, x, is_causal=True, need_weights=False, **kw)[0]


MODULES = {
    "for_gpt": {},  # fused, biased, R = 0, M = 8, seeded
    "modes": {"pos_rank": 4, "abs_rank": 3},
    "separate_nobias": {"pos_rank": 3, "fuse_qkv": False, "bias": False},
    "gqa_uniform": {"pos_rank": 2, "abs_rank": 0, "kv_num_heads": 2, "prior_init": "uniform"},
    "mqa_bases": {"pos_rank": 5, "kv_num_heads": 1, "pos_base": 1000.0, "abs_base": 500.0},
    "gate": {"pos_rank": 3, "prior_gate": "query_norm"},
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_outputs_equal_the_package(name: str) -> None:
    module = authors(**MODULES[name])
    layer = from_goat_attention(module).eval()
    assert isinstance(layer.prior, GoatPrior)
    for length in LENGTHS:
        x = torch.randn(2, length, D, generator=torch.Generator().manual_seed(length))
        with torch.no_grad():
            ours = layer(x)
        torch.testing.assert_close(ours, theirs(module, x), atol=TOL, rtol=TOL)
    # a position offset beyond the training length, without a cache
    x = torch.randn(1, 20, D)
    with torch.no_grad():
        ours = layer(x, start_pos=3 * TRAIN)
    offset = 3 * TRAIN
    expected = theirs(module, x, position_offset_q=offset, position_offset_k=offset)
    torch.testing.assert_close(ours, expected, atol=TOL, rtol=TOL)


@pytest.mark.parametrize("name", ["modes", "gqa_uniform", "gate"])
def test_kv_cache_decoding_with_offsets(name: str) -> None:
    """Prefill at an offset, then one token at a time: each step's output is the package's
    with its own KV cache (``past_key_value``), and the cache keeps only the kv heads."""
    module = authors(**MODULES[name])
    layer = from_goat_attention(module).eval()
    start, prompt, steps = 5, 9, 6
    x = torch.randn(2, prompt + steps, D, generator=torch.Generator().manual_seed(1))
    cache = KVCache.empty(1, 2, layer.kv_heads, start + prompt + steps, layer.head_dim)
    # positions 0..start-1 hold a context of zeros in both caches
    pre = torch.zeros(2, start, D)
    with torch.no_grad():
        layer(pre, 0, cache)
        cache.length = start
        _, _, past = module(
            pre,
            pre,
            pre,
            is_causal=True,
            need_weights=False,
            use_cache=True,
            return_present_kv=True,
        )
        for lo, hi in [(0, prompt)] + [(t, t + 1) for t in range(prompt, prompt + steps)]:
            chunk = x[:, lo:hi]
            ours = layer(chunk, cache.length, cache)
            cache.length += hi - lo
            expected, _, past = module(
                chunk,
                chunk,
                chunk,
                is_causal=True,
                need_weights=False,
                past_key_value=past,
                use_cache=True,
                return_present_kv=True,
            )
            torch.testing.assert_close(ours, expected, atol=TOL, rtol=TOL)
    assert cache.keys.shape[2] == module.kv_num_heads


@pytest.mark.parametrize("side", ["left", "right"])
def test_padded_batch(side: str) -> None:
    """Rows padded on either side: the package's ``key_padding_mask`` and goatdna's per-row
    ``positions`` + `padding_mask` give the same outputs at every real token."""
    module = authors(**MODULES["modes"])
    layer = from_goat_attention(module).eval()
    L = 2 * TRAIN
    x = torch.randn(3, L, D, generator=torch.Generator().manual_seed(2))
    valid = torch.ones(3, L, dtype=torch.bool)
    for row, pad in enumerate((0, 5, 17)):
        if side == "left":
            valid[row, :pad] = False
        else:
            valid[row, L - pad :] = False
    positions = torch.arange(L).expand(3, L)  # the package's positions are the columns
    with torch.no_grad():
        ours = layer(x, positions=positions, mask=padding_mask(valid, L))
    expected = theirs(module, x, key_padding_mask=~valid)
    # real tokens only: a left pad query sees no key at all in the package (NaN there)
    torch.testing.assert_close(ours[valid], expected[valid], atol=TOL, rtol=TOL)


@pytest.mark.parametrize("name", ["for_gpt", "modes", "gqa_uniform"])
def test_log_prior_maps(name: str) -> None:
    """``compute_log_prior`` (the package's head-averaged map, causal: with the slope) equals
    goatdna's per-head prior maps averaged, at 4x the training length."""
    module = authors(**MODULES[name])
    layer = from_goat_attention(module)
    assert isinstance(layer.prior, GoatPrior)
    L = 4 * TRAIN
    with torch.no_grad():
        ours = layer.prior.log_prior(range(L), range(L))  # (H, L, L)
    expected = module.compute_log_prior(L, torch.device("cpu"), is_causal=True)
    assert ours.shape == (HEADS, L, L)
    torch.testing.assert_close(ours.mean(0), expected, atol=TOL, rtol=TOL)


PERTURBATIONS = {
    # one term of the prior each: K_rel's cosine and sine weights, the slope, the sink bump, the
    # per-head gain, the shared MLP's two layers, its position features (L_train), the relative
    # and absolute frequency bases, the query-norm gate's two parameters
    "cosine": lambda p: p.alpha.add_(0.05),
    "sine": lambda p: p.beta.add_(0.05),
    "slope": lambda p: p.slope.add_(0.3),
    "sink": lambda p: p.sink.add_(0.5),
    "gain": lambda p: p.gain.mul_(1.1),
    "mlp_hidden_layer": lambda p: p.key_mlp.fc1.weight.add_(0.05),
    "mlp_output_layer": lambda p: p.key_mlp.fc2.weight.add_(0.05),
    "features_train_length": lambda p: setattr(p, "train_length", 2 * p.train_length),
    "relative_base": lambda p: setattr(p, "freq_base", p.freq_base * 1.5),
    "absolute_base": lambda p: setattr(p, "abs_freq_base", p.abs_freq_base * 1.5),
    "gate_scale": lambda p: p.gate_scale.add_(0.1),
    "gate_bias": lambda p: p.gate_bias.add_(0.1),
}


@pytest.mark.parametrize("term", sorted(PERTURBATIONS))
def test_changing_any_term_breaks_the_match(term: str) -> None:
    module = authors(pos_rank=3, abs_rank=3, prior_gate="query_norm")
    layer = from_goat_attention(module).eval()
    x = torch.randn(2, 2 * TRAIN, D, generator=torch.Generator().manual_seed(3))
    expected = theirs(module, x)
    with torch.no_grad():
        torch.testing.assert_close(layer(x), expected, atol=TOL, rtol=TOL)
        PERTURBATIONS[term](layer.prior)
        layer.prior._window_tails.clear()  # attributes are fixed after construction: its
        layer.prior._decode_block = None  # cached slots know only the parameters' versions
        changed = layer(x)
    assert (changed - expected).abs().max() > 30 * TOL  # the conformance check fails


def _same_bits(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert sorted(a) == sorted(b)
    for name, tensor in a.items():
        assert b[name].dtype == tensor.dtype and torch.equal(b[name], tensor), name


@pytest.mark.parametrize("layout", ["content", "authors"])
@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_round_trip(fuse: bool, bias: bool, layout: str) -> None:
    """goatdna -> GoatAttention: a layer configured with the package's options (not converted
    from one) gives a state dict that the package loads strictly and that computes the layer;
    converting back gives the same tensors (goat_qk_layout 'authors': the same state dict, bit
    for bit; 'content': the same content rows, the package's extra rows zeros)."""
    config = ModelConfig(
        n_layers=1, d_model=D, n_heads=HEADS, n_kv_heads=2, attention="sdpa", train_length=TRAIN,
        attention_bias=bias, goat_modes=3, goat_abs_modes=2, goat_key_mlp="shared",
        goat_mlp_hidden=None, goat_slope="softplus", goat_init="seeded", goat_split_key_bias=False,
        goat_alignment_slot=False, goat_features="float32", goat_qk_layout=layout,
    )  # fmt: skip
    torch.manual_seed(4)
    layer = CausalSelfAttention(config).eval()
    assert isinstance(layer.prior, GoatPrior)
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.3 * torch.randn_like(p))
    module = GoatAttention.for_gpt(**goat_attention_kwargs(config), fuse_qkv=fuse).eval()
    exported = goat_attention_state_dict(layer, fuse_qkv=fuse)
    module.load_state_dict(exported, strict=True)
    x = torch.randn(2, 3 * TRAIN, D)
    with torch.no_grad():
        torch.testing.assert_close(layer(x), theirs(module, x), atol=TOL, rtol=TOL)
    back = from_goat_attention(module)
    assert back.q_proj.weight.shape[0] == HEADS * (D // HEADS)  # the package's full heads
    _same_bits(goat_attention_state_dict(back, fuse_qkv=fuse), exported)
    if layout == "authors":
        _same_bits(back.state_dict(), layer.state_dict())
    else:
        content = config.content_dim
        for name, tensor in layer.state_dict().items():
            theirs_ = back.state_dict()[name]
            if name.startswith(("q_proj", "k_proj")):
                full = theirs_.unflatten(0, (-1, D // HEADS))
                assert torch.equal(full[:, :content].flatten(0, 1), tensor), name
                assert not full[:, content:].any(), name  # the rows the package overwrites
            elif not name.startswith("prior.gate_"):  # the content layout has no gate vectors
                assert torch.equal(theirs_, tensor), name


@pytest.mark.parametrize("name", sorted(MODULES))
def test_package_state_dict_round_trips_bit_for_bit(name: str) -> None:
    """GoatAttention -> goatdna -> GoatAttention: the state dict comes back unchanged, the
    query/key rows the package overwrites and its gate's two vectors (off or on) included."""
    module = authors(**MODULES[name])
    with torch.no_grad():  # position rows and gate vectors that are not their init values
        for p in module.parameters():
            p.add_(0.1 * torch.randn_like(p))
    layer = from_goat_attention(module)
    fuse = module.in_proj is not None
    _same_bits(goat_attention_state_dict(layer, fuse_qkv=fuse), module.state_dict())
    kwargs = goat_attention_kwargs(goat_attention_config(module))
    again = GoatAttention.for_gpt(**kwargs, fuse_qkv=fuse)
    again.load_state_dict(goat_attention_state_dict(layer, fuse_qkv=fuse), strict=True)
    _same_bits(again.state_dict(), module.state_dict())


def test_goatdna_prior_has_no_state_dict_for_the_package() -> None:
    layer = CausalSelfAttention(ModelConfig(n_layers=1, d_model=D, n_heads=HEADS, goat_modes=2))
    with pytest.raises(GoatAttentionConversionError, match="goat-attention's layout"):
        goat_attention_state_dict(layer)


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda: GoatAttention.for_vit(D, HEADS, pos_rank=2), "pos_encoding='2d'"),
        (lambda: GoatAttention(D, HEADS, kdim=32, vdim=32, pos_rank=2), "cross-attention"),
        (lambda: GoatAttention.for_gpt(D, HEADS, fuse_qkv=False, add_bias_kv=True), "add_bias_kv"),
        (lambda: GoatAttention.for_gpt(D, HEADS, training_seq_len=None), "training_seq_len"),
        (lambda: torch.nn.MultiheadAttention(D, HEADS), "expected a goat.GoatAttention"),
    ],
)
def test_refusals_in_one_line(build, words: str) -> None:
    with pytest.raises(GoatAttentionConversionError) as info:
        from_goat_attention(build())
    message = str(info.value)
    assert words in message and "\n" not in message and message.startswith("from_goat_attention")


def test_config_that_cannot_hold_the_content_dims_names_the_key() -> None:
    """head_dim 16 with R = 7 and no alignment slot: d_p = 15, d_c = 1 fits; R = 8 does not."""
    ModelConfig(d_model=64, n_heads=4, goat_modes=7, goat_alignment_slot=False,
                goat_split_key_bias=False)  # fmt: skip
    with pytest.raises(ValueError, match="lower goat_modes"):
        ModelConfig(d_model=64, n_heads=4, goat_modes=8, goat_alignment_slot=False,
                    goat_split_key_bias=False)  # fmt: skip
    with pytest.raises(ValueError, match="goat_split_key_bias"):
        ModelConfig(goat_alignment_slot=False)
    with pytest.raises(ValueError, match="n_kv_heads"):
        ModelConfig(n_heads=12, n_kv_heads=5)


@pytest.mark.parametrize("kw", [{}, {"pos_rank": 3, "kv_num_heads": 2, "fuse_qkv": False}])
def test_whole_model_same_logits(kw: dict) -> None:
    torch.manual_seed(5)
    gpt = GenomeGPT(D, HEADS, TRAIN, **kw).eval()
    for block in gpt.blocks:
        trained(block.attn, seed=len(kw))
        with torch.no_grad():  # LayerNorms that are not the identity
            for p in (*block.ln_1.parameters(), *block.ln_2.parameters()):
                p.add_(0.1 * torch.randn_like(p))
    model = goatdna_from_genome_gpt(gpt)
    idx = torch.randint(0, 5, (2, 4 * TRAIN), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        torch.testing.assert_close(model(idx), gpt(idx), atol=TOL, rtol=TOL)


class GenomeRopeAttention(torch.nn.Module):
    """genome.py's RoPE arm's parameters: fused q/k/v and out projections with biases (RoPE
    itself has none)."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(d, 3 * d, bias=True)
        self.proj = torch.nn.Linear(d, d, bias=True)


class GenomePaperGPT(torch.nn.Module):
    """genome.py's model at its argparse defaults, for its parameters: tok_emb (5 tokens), 8
    pre-LN blocks (LayerNorm, attention, LayerNorm, fc1 > GELU > fc2 with int(4.0 d) hidden),
    ln_f, lm_head (no bias) tied to tok_emb, no positional embedding."""

    def __init__(self, scheme: str, d: int = 512, layers: int = 8) -> None:
        super().__init__()
        self.tok_emb = torch.nn.Embedding(5, d)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            block = torch.nn.Module()
            block.ln1 = torch.nn.LayerNorm(d)
            block.attn = genome_goat_attention() if scheme == "goat" else GenomeRopeAttention(d)
            block.ln2 = torch.nn.LayerNorm(d)
            block.fc1 = torch.nn.Linear(d, int(d * 4.0))
            block.fc2 = torch.nn.Linear(int(d * 4.0), d)
            self.blocks.append(block)
        self.ln_f = torch.nn.LayerNorm(d)
        self.lm_head = torch.nn.Linear(d, 5, bias=False)
        self.lm_head.weight = self.tok_emb.weight


@pytest.mark.parametrize("scheme", ["goat", "rope"])
def test_paper_dna_parameter_count_is_genome_py(scheme: str) -> None:
    """configs/{goat,rope}-paper-dna.yaml's model has a genome.py-shaped model's parameters to
    the one. GOAT: GoatAttention projects full heads and overwrites each head's last d_p = 2R + 1
    = 5 query and key rows, and holds its gate's two per-head vectors even when the gate is off;
    the config's goat_qk_layout 'authors' carries them too. goatdna's own layout ('content')
    has neither, exactly 2 x H x d_p x (d + 1) + 2 H per layer fewer."""
    from pathlib import Path

    from goatdna.model import DNADecoder
    from goatdna.training import load_run_config

    path = Path(__file__).resolve().parents[1] / "configs" / f"{scheme}-paper-dna.yaml"
    model = load_run_config(path, []).model
    ours = sum(p.numel() for p in DNADecoder(model).parameters())
    theirs = sum(p.numel() for p in GenomePaperGPT(scheme).parameters())
    assert ours == theirs == {"goat": 25_223_880, "rope": 25_222_656}[scheme]  # the configs say
    if scheme == "goat":
        content = dataclasses.replace(model, goat_qk_layout="content")
        d_p = 2 * model.goat_modes + 1
        unused = 2 * model.n_heads * d_p * (model.d_model + 1) + 2 * model.n_heads
        assert sum(p.numel() for p in DNADecoder(content).parameters()) == ours - 8 * unused
        # the layout is GOAT's alone: the config with another scheme is that scheme's model
        # (authors_bench's bare decoder is it with positional 'nope')
        for other in ("rope", "nope"):
            switched = DNADecoder(dataclasses.replace(model, positional=other))
            assert sum(p.numel() for p in switched.parameters()) == 25_222_656


@pytest.mark.parametrize("scheme", ["goat", "rope"])
def test_paper_dna_configs(scheme: str) -> None:
    """configs/{goat,rope}-paper-dna.yaml: genome.py's GPT-2 model and recipe; the GOAT arm's
    attention is what `goat_attention_config` makes of ``GoatAttention.for_gpt(512, 8,
    training_seq_len=1024)``, the two differ only in the positional scheme."""
    import dataclasses
    from pathlib import Path

    from goatdna.configfile import to_dict
    from goatdna.model import DNADecoder, goat_attention_config
    from goatdna.training import load_run_config

    configs = Path(__file__).resolve().parents[1] / "configs"
    config = load_run_config(configs / f"{scheme}-paper-dna.yaml", [])
    m, o, t, d = config.model, config.optim, config.trainer, config.data
    assert (m.positional, m.block_style, m.attention_bias, m.tie_embeddings) == (
        scheme, "gpt2", True, True,
    )  # fmt: skip
    assert (m.d_model, m.n_heads, m.n_layers, m.mlp_hidden, m.attention) == (
        512, 8, 8, 2048, "sdpa",
    )  # fmt: skip
    assert (o.lr, o.weight_decay, o.warmup_steps, o.min_lr_ratio, o.grad_clip) == (
        3e-4, 0.1, 100, 0.0, 1.0,
    )  # fmt: skip
    # torch.optim.AdamW(model.parameters(), lr, weight_decay): default betas/eps, decay on all
    assert (o.betas, o.eps, o.decay_all, o.prior_lr_scale) == ((0.9, 0.999), 1e-8, True, 1.0)
    assert (d.rc_prob, m.padded_vocab_size, m.vocab_size) == (0.0, 5, 5)
    assert (t.max_steps, t.accumulate, t.eval_every, t.early_stop_evals, config.seed) == (
        1000, 1, 200, 5, 123,
    )  # fmt: skip
    assert (d.micro_batch_size, d.seq_len, d.val_max_windows // d.val_batch_size) == (8, 1024, 50)
    if scheme == "goat":
        genome = goat_attention_config(genome_goat_attention())
        for field in dataclasses.fields(genome):
            if field.name.startswith("goat_") or field.name in (
                "n_kv_heads", "attention_bias", "train_length", "d_model", "n_heads",
            ):  # fmt: skip
                assert getattr(m, field.name) == getattr(genome, field.name), field.name
    model = DNADecoder(dataclasses.replace(m, n_layers=1))  # one block shows the block style
    block = model.blocks[0]
    assert isinstance(block.attn_norm, torch.nn.LayerNorm) and model.head is None
    assert block.mlp.up_proj.bias is not None and block.attn.q_proj.bias is not None
    # the two arms differ only in the model's positional scheme
    other = load_run_config(configs / f"{'rope' if scheme == 'goat' else 'goat'}-paper-dna.yaml")
    mine, theirs = to_dict(config), to_dict(other)
    for side in (mine, theirs):
        side["model"] = {
            k: v for k, v in side["model"].items()
            if k != "positional" and not k.startswith(("goat_", "rope_"))
        }  # fmt: skip
    assert mine == theirs


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_authors_layout_trains_as_the_package(optimizer: str) -> None:
    """goat_qk_layout 'authors': the query/key rows the package overwrites get a zero gradient
    and the off gate's vectors none, so weight decay only decays them, as it does the package's.
    A few steps of both from the same weights: with SGD (linear in the gradients) every tensor
    stays the same to 1e-5; with AdamW (whose first steps are lr x sign(g), so rounding noise in
    a near-zero gradient moves a weight by lr) the carried rows and gate vectors stay equal bit
    for bit, decayed by (1 - lr wd) per step."""
    module = authors(pos_rank=3, bias=True)
    layer = from_goat_attention(module).train()
    module.train()
    start = {k: v.clone() for k, v in goat_attention_state_dict(layer).items()}
    x = torch.randn(2, TRAIN, D, generator=torch.Generator().manual_seed(8))
    target = torch.randn(2, TRAIN, D, generator=torch.Generator().manual_seed(9))
    content, lr, wd, steps = layer.qk_dim, 1e-2, 0.1, 3
    make = torch.optim.SGD if optimizer == "sgd" else torch.optim.AdamW
    opts = [make(m.parameters(), lr=lr, weight_decay=wd) for m in (module, layer)]
    for _ in range(steps):
        for opt in opts:
            opt.zero_grad()
        ((layer(x) - target) ** 2).mean().backward()
        ((module(x, x, x, is_causal=True, need_weights=False)[0] - target) ** 2).mean().backward()
        for proj in (layer.q_proj, layer.k_proj):
            for grad in (proj.weight.grad, proj.bias.grad):
                assert grad is not None
                rows = grad.unflatten(0, (-1, D // HEADS))
                assert not rows[:, content:].any() and rows[:, :content].abs().sum() > 0
        assert layer.prior.gate_scale.grad is None and layer.prior.gate_bias.grad is None
        for opt in opts:
            opt.step()
    exported, package = goat_attention_state_dict(layer), module.state_dict()
    if optimizer == "sgd":
        for name, tensor in package.items():
            torch.testing.assert_close(exported[name], tensor, atol=TOL, rtol=TOL, msg=name)
        return
    rows = exported["in_proj.weight"][: 2 * D].unflatten(0, (-1, D // HEADS))[:, content:]
    assert torch.equal(
        rows, package["in_proj.weight"][: 2 * D].unflatten(0, (-1, D // HEADS))[:, content:]
    )
    before = start["in_proj.weight"][: 2 * D].unflatten(0, (-1, D // HEADS))[:, content:]
    torch.testing.assert_close(rows, before * (1 - lr * wd) ** steps)
    for name in ("prior_gate_scale_raw", "prior_gate_bias"):
        assert torch.equal(exported[name], package[name])  # no gradient: AdamW skips them


def test_authors_layout_runs_a_wrapped_projection() -> None:
    """goat_qk_layout 'authors' multiplies a plain Linear by its content rows only; a wrapped
    projection (peft's LoRA layers are modules of their own) runs its own forward and the
    output's content rows are taken: the same function either way."""

    class Wrapped(torch.nn.Module):
        def __init__(self, inner: torch.nn.Linear) -> None:
            super().__init__()
            self.inner = inner
            self.calls = 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            return self.inner(x)

    module = authors(pos_rank=3)
    layer = from_goat_attention(module).eval()
    x = torch.randn(2, TRAIN, D, generator=torch.Generator().manual_seed(10))
    with torch.no_grad():
        plain = layer(x)
        layer.q_proj, layer.k_proj = Wrapped(layer.q_proj), Wrapped(layer.k_proj)
        torch.testing.assert_close(layer(x), plain, atol=TOL, rtol=TOL)
        torch.testing.assert_close(layer(x), theirs(module, x), atol=TOL, rtol=TOL)
    assert layer.q_proj.calls == layer.k_proj.calls == 2
