"""`goatdna finetune --mode lora/ia3`: peft adapters on the frozen backbone, checkpoints of only
what was trained, loading base + adapters through `load_task_model`, merged/unmerged export."""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import assert_one_error_line, invoke, tiny_config

from goatdna import faults
from goatdna.adapters import ADAPTER_TARGETS
from goatdna.checkpoint import load_checkpoint, load_task_model, save_checkpoint
from goatdna.configfile import to_dict
from goatdna.model import DNADecoder

pytest.importorskip("peft")
TINY = tiny_config(train_length=64)


def _invoke(*args: object) -> str:
    result = invoke(args)
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def task_dir(synthetic_shards: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lora_task") / "gc"
    _invoke("make-task", "--data", synthetic_shards, "--out", out, "--label", "gc",
            "--max-train", "64", "--max-eval", "32")  # fmt: skip
    return out


def _backbone(folder: Path, seed: int = 0) -> Path:
    torch.manual_seed(seed)
    return save_checkpoint(folder / "lm.ckpt", DNADecoder(TINY), {"model": to_dict(TINY)})


def _args(task: Path, backbone: Path, mode: str, *extra: object) -> list[str]:
    return [str(a) for a in ("finetune", "--checkpoint", backbone, "--train", task / "train.csv",
            "--val", task / "val.csv", "--mode", mode, "--epochs", "2", "--batch-size", "16",
            "--backbone-lr", "3e-3", "--no-progress", *extra)]  # fmt: skip


@pytest.fixture(scope="module")
def lora_run(task_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A LoRA fine-tune (rank 4, dropout) of a tiny backbone: (backbone .ckpt, run dir)."""
    root = tmp_path_factory.mktemp("lora_run")
    backbone = _backbone(root)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _invoke(*_args(task_dir, backbone, "lora", "--lora-rank", "4", "--lora-alpha", "8",
                       "--lora-dropout", "0.1", "--rc-average", "--out", root / "run"))  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    return backbone, root / "run"


def test_lora_trains_only_the_targeted_modules(lora_run: tuple[Path, Path]) -> None:
    backbone, run = lora_run
    before = torch.load(backbone, weights_only=True)["state_dict"]
    ckpt = torch.load(run / "checkpoints" / "best.ckpt", weights_only=True)
    # the checkpoint holds the adapters and the head only, and names its backbone
    keys = set(ckpt["state_dict"])
    adapters = {k for k in keys if k.startswith("model.")}
    assert keys - adapters == {
        "head.center",
        "head.scale",
        "head.linear.weight",
        "head.linear.bias",
    }
    assert adapters and all(".lora_A." in k or ".lora_B." in k for k in adapters)
    assert {k.split(".")[4] for k in adapters} == set(ADAPTER_TARGETS)
    section = ckpt["hyper_parameters"]["config"]["adapter"]
    assert section["backbone"] == str(backbone.resolve()) and section["rank"] == 4
    assert section["backbone_sha256"] == _sha(backbone)
    assert ckpt["optimizer"]["state"], "adapters were optimised"
    # the merged decoder differs from the backbone exactly in the targeted weights
    merged = load_checkpoint(run / "checkpoints" / "best.ckpt").model.state_dict()
    assert set(merged) == {k.removeprefix("model.") for k in before}
    for key, value in before.items():
        name = key.removeprefix("model.")
        targeted = name.rsplit(".", 2)[-2] in ADAPTER_TARGETS
        assert torch.equal(merged[name], value) != targeted, name
    # trainable parameters: adapters (rank 4 on 4 projections) + head
    import json

    summary = json.loads((run / "summary.json").read_text())
    shapes = {k: v.shape for k, v in ckpt["state_dict"].items()}
    assert all(4 in shapes[k] for k in adapters)  # (rank, in) and (out, rank)
    lora = sum(shapes[k].numel() for k in adapters)
    assert summary["trainable_params"] == lora + TINY.d_model * 3 + 3  # + the head's linear


def test_backbone_bytes_unchanged_by_training(task_dir: Path, tmp_path: Path) -> None:
    backbone = _backbone(tmp_path)
    digest = _sha(backbone)
    with torch.no_grad():
        reference = load_checkpoint(backbone).model.state_dict()
    _invoke(*_args(task_dir, backbone, "ia3", "--epochs", "1", "--out", tmp_path / "run"))
    assert _sha(backbone) == digest
    ckpt = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=True)
    adapters = [k for k in ckpt["state_dict"] if k.startswith("model.")]
    assert adapters and all(".ia3_l." in k for k in adapters)
    merged = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.ckpt").model.state_dict()
    assert torch.equal(merged["embed.weight"], reference["embed.weight"])
    assert not torch.equal(
        merged["blocks.0.attn.q_proj.weight"], reference["blocks.0.attn.q_proj.weight"]
    )


def test_predict_uses_base_plus_adapters(lora_run: tuple[Path, Path], tmp_path: Path) -> None:
    """predict reads the LoRA checkpoint through load_task_model: base + adapters (unmerged peft
    forward, computed here independently) + head."""
    from peft import LoraConfig
    from peft.tuners.lora import LoraModel

    from goatdna.io.tokens import encode
    from goatdna.model.classifier import SequenceTaskModel, pad_sequences

    backbone, run = lora_run
    ckpt = run / "checkpoints" / "best.ckpt"
    loaded = load_task_model(ckpt)
    seqs = ["ACGTACGGTTCA" * 5, "GGCCGGCATTA" * 4]
    path = tmp_path / "in.csv"
    path.write_text("sequence\n" + "\n".join(seqs) + "\n")
    _invoke("predict", "--checkpoint", ckpt, "--sequences", path, "--out", tmp_path / "p.csv")
    with (tmp_path / "p.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    got = np.array([[float(r[f"prob_{c}"]) for c in loaded.classes] for r in rows])

    base = load_checkpoint(backbone).model
    state = torch.load(ckpt, weights_only=True)["state_dict"]
    LoraModel(base, LoraConfig(r=4, lora_alpha=8, target_modules=list(ADAPTER_TARGETS)),
              "default")  # fmt: skip
    base.load_state_dict(
        {k[6:]: v for k, v in state.items() if k.startswith("model.")}, strict=False
    )
    unmerged = SequenceTaskModel(base, loaded.classifier.task_config).eval()
    unmerged.head.load_state_dict({k[5:]: v for k, v in state.items() if k.startswith("head.")})
    tokens, lengths = pad_sequences([torch.as_tensor(encode(s)) for s in seqs])
    with torch.no_grad():
        want = unmerged.predict(tokens, lengths).double().numpy()
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_wrong_or_missing_backbone_is_one_error_line(
    lora_run: tuple[Path, Path], tmp_path: Path
) -> None:
    backbone, run = lora_run
    ckpt = tmp_path / "best.ckpt"
    shutil.copy(run / "checkpoints" / "best.ckpt", ckpt)
    saved = backbone.read_bytes()
    try:
        _backbone(backbone.parent, seed=1)  # another backbone at the recorded path
        for command in (["predict", "--sequences", tmp_path / "x.csv", "--out", tmp_path / "p.csv"],
                        ["export", "--out", tmp_path / "export"]):  # fmt: skip
            (tmp_path / "x.csv").write_text("sequence\nACGT\n")
            result = invoke([str(a) for a in [*command, "--checkpoint", ckpt]])
            assert result.exit_code == 2, result.output
            lines = result.output.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), result.output
            assert "not the one these adapters were trained on" in lines[0]
        backbone.unlink()
        result = invoke(["export", "--checkpoint", str(ckpt), "--out", str(tmp_path / "e")])
        assert result.exit_code == 2 and "is missing" in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1
    finally:
        backbone.write_bytes(saved)
    assert not (tmp_path / "p.csv").exists() and not (tmp_path / "export").exists()


def test_lora_options_are_checked(task_dir: Path, tmp_path: Path) -> None:
    """Every bad adapter flag is one line before anything is written to the run folder (so the
    corrected command needs no --force); a rank beyond the targeted layers' width (a LoRA
    factor that big is no low-rank update, and --lora-rank 1000000 ran out of memory) too."""
    backbone = _backbone(tmp_path)
    run = tmp_path / "run"
    args = [a for a in _args(task_dir, backbone, "lora") if a not in ("--mode", "lora")]
    args = [*args, "--epochs", "1"]
    for extra, words in ((["--mode", "full", "--lora-rank", "4"], "apply to mode lora only"),
                         (["--mode", "lora", "--lora-rank", "0"], "--lora-rank 0"),
                         (["--mode", "lora", "--lora-targets", "qkv"], "no module of the decoder"),
                         (["--mode", "ia3", "--lora-targets", "q_proj,qkv"], "named qkv"),
                         (["--mode", "lora", "--lora-rank", "1000000"],
                          "--lora-rank 1000000: above the width 20"),
                         (["--mode", "lora", "--lora-rank", "33", "--lora-targets", "up_proj"],
                          "at most 32: up_proj is 32 x 64")):  # fmt: skip
        result = invoke([*args, *extra, "--out", str(run)])
        assert result.exit_code == 2, (extra, result.output, result.exception)
        assert words in result.output and len(result.output.strip().splitlines()) == 1, (
            extra, result.output)  # fmt: skip
        assert not run.exists() or not any(run.iterdir()), (extra, sorted(run.iterdir()))
    result = invoke([*args, "--mode", "lora", "--lora-rank", "20", "--lora-targets",
                                 "q_proj,up_proj", "--out", str(run)])  # fmt: skip
    assert result.exit_code == 0, (result.output, result.exception)


@pytest.mark.slow
def test_sigkill_then_resume_gives_identical_adapters(
    task_dir: Path, tmp_path: Path, one_thread: None
) -> None:
    backbone = _backbone(tmp_path)
    args = _args(task_dir, backbone, "lora", "--lora-dropout", "0.1", "--epochs", "3")
    straight = tmp_path / "straight"
    _invoke(*args, "--out", straight)

    crashed = tmp_path / "crashed"
    env = dict(os.environ, OMP_NUM_THREADS="1", **faults.arm("train.checkpoint_saved", 8))
    cmd = [sys.executable, "-m", "goatdna.cli.app", *args, "--out", str(crashed)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert torch.load(crashed / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 8
    _invoke("finetune", "--out", crashed, "--resume")

    a = torch.load(straight / "checkpoints" / "last.ckpt", weights_only=True)
    b = torch.load(crashed / "checkpoints" / "last.ckpt", weights_only=True)
    assert a["global_step"] == b["global_step"] == 12
    assert set(a["state_dict"]) == set(b["state_dict"])
    for key, value in a["state_dict"].items():
        assert torch.equal(b["state_dict"][key], value), key


def _test_rows(task: Path, tmp_path: Path) -> tuple[Path, list[str]]:
    """Test rows cut to different lengths (so a batch is padded), as a predict input."""
    with (task / "test.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))[:8]
    seqs = [r["sequence"][: 60 + 13 * i] for i, r in enumerate(rows)]
    path = tmp_path / "input.csv"
    path.write_text("sequence\n" + "\n".join(seqs) + "\n")
    return path, seqs


def test_merged_and_unmerged_exports_predict_what_predict_does(
    lora_run: tuple[Path, Path], task_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    transformers = pytest.importorskip("transformers")
    from peft import PeftModel

    import goatdna.hf  # noqa: F401  (registers the Auto classes)

    _, run = lora_run
    ckpt = run / "checkpoints" / "best.ckpt"
    sequences, seqs = _test_rows(task_dir, tmp_path)
    _invoke("predict", "--checkpoint", ckpt, "--sequences", sequences, "--out", tmp_path / "p.csv")
    with (tmp_path / "p.csv").open(newline="") as fh:
        expected = list(csv.DictReader(fh))
    classes = load_task_model(ckpt).classes
    want = np.array([[float(r[f"prob_{c}"]) for c in classes] for r in expected])

    merged, unmerged = tmp_path / "merged", tmp_path / "unmerged"
    _invoke("export", "--checkpoint", ckpt, "--out", merged)
    _invoke("export", "--checkpoint", ckpt, "--out", unmerged, "--no-merge")
    assert sorted(p.name for p in unmerged.iterdir()) == ["README.md", "adapter", "base"]
    adapter_files = {p.name for p in (unmerged / "adapter").iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors"} <= adapter_files
    base = transformers.AutoModelForSequenceClassification.from_pretrained(unmerged / "base")
    models = {
        "merged": transformers.AutoModelForSequenceClassification.from_pretrained(merged),
        "unmerged": PeftModel.from_pretrained(base, unmerged / "adapter"),
    }
    tokenizer = transformers.AutoTokenizer.from_pretrained(merged)
    batch = tokenizer(seqs, padding=True, return_tensors="pt")
    assert not batch.attention_mask.all()
    for name, model in models.items():
        with torch.no_grad():
            probs = model.eval()(**batch).logits.softmax(-1).numpy()
        np.testing.assert_allclose(probs, want, atol=1e-5, rtol=0, err_msg=name)
    # the unmerged folder's base is the pretrained backbone's weights, not the merged ones
    lm = load_checkpoint(lora_run[0]).model.state_dict()
    weight = base.model.blocks[0].attn.q_proj.base_layer.weight  # peft wrapped it in place
    assert torch.equal(weight, lm["blocks.0.attn.q_proj.weight"])
    # the adapter config names the base by its place in the folder and builds it through
    # transformers' Auto class (the folder's own code), not an installed goatdna's class or
    # an absolute path: peft's AutoPeftModel loads the moved folder without goatdna's help
    import json

    from peft import AutoPeftModel

    adapter_config = json.loads((unmerged / "adapter" / "adapter_config.json").read_text())
    assert adapter_config["base_model_name_or_path"] == "base"
    # peft holds the targets as a set, written in the process's hash order: sorted, the file is
    # the same from one run to the next
    assert adapter_config["target_modules"] == sorted(adapter_config["target_modules"])
    assert adapter_config["auto_mapping"] == {
        "base_model_class": "AutoModelForSequenceClassification",
        "parent_library": "transformers",
    }
    for path in (unmerged / "adapter").iterdir():
        text = path.read_bytes()
        assert str(tmp_path).encode() not in text and b"goatdna.hf" not in text, path.name
    moved = tmp_path / "moved"
    shutil.move(unmerged, moved)
    monkeypatch.chdir(moved)
    auto = AutoPeftModel.from_pretrained("adapter", trust_remote_code=True).eval()
    with torch.no_grad():
        probs = auto(**batch).logits.softmax(-1).numpy()
    np.testing.assert_allclose(probs, want, atol=1e-5, rtol=0)
    # --no-merge of a checkpoint without adapters is one line
    result = invoke(["export", "--checkpoint", str(lora_run[0]), "--out",
                                 str(tmp_path / "x"), "--no-merge"])  # fmt: skip
    assert result.exit_code == 2 and "has no adapters" in result.output, result.output


def test_exported_causal_lm_trains_with_peft_and_trainer(
    lora_run: tuple[Path, Path], tmp_path: Path
) -> None:
    """Outside goatdna: the exported LM takes `get_peft_model(LoraConfig(...))` and a few steps
    of transformers' Trainer; only the adapters move, and peft's saved adapter reloads."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from peft import LoraConfig, PeftModel, get_peft_model

    folder = tmp_path / "lm"
    _invoke("export", "--checkpoint", lora_run[0], "--out", folder)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    config = LoraConfig(r=4, lora_alpha=8, target_modules=list(ADAPTER_TARGETS),
                        task_type="CAUSAL_LM")  # fmt: skip
    peft_model = get_peft_model(model, config)
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    assert 0 < trainable < 0.2 * sum(p.numel() for p in peft_model.parameters())

    rng = np.random.default_rng(0)
    motif = "ACGTTGCA" * 8
    rows = [tokenizer(motif[: 40 + int(rng.integers(0, 24))]) for _ in range(32)]
    data = [{"input_ids": r["input_ids"], "labels": r["input_ids"]} for r in rows]

    def collate(items: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
        n = min(len(i["input_ids"]) for i in items)
        ids = torch.tensor([i["input_ids"][:n] for i in items])
        return {"input_ids": ids, "labels": ids}

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "trainer"), max_steps=12, per_device_train_batch_size=8,
        learning_rate=2e-2, logging_steps=1, save_strategy="no", report_to=[],
        use_cpu=True, dataloader_num_workers=0, disable_tqdm=True,
    )  # fmt: skip
    trainer = transformers.Trainer(model=peft_model, args=args, train_dataset=data,
                                   data_collator=collate)  # fmt: skip
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 12 and np.mean(losses[-3:]) < np.mean(losses[:3])

    peft_model.save_pretrained(tmp_path / "adapter")
    merged_state = peft_model.get_base_model().state_dict()
    for key, value in before.items():  # the base weights under the adapters never moved
        base_key = key.replace(".weight", ".base_layer.weight")
        assert torch.equal(merged_state.get(base_key, merged_state.get(key)), value), key
    ids = torch.tensor([tokenizer(motif)["input_ids"]])
    with torch.no_grad():
        want = peft_model.eval()(input_ids=ids).logits
    fresh = transformers.AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
    reloaded = PeftModel.from_pretrained(fresh, tmp_path / "adapter").eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(input_ids=ids).logits, want, atol=1e-5, rtol=0)


def test_missing_peft_is_one_error_line(
    task_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backbone = _backbone(tmp_path)
    monkeypatch.setitem(sys.modules, "peft", None)  # `import peft` raises ImportError
    result = invoke([*_args(task_dir, backbone, "lora"), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        "error: adapter fine-tuning (--mode lora/ia3) needs the peft library: "
        "pip install 'goatdna[lora]'"
    ]
    assert not (tmp_path / "r").exists()


@pytest.fixture(scope="module")
def fine_tuned_models(
    lora_run: tuple[Path, Path], task_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """Every kind of fine-tuned model a user may hold: a LoRA and a full fine-tune's .ckpt, the
    LoRA's merged export folder and its unmerged export's base/ (backbone + head)."""
    pytest.importorskip("transformers")
    backbone, run = lora_run
    root = tmp_path_factory.mktemp("fine_tuned_models")
    _invoke(*_args(task_dir, backbone, "full", "--epochs", "1", "--out", root / "full"))
    lora = run / "checkpoints" / "best.ckpt"
    _invoke("export", "--checkpoint", lora, "--out", root / "merged")
    _invoke("export", "--checkpoint", lora, "--out", root / "unmerged", "--no-merge")
    return {
        "lora": lora,
        "full": root / "full" / "checkpoints" / "best.ckpt",
        "merged-export": root / "merged",
        "unmerged-base": root / "unmerged" / "base",
    }


LM_COMMANDS = ("score-variants", "mutagenesis", "score-track", "check-precision", "evaluate",
               "generate", "probe-recall")  # fmt: skip
"""Every command that scores with the language model's next-base head."""


@pytest.mark.parametrize("command", LM_COMMANDS)
def test_language_model_commands_refuse_a_fine_tuned_model(
    fine_tuned_models: dict[str, Path], synthetic_shards: Path, tmp_path: Path, command: str
) -> None:
    """A fine-tuned model's next-base head was never trained with its backbone (a LoRA's merged
    backbone under the pretrained head scored LLRs off by over a nat): each LM command refuses
    it in one line naming the file and `goatdna predict`, writing nothing."""
    rng = np.random.default_rng(0)
    fasta = tmp_path / "ref.fa"
    bases = "".join(rng.choice(list("ACGT"), 400))
    fasta.write_text(">chr1\n" + bases + "\n")
    variants = tmp_path / "variants.tsv"
    variants.write_text(
        f"chrom\tpos\tref\talt\nchr1\t100\t{bases[99]}\t{'A' if bases[99] != 'A' else 'C'}\n"
    )
    out = tmp_path / "out"
    args = {
        "score-variants": ["--fasta", fasta, "--variants", variants, "--out", out.with_suffix(".tsv")],
        "mutagenesis": ["--fasta", fasta, "--region", "chr1:101-120", "--out", out.with_suffix(".tsv")],
        "score-track": ["--fasta", fasta, "--region", "chr1:1-200", "--out", out.with_suffix(".bedgraph")],
        "check-precision": ["--fasta", fasta, "--out", out.with_suffix(".json")],
        "evaluate": ["--data", synthetic_shards, "--out", out],
        "generate": ["--prompt", "ACGTACGT", "--out", out.with_suffix(".fa")],
        "probe-recall": ["--data", synthetic_shards, "--out", out],
    }[command]  # fmt: skip
    for kind, model in fine_tuned_models.items():
        result = invoke([command, "--checkpoint", str(model), *map(str, args)])
        assert result.exit_code == 2, (kind, result.output, result.exception)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {model}: is a fine-tuned"), (
            kind,
            lines,
        )
        assert "not a pretrained language model" in lines[0] and command in lines[0], lines
        assert "`goatdna predict`" in lines[0], lines
        assert ("lora adapters" in lines[0]) == (kind != "full"), lines
        assert not [p for p in tmp_path.iterdir() if p.name.startswith("out")], kind


def test_a_run_moved_with_its_backbone_finds_it(task_dir: Path, tmp_path: Path) -> None:
    """The adapter section records the backbone relative to the run folder too, and that path
    is tried first: a run moved together with its backbone loads, predicts and exports from
    the new place (the recorded absolute path is gone)."""
    pytest.importorskip("transformers")
    before = tmp_path / "before"
    backbone = _backbone(before)
    _invoke(*_args(task_dir, backbone, "lora", "--epochs", "1", "--out", before / "run"))
    section = torch.load(before / "run" / "checkpoints" / "last.ckpt", weights_only=True)[
        "hyper_parameters"
    ]["config"]["adapter"]
    assert section["backbone_relative"] == "../lm.ckpt"
    assert section["backbone"] == str(backbone.resolve())  # still read by older goatdna
    want = load_checkpoint(before / "run" / "checkpoints" / "last.ckpt").model.state_dict()

    after = tmp_path / "moved" / "elsewhere"
    after.parent.mkdir()
    shutil.move(before, after)
    assert not backbone.exists()
    ckpt = after / "run" / "checkpoints" / "last.ckpt"
    got = load_checkpoint(ckpt).model.state_dict()
    assert all(torch.equal(got[k], v) for k, v in want.items())
    (tmp_path / "x.csv").write_text("sequence\nACGTACGTTGCA\n")
    _invoke("predict", "-c", ckpt, "--sequences", tmp_path / "x.csv", "--out", tmp_path / "p.csv")
    _invoke("export", "-c", ckpt, "--out", tmp_path / "unmerged", "--no-merge")
    # a checkpoint taken out of its run folder falls back to the absolute path: gone here
    shutil.copy(ckpt, tmp_path / "alone.ckpt")
    result = invoke(["export", "-c", str(tmp_path / "alone.ckpt"), "--out",
                                 str(tmp_path / "e")])  # fmt: skip
    assert (
        result.exit_code == 2 and f"its backbone {backbone.resolve()} is missing" in result.output
    )


def test_a_run_from_before_the_relative_path_resumes(task_dir: Path, tmp_path: Path) -> None:
    """config.yaml written without ``adapter.backbone_relative`` (older goatdna) still resumes:
    where the backbone lies may differ on resume, which backbone it is (its sha256) may not."""
    import yaml

    backbone = _backbone(tmp_path)
    run = tmp_path / "run"
    _invoke(*_args(task_dir, backbone, "lora", "--epochs", "1", "--out", run))
    config = yaml.safe_load((run / "config.yaml").read_text())
    del config["adapter"]["backbone_relative"]
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    assert '"steps": 4' in _invoke("finetune", "--out", run, "--resume")


@pytest.mark.parametrize("merge", ["--merge", "--no-merge"])
def test_export_reads_each_file_once(
    lora_run: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, merge: str
) -> None:
    """`goatdna export` of a LoRA fine-tune unpickles its .ckpt and its backbone one time each
    and hashes the backbone once (--no-merge used to read the .ckpt five times and the backbone
    three): the one `CheckpointFile` read goes to every loader the export needs."""
    pytest.importorskip("transformers")
    import goatdna.adapters

    backbone, run = lora_run
    ckpt = run / "checkpoints" / "best.ckpt"
    loads: list[Path] = []
    hashes: list[Path] = []
    real_load, real_sha = torch.load, goatdna.adapters.file_sha256

    def counting_load(f: object, *args: object, **kwargs: object) -> object:
        if isinstance(f, (str, Path)):
            loads.append(Path(f).resolve())
        return real_load(f, *args, **kwargs)  # type: ignore[arg-type]

    def counting_sha(path: str | Path) -> str:
        hashes.append(Path(path).resolve())
        return real_sha(path)

    monkeypatch.setattr(torch, "load", counting_load)
    monkeypatch.setattr(goatdna.adapters, "file_sha256", counting_sha)
    _invoke("export", "--checkpoint", ckpt, "--out", tmp_path / "out", merge)
    assert sorted(loads) == sorted([ckpt.resolve(), backbone.resolve()])
    assert hashes == [backbone.resolve()]


def test_read_checkpoint_says_what_a_file_holds(
    lora_run: tuple[Path, Path], fine_tuned_models: dict[str, Path]
) -> None:
    """One read tells a language model from a fine-tuned model from an adapter fine-tune (whose
    backbone is another file), for a .ckpt and an export folder alike."""
    from goatdna.checkpoint import read_checkpoint

    holds = {kind: read_checkpoint(path).holds for kind, path in fine_tuned_models.items()}
    assert holds == {"lora": "adapters", "full": "fine-tuned", "merged-export": "fine-tuned",
                     "unmerged-base": "fine-tuned"}  # fmt: skip
    assert read_checkpoint(lora_run[0]).holds == "language-model"
    lora = read_checkpoint(fine_tuned_models["lora"])
    assert lora.adapters is not None and lora.adapters.mode == "lora"
    assert lora.head is not None and lora.head["task"] == "classification"


def test_a_run_moved_with_its_backbone_resumes(task_dir: Path, tmp_path: Path) -> None:
    """`--resume` of an adapter run moved together with its backbone finds the backbone
    through ``adapter.backbone_relative`` (config.yaml's backbone.checkpoint is gone), and
    continues (here: a finished run, which resumes to its last step)."""
    before = tmp_path / "before"
    backbone = _backbone(before)
    _invoke(*_args(task_dir, backbone, "lora", "--epochs", "1", "--out", before / "run"))
    after = tmp_path / "after"
    shutil.move(before, after)
    assert not backbone.exists()
    out = _invoke("finetune", "--out", after / "run", "--resume")
    assert '"steps": 4' in out, out


def test_a_moved_run_without_its_backbone_names_the_flag(task_dir: Path, tmp_path: Path) -> None:
    """A moved adapter run whose backbone is not where either recorded path points: one line
    naming the missing backbone and --checkpoint; passing --checkpoint with the backbone's new
    place resumes (which backbone it is stays pinned by its sha256)."""
    before = tmp_path / "before"
    backbone = _backbone(before)
    _invoke(*_args(task_dir, backbone, "lora", "--epochs", "1", "--out", before / "run"))
    shutil.move(before / "run", tmp_path / "run")
    shutil.move(backbone, tmp_path / "elsewhere.ckpt")
    resumed = ["finetune", "--out", tmp_path / "run", "--resume"]
    line = assert_one_error_line(invoke(resumed), str(backbone), "--checkpoint")
    assert "missing" in line, line
    other = _backbone(tmp_path / "other", seed=1)  # another backbone is refused
    assert_one_error_line(invoke([*resumed, "--checkpoint", other]), "backbone_sha256")
    out = _invoke(*resumed, "--checkpoint", tmp_path / "elsewhere.ckpt")
    assert '"steps": 4' in out, out
