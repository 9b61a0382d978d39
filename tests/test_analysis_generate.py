"""`generate`: KV-cached sampling, determinism, never N, bad input, the CLI and its outputs."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import invoke

from goatdna.analysis.generate import (
    SamplingOptions,
    generate,
    generate_continuations,
)
from goatdna.checkpoint import load_checkpoint, save_checkpoint
from goatdna.configfile import to_dict
from goatdna.errors import GoatDNAError
from goatdna.io.regions import Region, parse_region
from goatdna.model import DNADecoder, ModelConfig

TINY = {
    "n_layers": 1,
    "d_model": 64,
    "n_heads": 2,
    "mlp_hidden": 128,
    "train_length": 64,
    "goat_modes": 4,
}


def _model(positional: str, seed: int = 0) -> DNADecoder:
    torch.manual_seed(seed)
    model = DNADecoder(ModelConfig(positional=positional, **TINY))
    with torch.no_grad():  # nonzero prior so GOAT's positional path matters
        for block in model.blocks:
            prior = block.attn.prior
            if prior is not None:
                prior.alpha.normal_(0, 0.5)
                prior.beta.normal_(0, 0.5)
                prior.slope.normal_(0, 0.02)
                prior.sink.normal_(0, 1.0)
    return model.eval()


class FixedLM(torch.nn.Module):
    """A 'model' whose next-base distribution is fixed: logits = ``logits`` at every position."""

    def __init__(self, logits: list[float]) -> None:
        super().__init__()
        self.register_buffer("fixed", torch.tensor(logits))

    def new_cache(self, batch_size: int, max_length: int) -> dict:
        return {"length": 0, "max": max_length}

    def forward_cached(self, idx: torch.Tensor, cache: dict) -> torch.Tensor:
        cache["length"] += idx.shape[1]
        assert cache["length"] <= cache["max"]
        return self.fixed.expand(idx.shape[0], idx.shape[1], -1)  # (B, L, V)


@pytest.mark.parametrize("positional", ["goat", "rope"])
def test_greedy_with_cache_equals_full_recompute(positional: str) -> None:
    model = _model(positional)
    prompt = "ACGTTGCAAC"
    got = generate(model, prompt, max_new_tokens=16, temperature=0)[0]
    seq = [int("ACGT".index(c)) for c in prompt]
    with torch.no_grad():
        for _ in range(16):
            logits = model(torch.tensor([seq]))[0, -1, :4]
            seq.append(int(logits.argmax()))
    assert got == "".join("ACGT"[t] for t in seq[len(prompt) :])


def test_seed_determinism_and_batching_independence() -> None:
    model = _model("goat")
    a = generate(model, "acgtnACGT", max_new_tokens=24, num_samples=3, seed=7)
    b = generate(model, "acgtnACGT", max_new_tokens=24, num_samples=3, seed=7)
    c = generate(model, "acgtnACGT", max_new_tokens=24, num_samples=3, seed=8)
    assert a == b
    assert a != c
    assert len(a) == 3 and all(len(s) == 24 and set(s) <= set("ACGT") for s in a)
    # Sample s of prompt i is the same alone, in a bigger batch, or in smaller batches.
    many = generate_continuations(
        model,
        ["acgtnACGT", "TTTTGGGG", "ACGTA"],
        SamplingOptions(max_new_tokens=24, num_samples=4, seed=7, batch_size=3),
    )
    assert many[0][:3] == a


def test_never_samples_n_and_respects_top_k() -> None:
    loves_n = FixedLM([0.0, 1.0, 2.0, 0.5, 50.0])  # N would win by far
    out = generate(loves_n, "ACGT", max_new_tokens=200, num_samples=4, seed=0)
    assert all(set(s) <= set("ACGT") for s in out)
    greedy = generate(loves_n, "ACGT", max_new_tokens=20, temperature=0)[0]
    assert greedy == "G" * 20
    top2 = "".join(generate(loves_n, "ACGT", max_new_tokens=300, top_k=2, seed=1))
    assert set(top2) == {"C", "G"}
    top1 = generate(loves_n, "ACGT", max_new_tokens=30, top_k=1, seed=3)[0]
    assert top1 == "G" * 30


def test_sampling_frequencies_follow_the_distribution() -> None:
    probs = np.array([0.1, 0.2, 0.3, 0.4])
    model = FixedLM([*np.log(probs), 0.0])  # class 4 has weight e^0 = 1 before masking
    seqs = generate(model, "A", max_new_tokens=500, num_samples=20, seed=0)
    counts = Counter("".join(seqs))
    freqs = np.array([counts[c] for c in "ACGT"]) / 10_000
    np.testing.assert_allclose(freqs, probs, atol=0.02)
    # Temperature 2 flattens: p^(1/2) normalised.
    hot = Counter(
        "".join(generate(model, "A", max_new_tokens=500, num_samples=20, temperature=2.0))
    )
    flat = np.sqrt(probs) / np.sqrt(probs).sum()
    np.testing.assert_allclose(np.array([hot[c] for c in "ACGT"]) / 10_000, flat, atol=0.02)


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        ("ACGU", "'U' at position 4"),
        ("ACG T", "' ' at position 4"),
        ("MKVLE*", "position"),
        ("ACGé", "position 4"),
    ],
)
def test_bad_prompts(prompt: str, message: str) -> None:
    with pytest.raises(GoatDNAError, match=message):
        generate(FixedLM([0.0] * 5), prompt, max_new_tokens=5)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_new_tokens": 0},
        {"temperature": -1.0},
        {"temperature": float("nan")},
        {"top_k": 0},
        {"num_samples": 0},
    ],
)
def test_bad_options(kwargs: dict) -> None:
    with pytest.raises(GoatDNAError):
        generate(FixedLM([0.0] * 5), "ACGT", **kwargs)


def test_parse_region() -> None:
    """generate's prompt --region: the one parser with ``whole_contig=True``."""
    assert parse_region("chr1:1,001-2,000", whole_contig=True) == Region("chr1", 1000, 2000)
    assert parse_region("chrX", whole_contig=True) == "chrX"
    for bad in ("chr1:0-10", "chr1:10-5", "chr1:a-b", ":1-5", ""):
        with pytest.raises(GoatDNAError):
            parse_region(bad, whole_contig=True)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = _model("goat", seed=1)
    path = tmp_path_factory.mktemp("ckpt") / "tiny.ckpt"
    return save_checkpoint(path, model, {"model": to_dict(model.config), "data": {"seq_len": 64}})


def test_checkpoint_round_trip_and_errors(checkpoint: Path, tmp_path: Path) -> None:
    loaded = load_checkpoint(checkpoint)
    model, config = loaded.model, loaded.run_config
    assert loaded.kind == "pretrained" and loaded.model_config == model.config
    assert loaded.train_length == 64
    reference = _model("goat", seed=1)
    idx = torch.randint(0, 5, (2, 20))
    with torch.no_grad():
        torch.testing.assert_close(model(idx), reference(idx), rtol=0, atol=0)
    assert config["data"]["seq_len"] == 64
    with pytest.raises(GoatDNAError, match="not found"):
        load_checkpoint(tmp_path / "missing.ckpt")
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(GoatDNAError, match="not a readable"):
        load_checkpoint(junk)
    other = tmp_path / "other.ckpt"
    torch.save({"state_dict": {}}, other)
    with pytest.raises(GoatDNAError, match="hyper_parameters"):
        load_checkpoint(other)


def test_cli_stdout_json_fasta_and_region(checkpoint: Path, tmp_path: Path) -> None:
    args = ["generate", "--checkpoint", str(checkpoint), "--max-new-tokens", "90", "--seed", "3"]
    res = invoke([*args, "--prompt", "acgtACGTAC", "-n", "2"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].startswith(">sample_0") and lines[3].startswith(">sample_1")
    cont0 = lines[1] + lines[2]
    assert len(lines[1]) == 80 and len(cont0) == 90 and set(cont0) <= set("ACGT")

    model = load_checkpoint(checkpoint).model
    api = generate(model, "acgtACGTAC", max_new_tokens=90, num_samples=2, seed=3)
    assert cont0 == api[0]

    out_json = tmp_path / "g.json"
    res = invoke([*args, "--prompt", "acgtACGTAC", "-n", "2", "--out", str(out_json)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out_json.read_text())
    assert doc["samples"] == api and doc["sampling"]["seed"] == 3
    # an existing --out is replaced only with --force, as by every other command
    again = [*args, "--prompt", "ACGT", "--out", str(out_json)]
    kept = invoke(again)
    assert kept.exit_code == 2 and "--force" in kept.output, kept.output
    assert json.loads(out_json.read_text()) == doc
    replaced = invoke([*again, "--force"])
    assert replaced.exit_code == 0, replaced.output
    assert json.loads(out_json.read_text()) != doc

    fasta = tmp_path / "in.fa"
    fasta.write_text(">chrA\nTTTTTTTTTT\nacgtACGTAC\nGGGG\n>chrB\nAAAA\n")
    out_fa = tmp_path / "g.fa"
    res = invoke(
        [
            *args,
            "--prompt-fasta",
            str(fasta),
            "--region",
            "chrA:11-20",
            "-n",
            "2",
            "--out",
            str(out_fa),
        ],
    )
    assert res.exit_code == 0, res.output
    text = out_fa.read_text().splitlines()
    assert "chrA:11-20" in text[0]
    assert text[1] + text[2] == api[0]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--prompt", "ACGX"], "invalid nucleotide 'X' at position 4"),
        (["--prompt", ""], "empty"),
        ([], "exactly one of --prompt or --prompt-fasta"),
        (["--prompt", "ACGT", "--out", "x.txt"], "unknown extension"),
        (["--prompt", "ACGT", "--temperature", "-2"], "--temperature"),
        (["--prompt-fasta", "nope.fa"], "not found"),
    ],
)
def test_cli_errors(checkpoint: Path, extra: list[str], message: str) -> None:
    res = invoke(["generate", "--checkpoint", str(checkpoint), *extra])
    assert res.exit_code == 2
    assert res.stderr.startswith("error: ") and message in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_cli_region_errors(checkpoint: Path, tmp_path: Path) -> None:
    fasta = tmp_path / "in.fa"
    fasta.write_text(">chrA\nACGTACGT\n>chrB\nAAAA\n")
    base = ["generate", "--checkpoint", str(checkpoint), "--prompt-fasta", str(fasta)]
    for extra, message in (
        ([], "2 records"),
        (["--region", "chrZ:1-4"], "no record named 'chrZ'"),
        (["--region", "chrA:1-100"], "past the end"),
    ):
        res = invoke([*base, *extra])
        assert res.exit_code == 2 and message in res.stderr, res.stderr
    res = invoke(["generate", "--checkpoint", str(tmp_path / "no.ckpt"), "--prompt", "AC"])
    assert res.exit_code == 2 and "checkpoint not found" in res.stderr


def test_the_command_is_one_library_call(checkpoint: Path, tmp_path: Path) -> None:
    """`goatdna generate` only builds a `GenerateRequest`: `generate_run.generate` checks it,
    samples and renders the document the command prints (and writes it to ``out``)."""
    from goatdna.analysis.generate_run import GenerateRequest
    from goatdna.analysis.generate_run import generate as run

    args = ["generate", "--checkpoint", str(checkpoint), "--max-new-tokens", "30", "--seed", "3"]
    res = invoke([*args, "--prompt", "acgtACGTAC", "-n", "2"])
    assert res.exit_code == 0, res.output
    sampling = SamplingOptions(max_new_tokens=30, num_samples=2, seed=3)
    result = run(GenerateRequest(checkpoint, sampling, prompt="acgtACGTAC"))
    assert result.document == res.stdout and len(result.samples) == 2
    out = tmp_path / "g.json"
    written = run(GenerateRequest(checkpoint, sampling, prompt="acgtACGTAC", out=out))
    assert out.read_text() == written.document and '"samples"' in written.document
    with pytest.raises(GoatDNAError, match="exactly one of --prompt or --prompt-fasta"):
        run(GenerateRequest(checkpoint, sampling))


def test_prompt_fasta_is_read_by_the_one_fasta_reader(tmp_path: Path, monkeypatch) -> None:
    """--prompt-fasta went through pyfaidx.Fasta, which cannot read plain gzip (every other
    command decompresses it once to a cache); the prompt comes back as written (case, IUPAC)."""
    import gzip

    from goatdna.analysis.generate import read_prompt_fasta

    monkeypatch.setenv("GOATDNA_CACHE", str(tmp_path / "cache"))
    fasta = tmp_path / "in.fa.gz"
    fasta.write_bytes(gzip.compress(b">chrA desc\nTTTTTTTTTT\nacgtRYGTAC\nGGGG\n"))
    assert read_prompt_fasta(fasta, "chrA:9-16") == ("TTacgtRY", "chrA:9-16")
    assert read_prompt_fasta(fasta) == ("TTTTTTTTTTacgtRYGTACGGGG", "chrA:1-24")
    bad = tmp_path / "bad.fa"
    bad.write_text(">chrA\nACGX\n")
    with pytest.raises(GoatDNAError, match="invalid character 'X' in contig 'chrA' at position 4"):
        read_prompt_fasta(bad)
