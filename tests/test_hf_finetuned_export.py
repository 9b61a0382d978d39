"""`goatdna export` of a `goatdna finetune` model: an AutoModelForSequenceClassification folder
whose predictions are `goatdna predict`'s (classification with strand averaging, regression)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import invoke

transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")


def _invoke(*args: object) -> str:
    result = invoke(args)
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


@pytest.fixture(scope="module")
def task_csv(synthetic_shards: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hf_task") / "gc"
    _invoke("make-task", "--data", synthetic_shards, "--out", out, "--label", "gc",
            "--max-train", "120", "--max-eval", "40")  # fmt: skip
    return out


def _finetune(task: Path, ckpt: Path, out: Path, *extra: object) -> Path:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _invoke("finetune", "--checkpoint", ckpt, "--train", task / "train.csv",
                "--val", task / "val.csv", "--out", out, "--no-progress", "--mode", "probe",
                "--epochs", "2", "--lr", "3e-3", *extra)  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    return out / "checkpoints" / "best.ckpt"


def _predict_csv(ckpt: Path, sequences: Path, out: Path, *extra: object) -> list[dict[str, str]]:
    _invoke("predict", "--checkpoint", ckpt, "--sequences", sequences, "--out", out, *extra)
    with out.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _sequences(task: Path, tmp_path: Path) -> tuple[Path, list[str]]:
    """Test rows cut to different lengths (so the HF batch is padded), as a predict input."""
    with (task / "test.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))[:12]
    seqs = [r["sequence"][: 60 + 11 * i] for i, r in enumerate(rows)]
    path = tmp_path / "input.csv"
    path.write_text("sequence\n" + "\n".join(seqs) + "\n")
    return path, seqs


def test_classifier_export_predicts_what_goatdna_predict_does(
    task_csv: Path, tiny_runs: dict[str, Path], tmp_path: Path
) -> None:
    import goatdna.hf  # noqa: F401  (registers the Auto classes)

    ckpt = _finetune(task_csv, tiny_runs["goat"] / "checkpoints" / "best.ckpt",
                     tmp_path / "ft", "--rc-average")  # fmt: skip
    folder = tmp_path / "export"
    said = _invoke("export", "--checkpoint", ckpt, "--out", folder)
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["GoatDNAForSequenceClassification"]
    assert config["classifier_rc_average"] is True
    card = (folder / "README.md").read_text()
    assert "pipeline_tag: text-classification" in card
    # the classifier is what is stored and counted: no next-base head (fine-tuning never
    # trains it, the classifier never reads it), and transformers misses no weight
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), "pt") as fh:
        stored = set(fh.keys())
    assert "model.head.weight" not in stored and "head.linear.weight" in stored
    model, info = transformers.AutoModelForSequenceClassification.from_pretrained(
        folder, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    count = model.num_parameters()
    assert f"exported {count:,} parameters to {folder}" in said, said
    assert f"; {count:,} parameters" in card
    # goatdna reads the folder with that head NaN (never a plausible next-base score), and a
    # folder from before, which stored the pretrained head, predicts the same
    from safetensors.torch import load_file, save_file

    from goatdna.checkpoint import load_checkpoint

    assert load_checkpoint(folder).model.head.weight.isnan().all()
    older = tmp_path / "older"
    shutil.copytree(folder, older)
    weights = load_file(str(folder / "model.safetensors"))
    lm_head = torch.load(ckpt, weights_only=True)["state_dict"]["model.head.weight"]
    save_file({**weights, "model.head.weight": lm_head}, str(older / "model.safetensors"))
    assert torch.equal(load_checkpoint(older).model.head.weight, lm_head)

    sequences, seqs = _sequences(task_csv, tmp_path)
    expected = _predict_csv(ckpt, sequences, tmp_path / "pred.csv")
    classes = list(config["id2label"].values())
    assert classes == ["high", "low", "mid"]
    for source in (folder, older):
        assert _predict_csv(source, sequences, tmp_path / f"{source.name}.csv") == expected

    model.eval()
    want = np.array([[float(r[f"prob_{c}"]) for c in classes] for r in expected])
    for side in ("right", "left"):
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, padding_side=side)
        batch = tokenizer(seqs, padding=True, return_tensors="pt")
        assert not batch.attention_mask.all()
        with torch.no_grad():
            probs = model(**batch).logits.softmax(-1).numpy()
        np.testing.assert_allclose(probs, want, atol=1e-5, rtol=0)
        assert [classes[i] for i in probs.argmax(-1)] == [r["pred"] for r in expected]


def test_regression_export_predicts_label_units(
    task_csv: Path, tiny_runs: dict[str, Path], tmp_path: Path
) -> None:
    import goatdna.hf  # noqa: F401

    rows = list(csv.DictReader((task_csv / "train.csv").open(newline="")))
    src = tmp_path / "gc.csv"
    src.write_text("sequence,gc\n" + "".join(
        f"{r['sequence']},{(r['sequence'].count('G') + r['sequence'].count('C')) / len(r['sequence']):.4f}\n"
        for r in rows
    ))  # fmt: skip
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _invoke("finetune", "--checkpoint", tiny_runs["rope"] / "checkpoints" / "best.ckpt",
                "--train", src, "--label-column", "gc", "--out", tmp_path / "reg",
                "--no-progress", "--mode", "probe", "--epochs", "2", "--lr", "3e-3")  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    ckpt = tmp_path / "reg" / "checkpoints" / "best.ckpt"
    folder = tmp_path / "export"
    _invoke("export", "--checkpoint", ckpt, "--out", folder)
    sequences, seqs = _sequences(task_csv, tmp_path)
    expected = [float(r["pred"]) for r in _predict_csv(ckpt, sequences, tmp_path / "pred.csv")]
    model = transformers.AutoModelForSequenceClassification.from_pretrained(folder).eval()
    assert model.config.problem_type == "regression"
    batch = transformers.AutoTokenizer.from_pretrained(folder)(
        seqs, padding=True, return_tensors="pt"
    )
    with torch.no_grad():
        values = model(**batch).logits[:, 0].numpy()
    np.testing.assert_allclose(values, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    ("layer", "pool"),
    [("1", "last"), ("2", "mean"), ("final", "last"), ("all", "mean,last")],
    ids=["inner-layer-last", "last-layer-mean", "final-norm-last", "sweep"],
)
def test_export_carries_the_probe_layer_and_pool(
    task_csv: Path, tiny_runs: dict[str, Path], tmp_path: Path, layer: str, pool: str
) -> None:
    """Every layer/pool a probe sweep can choose (an inner block, the last block, the final
    norm; mean, last) survives the export: AutoModelForSequenceClassification, `goatdna predict`
    of the folder and of the .ckpt agree to 1e-5, and `embed -c FOLDER` reads the probe's layer."""
    import goatdna.hf  # noqa: F401

    backbone = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    ckpt = _finetune(task_csv, backbone, tmp_path / "ft", "--layer", layer, "--pool", pool)
    head = torch.load(ckpt, map_location="cpu", weights_only=True)["hyper_parameters"]["config"][
        "head"
    ]
    if layer != "all":
        assert head["layer"] == (None if layer == "final" else int(layer))
        assert head["pool"] == pool
    folder = tmp_path / "export"
    _invoke("export", "--checkpoint", ckpt, "--out", folder)
    config = json.loads((folder / "config.json").read_text())
    assert config["classifier_layer"] == head["layer"]
    assert config["classifier_pool"] == head["pool"]
    assert config["classifier_max_length"] == head["max_length"]

    sequences, seqs = _sequences(task_csv, tmp_path)
    expected = _predict_csv(ckpt, sequences, tmp_path / "pred.csv")
    from_folder = _predict_csv(folder, sequences, tmp_path / "pred_folder.csv")
    classes = list(config["id2label"].values())
    want = np.array([[float(r[f"prob_{c}"]) for c in classes] for r in expected])
    got = np.array([[float(r[f"prob_{c}"]) for c in classes] for r in from_folder])
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)

    model = transformers.AutoModelForSequenceClassification.from_pretrained(folder).eval()
    batch = transformers.AutoTokenizer.from_pretrained(folder)(
        seqs, padding=True, return_tensors="pt"
    )
    with torch.no_grad():
        probs = model(**batch).logits.softmax(-1).numpy()
    np.testing.assert_allclose(probs, want, atol=1e-5, rtol=0)

    # embed of the folder = embed of the backbone at the probe's layer and pooling
    explicit = [] if head["layer"] is None else ["--layer", str(head["layer"])]
    for target, source, args in ((tmp_path / "a.npz", folder, []),
                                 (tmp_path / "b.npz", backbone,
                                  [*explicit, "--pool", head["pool"]])):  # fmt: skip
        _invoke("embed", "-c", source, "--sequences", sequences, "--out", target, *args)
    with np.load(tmp_path / "a.npz") as a, np.load(tmp_path / "b.npz") as b:
        key = next(k for k in a.files if a[k].dtype.kind == "f")
        np.testing.assert_allclose(a[key], b[key], atol=1e-6, rtol=0)

    # an edited choice in config.json is refused in one line, not predicted with silently
    edited = json.loads((folder / "config.json").read_text())
    edited["classifier_layer"] = 1 if head["layer"] != 1 else None
    (folder / "config.json").write_text(json.dumps(edited))
    result = invoke(["predict", "-c", str(folder), "--sequences", str(sequences),
                                 "--out", str(tmp_path / "edited.csv")])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "classifier_layer" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "edited.csv").exists()
