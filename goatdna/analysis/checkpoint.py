"""Loading trained models from Lightning checkpoints without importing the training code.

Analysis reads checkpoints through a small contract (see the common design): ``torch.load(path,
map_location=..., weights_only=True)`` works because hyper-parameters are plain types;
``ckpt["hyper_parameters"]["config"]`` is the resolved run config as a dict whose ``"model"`` entry
is a `ModelConfig`, and ``ckpt["state_dict"]`` holds ``"model." + <GoatDNA key>``. Keeping to that
contract lets `evaluate`/`generate` run on a machine that has the model but not Lightning set up,
and keeps the import direction analysis -> model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from goatdna.configfile import from_dict
from goatdna.errors import GoatDNAError

MODEL_PREFIX = "model."


def load_checkpoint(path: str | Path, device: str = "cpu") -> tuple[Any, dict[str, Any]]:
    """Load a GoatDNA model (eval mode, on ``device``) and the run config dict from a checkpoint."""
    import torch

    from goatdna.model import GoatDNA, ModelConfig

    path = Path(path)
    check_device(device)
    if not path.is_file():
        raise GoatDNAError(
            f"{path}: checkpoint not found; pass a .ckpt file such as runs/goat/checkpoints/best.ckpt"
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
    model_config = from_dict(ModelConfig, dict(model_dict), "model")
    model = GoatDNA(model_config)
    weights = {k[len(MODEL_PREFIX) :]: v for k, v in state.items() if k.startswith(MODEL_PREFIX)}
    if not weights:
        raise GoatDNAError(f"{path}: state_dict has no '{MODEL_PREFIX}*' weights")
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as err:
        first = str(err).splitlines()[0]
        raise GoatDNAError(
            f"{path}: weights do not match the model config in the checkpoint ({first})"
        ) from None
    model.to(device)
    model.eval()
    return model, dict(config)


def check_device(device: str) -> None:
    """--device must name a torch device that exists here (cuda without a GPU is one line)."""
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        raise GoatDNAError(
            f"--device {device!r}: not a torch device; use cpu, cuda or cuda:N"
        ) from None
    if parsed.type == "cuda":
        available = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if available == 0 or (parsed.index or 0) >= available:
            raise GoatDNAError(
                f"--device {device}: no such CUDA GPU here ({available} visible); use --device cpu"
            )


def save_checkpoint(path: str | Path, model: Any, config: dict[str, Any]) -> Path:
    """Write ``model`` in the checkpoint contract's shape (what `load_checkpoint` reads).

    For models built or trained outside `goatdna train` (conversions, tests): ``config`` is a
    run-config dict with at least a ``"model"`` entry (``configfile.to_dict(ModelConfig)``).
    Written to a temporary name and renamed.
    """
    import os

    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {MODEL_PREFIX + k: v.detach().cpu() for k, v in model.state_dict().items()}
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    torch.save({"state_dict": state, "hyper_parameters": {"config": config}}, tmp)
    os.replace(tmp, path)
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
        "train the run first with `goatdna train --run-dir ...`"
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
