"""Loading trained models from Lightning checkpoints without importing the training code.

A top-level module beside `configfile` and `runtime`: analysis, inference, fine-tuning (its
backbone) and export all load models through it, and none of them may import another (DESIGN.md).
Everyone reads checkpoints through a small contract (see the common design): ``torch.load(path,
map_location=..., weights_only=True)`` works because hyper-parameters are plain types;
``ckpt["hyper_parameters"]["config"]`` is the resolved run config as a dict whose ``"model"`` entry
is a `ModelConfig`, and ``ckpt["state_dict"]`` holds ``"model." + <DNADecoder key>``. Keeping to that
contract lets `evaluate`/`generate` run on a machine that has the model but not Lightning set up,
and keeps the import direction analysis -> model.

A folder written by `goatdna export` loads here too (``config.json`` with ``model_type`` goatdna
and every `ModelConfig` field, weights in ``model.safetensors`` under the same ``"model."``
prefix), so every command that takes ``--checkpoint`` takes an export folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from goatdna.atomic import atomic_path
from goatdna.configfile import from_dict
from goatdna.errors import GoatDNAError

MODEL_PREFIX = "model."
EXPORT_CONFIG = "config.json"
EXPORT_WEIGHTS = "model.safetensors"
EXPORT_MODEL_TYPE = "goatdna"


ROPE_EXTENSIONS = ("none", "linear", "ntk")
"""`ModelConfig.rope_extension`'s values (also the choices of ``--rope-extension``)."""


def load_checkpoint(
    path: str | Path, device: str = "cpu", rope_extension: str | None = None
) -> tuple[Any, dict[str, Any]]:
    """Load a DNADecoder model (eval mode, on ``device``) and the run config dict from a checkpoint
    (a ``.ckpt`` from `goatdna train`, or a folder from `goatdna export`).

    ``rope_extension`` (``none``/``linear``/``ntk``) applies RoPE position interpolation or NTK
    scaling to a RoPE model at evaluation time, as the paper's RoPE-PI baseline does: it changes
    nothing within the training length and stretches the rotation beyond it. None keeps the
    checkpoint's own setting.
    """
    import torch

    from goatdna.model import ModelConfig

    path = Path(path)
    check_device(device)
    if path.is_dir():
        return load_export(path, device, rope_extension)
    if not path.is_file():
        raise GoatDNAError(
            f"{path}: checkpoint not found; pass a .ckpt file such as runs/goat/checkpoints/best.ckpt"
            " or a folder written by `goatdna export`"
        )
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a truncated or foreign file: say which one
        raise GoatDNAError(
            f"{path}: not a readable goatdna checkpoint ({err.__class__.__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''})"
        ) from None
    try:
        config = ckpt["hyper_parameters"]["config"]
        model_dict = config["model"]
        state = ckpt["state_dict"]
    except (KeyError, TypeError):
        raise GoatDNAError(
            f"{path}: checkpoint lacks hyper_parameters.config.model or state_dict; "
            "was it written by `goatdna train`?"
        ) from None
    model_dict = with_rope_extension(dict(model_dict), rope_extension, path)
    config = {**config, "model": model_dict}
    model_config = from_dict(ModelConfig, dict(model_dict), "model")
    if not any(k.startswith(MODEL_PREFIX) for k in state):
        raise GoatDNAError(f"{path}: state_dict has no '{MODEL_PREFIX}*' weights")
    model = _build_model(model_config, state, device, path, "the model config in the checkpoint")
    return model, dict(config)


def _build_model(
    model_config: Any, state: dict[str, Any], device: str, source: Path, describes: str
) -> Any:
    """DNADecoder with the ``"model."`` weights of ``state`` loaded strictly, eval mode, on ``device``;
    a mismatch names ``source`` and what the weights should match (``describes``)."""
    from goatdna.model import DNADecoder

    weights = {k[len(MODEL_PREFIX) :]: v for k, v in state.items() if k.startswith(MODEL_PREFIX)}
    model = DNADecoder(model_config)
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as err:
        first = str(err).splitlines()[0]
        raise GoatDNAError(f"{source}: weights do not match {describes} ({first})") from None
    model.to(device)
    model.eval()
    return model


def read_export_config(folder: str | Path) -> dict[str, Any]:
    """An export folder's config.json, checked to be a goatdna export (else a GoatDNAError)."""
    folder = Path(folder)
    config_path = folder / EXPORT_CONFIG
    if not config_path.is_file():
        raise GoatDNAError(
            f"{folder}: not a goatdna export folder (no {EXPORT_CONFIG}); pass a .ckpt file or a "
            "folder written by `goatdna export`"
        )
    try:
        data = json.loads(config_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise GoatDNAError(
            f"{config_path}: not valid JSON ({err}); re-run `goatdna export`"
        ) from None
    if not isinstance(data, dict):
        raise GoatDNAError(f"{config_path}: expected a JSON object; re-run `goatdna export`")
    model_type = data.get("model_type")
    if model_type != EXPORT_MODEL_TYPE:
        raise GoatDNAError(
            f"{config_path}: model_type is {model_type!r}, not {EXPORT_MODEL_TYPE!r}; this folder "
            "holds another kind of model (goatdna reads only folders written by `goatdna export`)"
        )
    return data


def with_rope_extension(
    model_dict: dict[str, Any], extension: str | None, source: Path
) -> dict[str, Any]:
    """``model_dict`` with ``rope_extension`` set (None: unchanged); only RoPE models take one."""
    if extension is None:
        return model_dict
    if extension not in ROPE_EXTENSIONS:
        raise GoatDNAError(
            f"--rope-extension {extension!r}: expected one of {', '.join(ROPE_EXTENSIONS)}"
        )
    positional = model_dict.get("positional")
    if positional != "rope":
        raise GoatDNAError(
            f"--rope-extension applies to RoPE models; {source} is {positional}: drop the option"
        )
    return {**model_dict, "rope_extension": extension}


def load_export(
    folder: str | Path, device: str = "cpu", rope_extension: str | None = None
) -> tuple[Any, dict[str, Any]]:
    """Load a `goatdna export` folder: (DNADecoder in eval mode on ``device``, run config dict).

    The run config is the one the model was trained with (``goatdna_run_config``), its
    ``"model"`` entry rebuilt from the folder's own ModelConfig fields.
    """
    import dataclasses

    from goatdna.model import ModelConfig

    folder = Path(folder)
    data = read_export_config(folder)
    config_path = folder / EXPORT_CONFIG
    names = [f.name for f in dataclasses.fields(ModelConfig)]
    missing = [name for name in names if name not in data]
    if missing:
        raise GoatDNAError(
            f"{config_path}: lacks model field(s) {', '.join(missing)}; re-run `goatdna export`"
        )
    model_dict = with_rope_extension({name: data[name] for name in names}, rope_extension, folder)
    model_config = from_dict(ModelConfig, dict(model_dict), EXPORT_CONFIG)
    weights_path = folder / EXPORT_WEIGHTS
    if not weights_path.is_file():
        raise GoatDNAError(f"{folder}: no {EXPORT_WEIGHTS}; re-run `goatdna export`")
    try:
        from safetensors import SafetensorError
        from safetensors.torch import load_file
    except ImportError:
        raise GoatDNAError(
            f"{weights_path}: reading export folders needs safetensors: pip install 'goatdna[hf]'"
        ) from None
    try:
        state = load_file(str(weights_path), device="cpu")
    except (SafetensorError, OSError) as err:
        raise GoatDNAError(f"{weights_path}: not a readable safetensors file ({err})") from None
    model = _build_model(
        model_config, state, device, weights_path, f"the model fields in {EXPORT_CONFIG}"
    )
    run_config = data.get("goatdna_run_config")
    config = dict(run_config) if isinstance(run_config, dict) else {}
    config["model"] = model_dict
    return model, config


def checkpoint_provenance(path: str | Path) -> dict[str, Any]:
    """What a model was trained on and for how long, for `goatdna export`'s config and card.

    From a ``.ckpt``: Lightning's ``global_step``, the data manifest hash the run recorded, the
    latest validation loss the run had computed when it saved this checkpoint, and tokens seen
    (steps x the global batch in tokens, from the run's summary.json when it is beside the
    checkpoints folder, else from the config with one device). From an export folder: the
    provenance it already carries.
    """
    import math

    import torch

    path = Path(path)
    if path.is_dir():
        return dict(read_export_config(path).get("goatdna_provenance") or {})
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    hyper = ckpt.get("hyper_parameters") or {}
    config = hyper.get("config") or {}
    steps = int(ckpt.get("global_step", 0))
    # the training loop's bookkeeping ("loop"; the older Lightning loop kept it in a callback)
    lifecycle = ckpt.get("loop") or (ckpt.get("callbacks") or {}).get("RunLifecycle") or {}
    if lifecycle.get("best_step") == steps and lifecycle.get("best_val_loss") is not None:
        val_loss, val_step = lifecycle["best_val_loss"], steps
    else:
        val_loss, val_step = lifecycle.get("last_val_loss"), None
    summary_path = path.parent.parent / "summary.json"
    batch_tokens = None
    if path.parent.name == "checkpoints" and summary_path.is_file():
        try:
            batch_tokens = json.loads(summary_path.read_text()).get("global_batch_tokens")
        except (OSError, json.JSONDecodeError):
            batch_tokens = None
    if not isinstance(batch_tokens, int):
        data, trainer = config.get("data") or {}, config.get("trainer") or {}
        try:
            batch_tokens = (
                int(data["micro_batch_size"])
                * int(data["seq_len"])
                * int(trainer.get("accumulate", 1))
            )
        except (KeyError, TypeError, ValueError):
            batch_tokens = None
    finite = isinstance(val_loss, (int, float)) and math.isfinite(val_loss)
    return {
        "source_checkpoint": path.name,
        "steps": steps,
        "tokens_seen": steps * batch_tokens if batch_tokens else None,
        "global_batch_tokens": batch_tokens,
        "data_manifest_sha256": hyper.get("data_manifest_sha256")
        or config.get("data_manifest_sha256"),
        "trained_with_goatdna": hyper.get("goatdna_version") or None,
        "train_length": train_length_of(config) if config.get("model") else None,
        "val_loss": float(val_loss) if finite else None,
        "val_bits_per_base": float(val_loss) / math.log(2) if finite else None,
        "val_step": val_step if finite else None,
    }


def check_device(device: str) -> None:
    """``device`` must name a torch device that exists here (cuda without a GPU is one line).

    The CLI picks the device with `goatdna.runtime.single_device` (``--accelerator``/
    ``--devices``); this check keeps the library's own callers to the same one-line errors.
    """
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        raise GoatDNAError(
            f"device {device!r}: not a torch device; use cpu, cuda or cuda:N"
        ) from None
    if parsed.type == "cuda":
        available = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if available == 0 or (parsed.index or 0) >= available:
            raise GoatDNAError(
                f"device {device}: no such CUDA GPU here ({available} visible); use cpu"
            )


def save_checkpoint(path: str | Path, model: Any, config: dict[str, Any]) -> Path:
    """Write ``model`` in the checkpoint contract's shape (what `load_checkpoint` reads).

    For models built or trained outside `goatdna train` (conversions, tests): ``config`` is a
    run-config dict with at least a ``"model"`` entry (``configfile.to_dict(ModelConfig)``).
    Written to a temporary name and renamed.
    """
    import torch

    path = Path(path)
    state = {MODEL_PREFIX + k: v.detach().cpu() for k, v in model.state_dict().items()}
    with atomic_path(path) as tmp:
        torch.save({"state_dict": state, "hyper_parameters": {"config": config}}, tmp)
    return path


def train_length_of(config: dict[str, Any]) -> int:
    """Training context length recorded in a run config (data.seq_len, else model.train_length)."""
    data = config.get("data") or {}
    if isinstance(data, dict) and isinstance(data.get("seq_len"), int):
        return int(data["seq_len"])
    return int(config["model"]["train_length"])


def best_checkpoint(run_dir: str | Path) -> Path:
    """A run's best-by-validation checkpoint (falls back to last.ckpt for runs without one)."""
    run_dir = Path(run_dir)
    for name in ("best.ckpt", "last.ckpt"):
        candidate = run_dir / "checkpoints" / name
        if candidate.is_file():
            return candidate
    raise GoatDNAError(
        f"{run_dir}: no checkpoints/best.ckpt or checkpoints/last.ckpt; "
        "train the run first with `goatdna train --out ...`"
    )


def read_summary(run_dir: str | Path) -> dict[str, Any]:
    """A run's summary.json (written by `goatdna train` at the end of training)."""
    path = Path(run_dir) / "summary.json"
    if not path.is_file():
        raise GoatDNAError(
            f"{path}: not found; the run has not finished (resume it with `goatdna train --resume`)"
        )
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise GoatDNAError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(data, dict):
        raise GoatDNAError(f"{path}: expected a JSON object")
    return data
