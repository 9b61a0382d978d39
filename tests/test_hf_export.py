"""`goatdna export` and the transformers classes: folder contents, logits, loss, generate, loading.

Exports the session's tiny trained GOAT and RoPE runs once; every transformers-side number is
compared with goatdna's own model on the same tokens.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import invoke, randomized_decoder

from goatdna import __version__
from goatdna.analysis.generate import generate as goatdna_generate
from goatdna.checkpoint import load_checkpoint
from goatdna.inference.embed import embed
from goatdna.io.tokens import TOKEN_TABLE
from goatdna.model import ModelConfig, next_token_loss
from goatdna.model.attention_maps import attention_terms

transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

SCHEMES = ("goat", "rope")


@pytest.fixture(scope="module")
def exports(tiny_runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict:
    """{scheme: export folder} written with the CLI from each tiny run's best checkpoint."""
    root = tmp_path_factory.mktemp("exports")
    folders = {}
    for scheme in SCHEMES:
        out = root / f"{scheme}-export"
        ckpt = tiny_runs[scheme] / "checkpoints" / "best.ckpt"
        res = invoke(["export", "--checkpoint", str(ckpt), "--out", str(out)])
        assert res.exit_code == 0, res.output
        folders[scheme] = out
    return folders


def _tokens(seed: int, length: int = 150, batch: int = 2) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 4, (batch, length), generator=gen)
    tokens[0, 20:23] = 4  # a few N inputs/targets
    return tokens


def test_export_folder_contents(exports: dict, tiny_runs: dict[str, Path]) -> None:
    import goatdna.model as model_package
    from goatdna.hf.export import HF_SOURCES, MODEL_SOURCES

    folder = exports["goat"]
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "goatdna" and config["goatdna_version"] == __version__
    for field in dataclasses.fields(ModelConfig):
        assert field.name in config, field.name
    summary = json.loads((tiny_runs["goat"] / "summary.json").read_text())
    prov = config["goatdna_provenance"]
    assert prov["steps"] == summary["steps"] and prov["tokens_seen"] == summary["tokens_seen"]
    assert prov["data_manifest_sha256"] == summary["data_manifest_sha256"]
    assert prov["val_loss"] == pytest.approx(summary["best_val_loss"])
    card = (folder / "README.md").read_text()
    assert f"{summary['best_val_loss']:.4f} nats/base" in card and "Limitations" in card
    # the tokenizer uses the shards' ids
    assert json.loads((folder / "vocab.json").read_text()) == TOKEN_TABLE
    # model files ship verbatim; no shipped file imports goatdna
    model_dir = Path(model_package.__file__).parent
    for name in MODEL_SOURCES:
        assert (folder / name).read_bytes() == (model_dir / name).read_bytes(), name
    for name in (*MODEL_SOURCES, *HF_SOURCES):
        text = (folder / name).read_text()
        assert not re.search(r"^\s*(from|import)\s+goatdna\b", text, re.MULTILINE), name
    assert not list(folder.parent.glob(".*tmp*"))


def test_export_checkpoint_is_what_the_command_writes(
    tiny_runs: dict[str, Path], tmp_path: Path
) -> None:
    """`export_checkpoint` is `goatdna export`'s work: the same files, the same weights' bytes,
    and the parameter count the command prints."""
    from goatdna.hf.export import WEIGHTS_FILE, export_checkpoint

    ckpt = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    res = invoke(["export", "--checkpoint", ckpt, "--out", tmp_path / "cli"])
    assert res.exit_code == 0, res.output
    exported = export_checkpoint(ckpt, tmp_path / "lib")
    assert exported.folder == tmp_path / "lib"
    assert res.stderr == f"exported {exported.params:,} parameters to {tmp_path / 'cli'}\n"
    files = sorted(p.name for p in (tmp_path / "cli").iterdir())
    assert sorted(p.name for p in exported.folder.iterdir()) == files
    cli_weights = (tmp_path / "cli" / WEIGHTS_FILE).read_bytes()
    assert (exported.folder / WEIGHTS_FILE).read_bytes() == cli_weights


def test_load_checkpoint_reads_export_folder(exports: dict, tiny_runs: dict[str, Path]) -> None:
    for scheme in SCHEMES:
        from_ckpt = load_checkpoint(tiny_runs[scheme] / "checkpoints" / "best.ckpt")
        from_folder = load_checkpoint(exports[scheme])
        assert (from_ckpt.kind, from_folder.kind) == ("pretrained", "export")
        assert from_folder.model_config == from_ckpt.model_config
        ckpt_model, ckpt_config = from_ckpt.model, from_ckpt.run_config
        folder_model, folder_config = from_folder.model, from_folder.run_config
        assert folder_config["model"] == dict(ckpt_config["model"])
        assert folder_config["data"]["seq_len"] == ckpt_config["data"]["seq_len"]
        tokens = _tokens(1)
        with torch.no_grad():
            assert torch.equal(folder_model(tokens), ckpt_model(tokens))
    # commands take the folder as --checkpoint: generate's output is the checkpoint's
    outputs = []
    for source in (tiny_runs["goat"] / "checkpoints" / "best.ckpt", exports["goat"]):
        res = invoke(["generate", "-c", str(source), "--prompt", "ACGTTGCA",
                                  "--max-new-tokens", "30", "--seed", "3"])  # fmt: skip
        assert res.exit_code == 0, res.output
        outputs.append(res.stdout.split("\n", 1)[1])  # past the header naming the checkpoint
    assert outputs[0] == outputs[1] and len(outputs[0].strip()) >= 30


def test_auto_classes_logits_loss_and_round_trip(exports: dict, tmp_path: Path) -> None:
    import goatdna.hf  # noqa: F401  (registers the Auto classes)
    from goatdna.training.module import GenomeLM

    for scheme in SCHEMES:
        folder = exports[scheme]
        config = transformers.AutoConfig.from_pretrained(folder)
        assert type(config).__name__ == "GoatDNAConfig" and config.positional == scheme
        model = transformers.AutoModelForCausalLM.from_pretrained(folder)
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        assert tokenizer("ACGTNacgtn").input_ids == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]
        ours = load_checkpoint(folder).model
        tokens = _tokens(2)
        with torch.no_grad():
            out = model(tokens, labels=tokens)
            expected = ours(tokens)
        torch.testing.assert_close(out.logits, expected, atol=1e-5, rtol=0)
        # hidden_states: embedding output, block outputs, the final norm's output last; the
        # same vectors `goatdna embed` returns for --layer L and for the default
        with torch.no_grad():
            hidden = model(tokens[:1], output_hidden_states=True).hidden_states
        assert len(hidden) == ours.config.n_layers + 1
        sequence = "".join("ACGTN"[int(t)] for t in tokens[0])
        for layer in (1, None):
            ours_vectors = embed(
                ours, [sequence], layer=layer, pool="none", max_length=len(sequence)
            )[0]
            theirs = hidden[layer if layer else -1][0].numpy()
            np.testing.assert_allclose(theirs, ours_vectors, atol=1e-5, rtol=0)
        # labels= is the training loss: GenomeLM's forward on the same window (N ignored)
        module = GenomeLM(ours.config)
        module.model.load_state_dict(ours.state_dict())
        with torch.no_grad():
            train_loss = module(tokens)
        torch.testing.assert_close(out.loss, train_loss, atol=1e-6, rtol=0)
        assert not torch.isclose(  # N targets really are left out
            out.loss,
            torch.nn.functional.cross_entropy(
                expected[:, :-1].flatten(0, 1), tokens[:, 1:].flatten()
            ),
        )
        # save_pretrained / from_pretrained round trip keeps weights and provenance
        again_dir = tmp_path / f"{scheme}-again"
        model.save_pretrained(again_dir)
        tokenizer.save_pretrained(again_dir)
        again = transformers.AutoModelForCausalLM.from_pretrained(again_dir)
        assert again.config.goatdna_provenance == config.goatdna_provenance
        with torch.no_grad():
            torch.testing.assert_close(again(tokens).logits, out.logits, atol=0, rtol=0)
        assert transformers.AutoTokenizer.from_pretrained(again_dir)("GATTACA").input_ids == [
            2, 0, 3, 3, 0, 1, 0,
        ]  # fmt: skip


def test_transformers_generate_matches_goatdna_greedy(exports: dict) -> None:
    import goatdna.hf  # noqa: F401

    prompt = "ACGTTGCAAGGCTTAACGTAGGCATCGATCGGATC"
    for scheme in SCHEMES:
        model = transformers.AutoModelForCausalLM.from_pretrained(exports[scheme])
        ours = load_checkpoint(exports[scheme]).model
        expected = goatdna_generate(ours, prompt, max_new_tokens=40, temperature=0.0)[0]
        tokenizer = transformers.AutoTokenizer.from_pretrained(exports[scheme])
        ids = tokenizer(prompt, return_tensors="pt").input_ids
        lengths: list[int] = []
        hook = model.model.embed.register_forward_hook(
            lambda _m, args, _o, seen=lengths: seen.append(args[0].shape[1])
        )
        try:
            cached = model.generate(ids, max_new_tokens=40, do_sample=False, use_cache=True)
        finally:
            hook.remove()
        # a KV cache: the prompt once, then one new base per step at its absolute position
        assert lengths == [len(prompt)] + [1] * 39
        text = tokenizer.decode(cached[0, len(prompt) :])
        assert text == expected, scheme
        uncached = model.generate(ids, max_new_tokens=40, do_sample=False, use_cache=False)
        assert torch.equal(uncached, cached)


def test_generate_never_emits_n(exports: dict) -> None:
    import goatdna.hf  # noqa: F401

    model = transformers.AutoModelForCausalLM.from_pretrained(exports["goat"])
    with torch.no_grad():  # make N by far the most likely next base
        model.model.head.weight[4] = model.model.head.weight[:4].abs().sum(0) * 50
    ids = torch.tensor([[0, 1, 2, 3] * 4])
    assert model(ids).logits[0, -1].argmax() == 4
    greedy = model.generate(ids, max_new_tokens=30, do_sample=False)
    sampled = model.generate(ids, max_new_tokens=30, do_sample=True, num_return_sequences=4)
    assert not (greedy[:, 16:] == 4).any() and not (sampled[:, 16:] == 4).any()
    assert sampled.shape == (4, 46)


@pytest.mark.slow
def test_trust_remote_code_without_goatdna(exports: dict, tmp_path: Path) -> None:
    """A python that cannot import goatdna loads the folder's own code and reproduces logits."""
    folder = exports["goat"]
    ours = load_checkpoint(folder).model
    tokens = _tokens(3, length=40, batch=1)
    with torch.no_grad():
        expected = ours(tokens)
        terms = attention_terms(ours, tokens, range(ours.n_layers))
    weights = [t.weights for t in terms]  # the explicit softmax(content + prior) per layer
    torch.save({"tokens": tokens, "logits": expected, "weights": weights}, tmp_path / "expected.pt")
    script = f"""
import importlib.util, sys
sys.path[:] = [p for p in sys.path if p] + {[sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]!r}
assert importlib.util.find_spec("goatdna") is None, "goatdna is importable"
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
model = AutoModelForCausalLM.from_pretrained({str(folder)!r}, trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained({str(folder)!r}, trust_remote_code=True)
assert tokenizer("acgtN").input_ids == [0, 1, 2, 3, 4]
saved = torch.load({str(tmp_path / "expected.pt")!r})
with torch.no_grad():
    logits = model(saved["tokens"]).logits
torch.testing.assert_close(logits, saved["logits"], atol=1e-5, rtol=0)
with torch.no_grad():  # the folder's own code returns the attention weights
    attentions = model(saved["tokens"], output_attentions=True).attentions
assert len(attentions) == len(saved["weights"])
for got, want in zip(attentions, saved["weights"]):
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
assert "goatdna" not in sys.modules and type(model).__module__.startswith("transformers_modules")
out = model.generate(saved["tokens"][:, :10], max_new_tokens=5, do_sample=False)
assert out.shape == (1, 15) and not (out[:, 10:] == 4).any()
print("remote-ok")
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"))
    # -S: no site processing, so the editable install's path hook never loads; -c runs in tmp_path
    res = subprocess.run(
        [sys.executable, "-S", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0 and "remote-ok" in res.stdout, res.stderr[-3000:]


def _one_line_error(args: list[str], message: str) -> None:
    res = invoke(args)
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("error: ") and message in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_bad_folders(exports: dict, tmp_path: Path) -> None:
    empty = tmp_path / "not-an-export"
    empty.mkdir()
    other = tmp_path / "bert"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 8}))
    unmerged = tmp_path / "unmerged"  # `export --no-merge`'s layout: base/ is no fine-tuned model
    shutil.copytree(exports["goat"], unmerged / "base")
    (unmerged / "adapter").mkdir()
    for folder, message in (
        (empty, "not a goatdna export folder"),
        (other, "model_type is 'bert'"),
        (unmerged, "an unmerged adapter export (base/ + adapter/)"),
    ):
        out = tmp_path / "emb.npz"
        _one_line_error(
            ["embed", "-c", str(folder), "--sequences", str(_fasta(tmp_path)), "--out", str(out)],
            message,
        )
        assert not out.exists()
        _one_line_error(["generate", "-c", str(folder), "--prompt", "ACGT"], message)
        _one_line_error(["export", "-c", str(folder), "--out", str(tmp_path / "x")], message)
        assert not (tmp_path / "x").exists()
    # an existing non-export folder is never replaced, even with --force
    _one_line_error(
        ["export", "-c", str(exports["goat"]), "--out", str(other), "--force"], "not one"
    )
    assert json.loads((other / "config.json").read_text())["model_type"] == "bert"


def _fasta(tmp_path: Path) -> Path:
    path = tmp_path / "seqs.fa"
    path.write_text(">a\nACGTACGT\n")
    return path


def test_next_token_loss_is_the_training_loss_definition() -> None:
    """The HF loss calls the shared primitive; -100 labels count as ignored like N."""
    from goatdna.hf import GoatDNAConfig, GoatDNAForCausalLM

    torch.manual_seed(0)
    config = GoatDNAConfig(n_layers=1, d_model=32, n_heads=2, mlp_hidden=64, goat_modes=4)
    model = GoatDNAForCausalLM(config).eval()
    tokens = _tokens(4, length=30, batch=2)
    labels = tokens.clone()
    labels[1, 5:9] = -100
    with torch.no_grad():
        out = model(tokens, labels=labels)
        as_n = tokens.clone()
        as_n[1, 5:9] = 4
        expected = next_token_loss(model.model(tokens)[:, :-1], as_n[:, 1:])
    torch.testing.assert_close(out.loss, expected, atol=1e-6, rtol=0)
    # padded batches are supported now (masked keys, true positions): tests/test_hf_features.py


@pytest.mark.parametrize(
    ("field", "value"),
    [("n_heads", 4), ("goat_freq_base", 500.0), ("n_layers", 1)],
)
def test_edited_export_config_is_refused(
    exports: dict, tmp_path: Path, field: str, value: object
) -> None:
    """An edit of config.json that the weights' shapes cannot reveal (n_heads, a frequency
    base) or that they do (n_layers) is one line naming the field, never a silent other model."""
    import shutil

    folder = tmp_path / "edited"
    shutil.copytree(exports["goat"], folder)
    config = json.loads((folder / "config.json").read_text())
    assert config[field] != value
    config[field] = value
    (folder / "config.json").write_text(json.dumps(config))
    _one_line_error(["generate", "-c", str(folder), "--prompt", "ACGT"], field)


def test_export_config_may_change_how_weights_run(exports: dict, tmp_path: Path) -> None:
    """rope_extension/attention are run-time choices: an edited one still loads."""
    import shutil

    from goatdna.checkpoint import load_checkpoint

    folder = tmp_path / "edited"
    shutil.copytree(exports["goat"], folder)
    config = json.loads((folder / "config.json").read_text())
    config["attention"] = "explicit"
    (folder / "config.json").write_text(json.dumps(config))
    assert load_checkpoint(folder).model_config.attention == "explicit"


def test_right_padded_generate_warns_as_transformers_does(
    exports: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decoder-only model continues a right-padded row after its pads: transformers' own
    warning fires for goatdna's model (its config names the tokenizer's pad id), and a
    left-padded batch continues each row as that row alone does."""
    from transformers.generation import utils as generation_utils

    import goatdna.hf  # noqa: F401

    warned: list[str] = []
    monkeypatch.setattr(generation_utils.logger, "warning", lambda msg, *a, **k: warned.append(msg))
    model = transformers.AutoModelForCausalLM.from_pretrained(exports["goat"]).eval()
    prompts = ["ACGTTGCAAGGCTTAACG", "ACGTTGCA"]
    right = transformers.AutoTokenizer.from_pretrained(exports["goat"], padding_side="right")
    assert right.pad_token_id == model.config.pad_token_id == model.generation_config.pad_token_id
    batch = right(prompts, padding=True, return_tensors="pt")
    model.generate(**batch, max_new_tokens=4, do_sample=False)
    assert any("right-padding was detected" in m for m in warned), warned
    warned.clear()
    left = transformers.AutoTokenizer.from_pretrained(exports["goat"], padding_side="left")
    batch = left(prompts, padding=True, return_tensors="pt")
    both = model.generate(**batch, max_new_tokens=4, do_sample=False)
    assert not any("right-padding" in m for m in warned), warned
    alone = model.generate(**left(prompts[1:], return_tensors="pt"), max_new_tokens=4,
                           do_sample=False)  # fmt: skip
    assert right.decode(both[1, -4:]) == right.decode(alone[0, -4:])


def test_authors_prior_export_loads_with_remote_code(tmp_path: Path) -> None:
    """A model with goat-attention's prior options (shared key-bias MLP, softplus slope, float32
    features, no alignment slot, grouped kv heads, the query-norm gate) and the GPT-2 block style
    exports, and the folder's own code (trust_remote_code, goatdna not importable) gives the
    same logits: every module those options touch is in the bundle."""
    config = ModelConfig(
        n_layers=2, d_model=64, n_heads=4, n_kv_heads=2, mlp_hidden=256, train_length=16,
        attention="sdpa", attention_bias=True, block_style="gpt2", tie_embeddings=True,
        goat_modes=2, goat_abs_modes=3, goat_key_mlp="shared", goat_mlp_hidden=None,
        goat_slope="softplus", goat_init="seeded", goat_split_key_bias=False,
        goat_alignment_slot=False, goat_features="float32", goat_prior_gate="query_norm",
    )  # fmt: skip
    _assert_remote_code_reproduces(config, tmp_path)


def test_ablated_prior_export_loads_with_remote_code(tmp_path: Path) -> None:
    """Every ablation switch on (docs/ablations.md: no b_r, no key MLP, no sink, heads grown by
    d_p): the export's own code rebuilds the removed terms as zeros and gives the same logits."""
    config = ModelConfig(
        n_layers=2, d_model=64, n_heads=4, mlp_hidden=96, train_length=16, attention="sdpa",
        goat_modes=2, goat_directional=False, goat_key_mlp="none", goat_sink=False,
        goat_equal_content=True,
    )  # fmt: skip
    _assert_remote_code_reproduces(config, tmp_path)


def _assert_remote_code_reproduces(config: ModelConfig, tmp_path: Path) -> None:
    """Export a randomised model of ``config``; in a fresh interpreter without goatdna, the
    folder's code (trust_remote_code) gives its logits and its greedy continuation."""
    from goatdna.checkpoint import save_checkpoint
    from goatdna.configfile import to_dict

    model = randomized_decoder(config)
    ckpt = save_checkpoint(
        tmp_path / "model.ckpt", model, {"model": to_dict(config), "data": {"seq_len": 16}}
    )
    folder = tmp_path / "export"
    res = invoke(["export", "--checkpoint", str(ckpt), "--out", str(folder)])
    assert res.exit_code == 0, res.output
    tokens = _tokens(4, length=48, batch=2)
    with torch.no_grad():
        expected = model(tokens)
        greedy = tokens[:1, :10]  # goatdna's greedy continuation (never N): generate's reference
        for _ in range(6):
            greedy = torch.cat([greedy, model(greedy)[:, -1:, :4].argmax(-1)], dim=1)
    torch.save({"tokens": tokens, "logits": expected, "greedy": greedy}, tmp_path / "expected.pt")
    script = f"""
import importlib.util, sys
sys.path[:] = [p for p in sys.path if p] + {[sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]!r}
assert importlib.util.find_spec("goatdna") is None, "goatdna is importable"
import torch
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained({str(folder)!r}, trust_remote_code=True)
saved = torch.load({str(tmp_path / "expected.pt")!r})
with torch.no_grad():
    logits = model(saved["tokens"]).logits
torch.testing.assert_close(logits, saved["logits"], atol=1e-5, rtol=0)
# cached decoding through transformers' cache (the kv heads only), greedy as goatdna's
out = model.generate(saved["tokens"][:1, :10], max_new_tokens=6, do_sample=False)
assert torch.equal(out, saved["greedy"]), (out, saved["greedy"])
print("remote-ok")
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"))
    res = subprocess.run(
        [sys.executable, "-S", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0 and "remote-ok" in res.stdout, res.stderr[-3000:]


def test_bundled_model_files_import_only_bundled_files() -> None:
    """Every relative import of a bundled model file is itself bundled (a new model module the
    wrapper reaches must join MODEL_SOURCES); goat_attention.py, the converter from the authors'
    package, is reached by none of them and so stays out."""
    import ast

    from goatdna.hf.export import MODEL_SOURCES

    folder = Path(__file__).resolve().parents[1] / "goatdna" / "model"
    for name in MODEL_SOURCES:
        for node in ast.walk(ast.parse((folder / name).read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                assert f"{node.module}.py" in MODEL_SOURCES, f"{name} imports .{node.module}"
    assert "goat_attention.py" not in MODEL_SOURCES
