"""transformers features on goatdna's classes, as a transformers user reaches for them.

Padded batches equal each sequence alone (every positional scheme, both padding sides, the
trunk and the LM, through the KV cache in ``generate``, with a ``StaticCache``, in a pipeline and
a collator); ``inputs_embeds``; resizing the embedding and saving it; gradient checkpointing;
``torch.export``; the Auto classes; and the small contracts (sdpa,
use_cache, shift_labels, the vocabulary, GOAT's frequencies after loading). The common tests of
transformers itself run from its sdist in `.ci/transformers_tests` (tests_transformers/).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from goatdna.hf import (  # noqa: E402  (after the importorskip)
    GoatDNAConfig,
    GoatDNAForCausalLM,
    GoatDNAForSequenceClassification,
    GoatDNAModel,
    GoatDNATokenizer,
)
from goatdna.model.goat import GoatPrior, goat_frequencies  # noqa: E402

SCHEMES = ("goat", "rope", "alibi", "nope")


def _config(positional: str, **extra: object) -> GoatDNAConfig:
    fields: dict = dict(
        positional=positional, n_layers=2, d_model=48, n_heads=2, mlp_hidden=64,
        goat_modes=4, goat_mlp_hidden=8, goat_init="alibi", train_length=16,
    )  # fmt: skip
    fields.update(extra)
    return GoatDNAConfig(**fields)


def _model(config: GoatDNAConfig, cls: type = GoatDNAForCausalLM, seed: int = 0) -> torch.nn.Module:
    """A model whose every weight (GOAT's prior included) is far from its init: nothing is 0."""
    torch.manual_seed(seed)
    model = cls(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    return model


def _padded(rows: list[torch.Tensor], side: str, pad: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, r in enumerate(rows):
        cols = slice(width - len(r), width) if side == "left" else slice(0, len(r))
        ids[i, cols], mask[i, cols] = r, 1
    return ids, mask


def _rows(seed: int = 1, lengths: tuple[int, ...] = (23, 9, 16)) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 5, (n,), generator=gen) for n in lengths]


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize(
    "scheme,extra",
    [
        *((s, {}) for s in SCHEMES),
        ("rope", {"rope_extension": "ntk"}),
        ("rope", {"rope_extension": "linear"}),
    ],
)
def test_padded_batch_equals_each_sequence_alone(scheme: str, extra: dict, side: str) -> None:
    """Padded keys are masked and real tokens keep their true positions: logits (LM) and hidden
    states (AutoModel) of a padded row are the row's own, to 1e-5. Rows are longer than
    train_length so RoPE's scaling acts per row."""
    config = _config(scheme, **extra)
    lm = _model(config)
    trunk = GoatDNAModel(config).eval()
    trunk.load_state_dict(
        {k: v for k, v in lm.state_dict().items() if not k.startswith("model.head")}
    )
    rows = _rows()
    ids, mask = _padded(rows, side)
    with torch.no_grad():
        logits = lm(ids, attention_mask=mask).logits
        hidden = trunk(ids, attention_mask=mask).last_hidden_state
        for i, row in enumerate(rows):
            real = mask[i].bool()
            alone = lm(row[None]).logits[0]
            torch.testing.assert_close(logits[i, real], alone, atol=1e-5, rtol=0)
            alone_hidden = trunk(row[None]).last_hidden_state[0]
            torch.testing.assert_close(hidden[i, real], alone_hidden, atol=1e-5, rtol=0)
        assert torch.isfinite(logits).all()  # padding queries too (they see themselves)


@pytest.mark.parametrize("scheme", ["goat", "rope"])
def test_left_padded_batched_generate_and_static_cache(scheme: str) -> None:
    model = _model(_config(scheme))
    tokenizer = GoatDNATokenizer(padding_side="left")
    prompts = ["ACGTTGCAAGGCTTAACG", "GATTACA", "CCGGAATTCCGGA"]
    alone = [
        model.generate(tokenizer(p, return_tensors="pt").input_ids, max_new_tokens=12, do_sample=False)[0, len(p):]
        for p in prompts
    ]  # fmt: skip
    batch = tokenizer(prompts, padding=True, return_tensors="pt")
    assert batch.attention_mask[1, 0] == 0  # really left-padded
    width = batch.input_ids.shape[1]
    for cache in (None, "static"):
        extra = {"cache_implementation": cache} if cache else {}
        out = model.generate(**batch, max_new_tokens=12, do_sample=False, **extra)
        for i, expected in enumerate(alone):
            assert torch.equal(out[i, width:], expected), (scheme, cache, i)
        assert not (out[:, width:] == 4).any()  # N is never generated


def test_pipeline_batches_prompts_of_different_lengths() -> None:
    model = _model(_config("goat"))
    tokenizer = GoatDNATokenizer()
    pipe = transformers.pipeline("text-generation", model=model, tokenizer=tokenizer)
    prompts = ["ACGTACGTACGTAAC", "GGA", "TTTACG"]
    kwargs = {"max_new_tokens": 8, "do_sample": False}
    batched = pipe(prompts, batch_size=2, **kwargs)
    for prompt, got in zip(prompts, batched, strict=True):
        assert got == pipe(prompt, **kwargs)
        assert got[0]["generated_text"].startswith(prompt)


def test_collator_batch_loss_is_the_per_sequence_loss() -> None:
    """DataCollatorForLanguageModeling pads with <pad> and labels it -100: the batch loss is the
    token-weighted mean of each sequence's own loss."""
    model = _model(_config("goat"))
    tokenizer = GoatDNATokenizer()
    seqs = ["ACGTACGTAAGCTTAG", "GATTACA", "CCGTAGGT"]
    collate = transformers.DataCollatorForLanguageModeling(tokenizer, mlm=False)
    batch = collate([tokenizer(s) for s in seqs])
    assert (batch["labels"][1, 7:] == -100).all() and (batch["input_ids"][1, 7:] == 5).all()
    with torch.no_grad():
        loss = model(**batch).loss
        singles = [torch.tensor([tokenizer(s).input_ids]) for s in seqs]
        losses = [model(one, labels=one).loss for one in singles]
    counts = [len(s) - 1 for s in seqs]
    expected = sum(part * n for part, n in zip(losses, counts, strict=True)) / sum(counts)
    torch.testing.assert_close(loss, expected, atol=1e-6, rtol=0)


def test_inputs_embeds_forward_and_generate() -> None:
    model = _model(_config("goat"))
    ids = torch.randint(0, 4, (2, 11), generator=torch.Generator().manual_seed(4))
    embeds = model.get_input_embeddings()(ids)
    with torch.no_grad():
        torch.testing.assert_close(
            model(inputs_embeds=embeds).logits, model(ids).logits, atol=1e-6, rtol=0
        )
    from_ids = model.generate(ids, max_new_tokens=6, do_sample=False)
    from_embeds = model.generate(inputs_embeds=embeds, max_new_tokens=6, do_sample=False)
    assert torch.equal(from_embeds, from_ids[:, 11:])  # generate returns the new tokens only


def test_resize_token_embeddings_round_trips(tmp_path: Path) -> None:
    model = _model(_config("goat"))
    tokenizer = GoatDNATokenizer()
    tokenizer.add_tokens(["<cls>", "<mask>"])
    assert tokenizer.get_vocab() == {
        "A": 0,
        "C": 1,
        "G": 2,
        "T": 3,
        "N": 4,
        "<pad>": 5,
        "<cls>": 6,
        "<mask>": 7,
    }
    model.resize_token_embeddings(12)
    assert model.get_input_embeddings().weight.shape[0] == 12
    assert model.get_output_embeddings().weight.shape[0] == 12
    assert (model.config.vocab_size, model.config.padded_vocab_size) == (12, 12)
    ids = torch.tensor([[0, 1, 6, 2, 3, 11]])
    with torch.no_grad():
        expected = model(ids).logits
    assert expected.shape == (1, 6, 12)
    model.save_pretrained(tmp_path / "resized")
    again = GoatDNAForCausalLM.from_pretrained(tmp_path / "resized").eval()
    with torch.no_grad():
        torch.testing.assert_close(again(ids).logits, expected, atol=0, rtol=0)


def test_gradient_checkpointing_gives_the_same_gradients() -> None:
    """What Trainer(gradient_checkpointing=True) calls: each block recomputed in backward, the
    same loss and gradients, and no KV cache written while it is on."""
    config = _config("goat")
    ids = torch.randint(0, 4, (2, 20), generator=torch.Generator().manual_seed(5))
    # transformers 5.25 renamed gradient_checkpointing_* to activation_checkpointing_*
    api = (
        "activation_checkpointing"
        if hasattr(GoatDNAForCausalLM, "activation_checkpointing_enable")
        else "gradient_checkpointing"
    )
    grads = []
    for checkpointed in (False, True):
        model = _model(config).train()
        if checkpointed:
            getattr(model, f"{api}_enable")(**{f"{api}_kwargs": {"use_reentrant": False}})
            assert all(block.gradient_checkpointing for block in model.model.blocks)
        calls: list[int] = []
        model.model.blocks[0].mlp.register_forward_pre_hook(lambda *_, seen=calls: seen.append(1))
        out = model(ids, labels=ids)
        out.loss.backward()
        assert len(calls) == (2 if checkpointed else 1)  # recomputed in backward
        assert (
            out.past_key_values if hasattr(out, "past_key_values") else out.cache
        ) is None or not checkpointed
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, atol=1e-6, rtol=1e-5, msg=name)
    getattr(model, f"{api}_disable")()
    assert not any(block.gradient_checkpointing for block in model.model.blocks)


@pytest.mark.parametrize("scheme", ["goat", "rope"])
def test_torch_export_with_a_padding_mask(scheme: str) -> None:
    """No data-dependent branch on the mask: one exported program serves padded and unpadded
    batches and matches eager."""
    model = _model(_config(scheme))
    model.config.use_cache = False
    ids, mask = _padded(_rows(lengths=(12, 7)), "left")
    exported = torch.export.export(model, (ids,), {"attention_mask": mask})
    full = torch.ones_like(mask)
    with torch.no_grad():
        for m in (mask, full):
            got = exported.module()(ids, attention_mask=m).logits
            torch.testing.assert_close(got, model(ids, attention_mask=m).logits, atol=1e-5, rtol=0)


def test_small_contracts(tmp_path: Path) -> None:
    config = _config("goat")
    model = _model(config)
    model.save_pretrained(tmp_path / "m")
    # use_cache and the token-id attributes survive save/load (transformers 5 dropped them from
    # the base config); sdpa is accepted; GOAT's frequency buffer is initialised
    loaded = GoatDNAForCausalLM.from_pretrained(tmp_path / "m", attn_implementation="sdpa")
    assert loaded.config.use_cache is True and loaded.config._attn_implementation == "sdpa"
    assert (loaded.config.pad_token_id, loaded.config.eos_token_id, loaded.config.bos_token_id) == (
        None,
    ) * 3
    priors = [m for m in loaded.modules() if isinstance(m, GoatPrior)]
    assert priors and all(
        torch.equal(p.freqs, goat_frequencies(p.num_modes, p.freq_base).float()) for p in priors
    )
    ids = torch.randint(0, 4, (2, 9), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, model(ids).logits, atol=0, rtol=0)
        # shift_labels (already shifted) is the labels loss
        shifted = torch.cat([ids[:, 1:], torch.full((2, 1), -100)], dim=1)
        torch.testing.assert_close(
            model(ids, shift_labels=shifted).loss, model(ids, labels=ids).loss
        )
    # the Auto classes: the trunk is the LM's final hidden state; a classifier reads its backbone
    auto = transformers.AutoModel.from_pretrained(tmp_path / "m")
    assert type(auto) is GoatDNAModel
    with torch.no_grad():
        hidden = model(ids, output_hidden_states=True).hidden_states[-1]
        torch.testing.assert_close(auto(ids).last_hidden_state, hidden, atol=0, rtol=0)
    cls = transformers.AutoModelForSequenceClassification.from_pretrained(
        tmp_path / "m", num_labels=3
    )
    assert type(cls) is GoatDNAForSequenceClassification
    assert torch.equal(cls.model.embed.weight, model.model.embed.weight)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_trunk_per_row_positions_equal_the_shared_range(scheme: str) -> None:
    """goatdna.model alone: per-row positions (B, L) and the padding mask of an unpadded batch give
    what the shared range does, from any start (a cache offset), and GOAT's/ALiBi's packing of
    (B, L) positions is each row's packing of its own positions."""
    from goatdna.model.attention import padding_mask

    decoder = _model(_config(scheme)).model
    ids = torch.randint(0, 5, (2, 13), generator=torch.Generator().manual_seed(7))
    start = 40
    positions = torch.arange(start, start + 13).expand(2, 13)
    with torch.no_grad():
        shared = decoder.hidden(ids, start)
        per_row = decoder.hidden(
            ids,
            start,
            positions=positions,
            mask=padding_mask(torch.ones(2, 13, dtype=torch.bool), 13),
        )
    torch.testing.assert_close(per_row, shared, atol=1e-5, rtol=0)
    prior = decoder.prior(0)
    if prior is not None:
        q = torch.randn(2, 2, 5, prior.content_dim)
        k = torch.randn(2, 2, 5, prior.content_dim)
        rows = torch.tensor([[3, 4, 5, 6, 7], [0, 0, 0, 1, 2]])
        q2, k2 = prior.pack(q, k, rows, rows)
        for b in range(2):
            qb, kb = prior.pack(q[b : b + 1], k[b : b + 1], rows[b], rows[b])
            torch.testing.assert_close(q2[b : b + 1], qb, atol=1e-6, rtol=0)
            torch.testing.assert_close(k2[b : b + 1], kb, atol=1e-6, rtol=0)
