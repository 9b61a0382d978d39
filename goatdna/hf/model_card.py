"""The README.md model card of an exported folder, filled from its config.json."""

from __future__ import annotations

import math
from typing import Any


def _number(value: object, digits: int = 4) -> str:
    if isinstance(value, (int, float)) and math.isfinite(value):
        return f"{value:.{digits}f}" if isinstance(value, float) else f"{value:,}"
    return "not recorded"


def _block(config: dict[str, Any]) -> str:
    """The block style in words: goatdna's own (RMSNorm, SwiGLU) or genome.py's GPT-2 block."""
    width = config["mlp_hidden"]
    if config.get("block_style", "llama") == "gpt2":
        biases = "linear biases" if config.get("attention_bias") else "MLP biases"
        return f"LayerNorm, GELU MLP of width {width}, {biases}"
    biases = "attention biases" if config.get("attention_bias") else "no biases"
    return f"RMSNorm, SwiGLU MLP of width {width}, {biases}"


def _positional(config: dict[str, Any]) -> str:
    if config["positional"] == "goat":
        return (
            f"GOAT attention prior ({config['goat_modes']} Fourier modes, frequency base "
            f"{config['goat_freq_base']:g}, prior MLP width {config['goat_mlp_hidden']}, "
            f"init `{config['goat_init']}`): a learned log-prior over relative and absolute "
            "positions packed into the queries and keys, so one standard attention kernel "
            "computes it; trained to extrapolate beyond the training length"
        )
    return f"rotary position embedding (RoPE, base {config['rope_base']:g}) on the full head dim"


def model_card(config: dict[str, Any], num_params: int) -> str:
    """Markdown with a Hugging Face front matter: architecture, data, numbers, use, limits."""
    prov = config.get("goatdna_provenance") or {}
    train_length = prov.get("train_length") or config["train_length"]
    scheme = "GOAT" if config["positional"] == "goat" else "RoPE"
    classifier = config["architectures"] == ["GoatDNAForSequenceClassification"]
    lines = [
        "---",
        "library_name: transformers",
        f"pipeline_tag: {'text-classification' if classifier else 'text-generation'}",
        "tags: [dna, genomics, goatdna, causal-lm, nucleotide]",
        "---",
        "",
        f"# goatdna {scheme} nucleotide language model",
        "",
        "A decoder-only language model of DNA at single-nucleotide resolution, trained with "
        f"goatdna {config.get('goatdna_version', '')} on next-base "
        "prediction.",
        "",
        "## Architecture",
        "",
        f"- {config['n_layers']} pre-norm decoder blocks ({_block(config)}), "
        f"d_model {config['d_model']}, "
        f"{config['n_heads']} heads; {num_params:,} parameters",
        f"- positions: {_positional(config)}",
        "- vocabulary: A C G T N = 0..4 (one token per base; lowercase read as uppercase, IUPAC "
        "ambiguity codes as N); the model predicts 5 classes and N is never generated",
        f"- training context length: {train_length:,} bases",
        "",
        "## Training",
        "",
        f"- data: the shard set with manifest sha256 `{prov.get('data_manifest_sha256') or 'not recorded'}`",
        f"- optimizer steps: {_number(prov.get('steps'))}; tokens seen: "
        f"{_number(prov.get('tokens_seen'))}",
        f"- validation NLL: {_number(prov.get('val_loss'))} nats/base "
        f"({_number(prov.get('val_bits_per_base'))} bits/base) at step "
        f"{_number(prov.get('val_step'))}",
        f"- source checkpoint: `{prov.get('source_checkpoint', 'not recorded')}`",
        "",
        "## Use",
        "",
        "```python",
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        "",
        'model = AutoModelForCausalLM.from_pretrained("path/to/this/folder", trust_remote_code=True)',
        'tokenizer = AutoTokenizer.from_pretrained("path/to/this/folder", trust_remote_code=True)',
        'ids = tokenizer("ACGTACGT", return_tensors="pt").input_ids',
        "logits = model(ids).logits  # (1, 8, 5): next-base scores over A C G T N",
        "out = model.generate(ids, max_new_tokens=100, do_sample=False)",
        "```",
        "",
        *(
            [
                "Fine-tuned with `goatdna finetune` "
                f"({config.get('problem_type', '')}; labels "
                f"{', '.join(str(v) for v in config.get('id2label', {}).values())}): "
                "`AutoModelForSequenceClassification.from_pretrained(folder, "
                "trust_remote_code=True)(**tokenizer(seqs, padding=True, "
                'return_tensors="pt")).logits` give `goatdna predict`\'s predictions '
                "(softmax for class probabilities).",
                "",
            ]
            if classifier
            else []
        ),
        "With goatdna installed: `goatdna embed --checkpoint <folder> ...`, `goatdna evaluate`, "
        "`goatdna generate` and the scoring commands accept this folder as `--checkpoint`.",
        "",
        "## Intended use",
        "",
        "Research on genomic language models: per-base likelihoods, zero-shot variant scoring, "
        "sequence embeddings for downstream classifiers, sampling of DNA-like sequence.",
        "",
        "## Limitations",
        "",
        "- Not a clinical tool: likelihoods are not pathogenicity calls.",
        "- Trained on the genome(s) in its shard set only; other species or assemblies are "
        "out of distribution.",
        "- Batches may be padded (`tokenizer(..., padding=True)`, either side): padded "
        "positions are masked and each sequence keeps its own positions.",
        f"- {scheme} positions beyond {train_length:,} bases are "
        + (
            "extrapolation: GOAT is designed for it, but check quality at your length."
            if scheme == "GOAT"
            else "untrained: RoPE quality degrades past the training length."
        ),
        "",
    ]
    return "\n".join(lines)
