"""Training checkpoints: what `goatdna train` and `goatdna finetune` write to
checkpoints/{last,best}.ckpt, and what --resume reads back.

The checkpoint contract of `goatdna.checkpoint` (``state_dict``, ``hyper_parameters``, which
every command loads a model from) plus the optimizer, the LR schedule, the loop's `TrainState`
and the optimizer step, saved and restored through Fabric. It lives beside the loop that writes
it, not in the shared `goatdna.checkpoint` (which reads models and imports no training code); the
file is still unpickled only by `goatdna.checkpoint.read_torch_file` and Fabric.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goatdna.atomic import atomic_path
from goatdna.checkpoint import read_torch_file

if TYPE_CHECKING:
    import torch
    from lightning_fabric import Fabric

TRAINING_FORMAT = "goatdna-fabric-1"
"""``format`` of a training checkpoint."""

RESUME_KEYS = ("state_dict", "optimizer", "scheduler", "loop", "global_step")
"""What a training checkpoint holds for --resume (besides ``format`` and ``hyper_parameters``)."""


@dataclasses.dataclass
class TrainState:
    """A training loop's own bookkeeping across steps and sessions (``ckpt["loop"]``).

    Pretraining and fine-tuning keep the same fields: the best value of the metric that selects
    best.ckpt (pretraining: the validation loss; fine-tuning: MCC or MSE) and its step, the
    latest logged training loss, the latest validation numbers (``"loss"`` and any metrics) and
    the wall seconds of the sessions before this one. Fabric saves and restores it through
    `state_dict`/`load_state_dict` like the optimizer.
    """

    best_value: float = math.nan
    best_step: int = -1
    last_train_loss: float = math.nan
    last_val: dict[str, float] = dataclasses.field(default_factory=dict)
    elapsed_seconds: float = 0.0
    evals_since_best: int = 0  # validations in a row without a new best (early stopping)
    stopped_step: int = -1  # the step early stopping ended the run at; -1: it ran to the end

    def state_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        loaded = TrainState.from_state_dict(state)
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(loaded, field.name))

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> TrainState:
        """The state a checkpoint holds (plain types: ``weights_only`` loading reads it)."""
        return cls(
            best_value=float(state["best_value"]),
            best_step=int(state["best_step"]),
            last_train_loss=float(state["last_train_loss"]),
            last_val={str(k): float(v) for k, v in dict(state["last_val"]).items()},
            elapsed_seconds=float(state["elapsed_seconds"]),
            # absent from checkpoints written before early stopping existed
            evals_since_best=int(state.get("evals_since_best", 0)),
            stopped_step=int(state.get("stopped_step", -1)),
        )


def save_training_checkpoint(
    fabric: Fabric,
    path: Path,
    step: int,
    objects: Mapping[str, object],
    hyper_parameters: dict[str, Any],
) -> None:
    """`fabric.save` of ``objects`` (the wrapped module as ``state_dict``, ``optimizer``,
    ``scheduler``, ``loop``) at optimizer ``step``: every rank takes part (FSDP gathers a full
    state dict), global rank 0 writes it through a temporary name renamed once complete. A full
    disk raises `goatdna.atomic.DiskFullError` and leaves the previous file as it was."""
    full = {**objects, "format": TRAINING_FORMAT, "hyper_parameters": hyper_parameters,
            "global_step": step}  # fmt: skip
    with atomic_path(path) if fabric.is_global_zero else contextlib.nullcontext(path) as tmp:
        fabric.save(tmp, full)


def load_training_checkpoint(fabric: Fabric, path: Path, objects: Mapping[str, object]) -> int:
    """Restore ``objects`` (as passed to `save_training_checkpoint`) in place from ``path``;
    returns the optimizer step it holds. Call `training_checkpoint_problem` first.

    A `TrainState` is restored here rather than by Fabric: Fabric rebuilds dataclasses while
    unwrapping what it is given, so it would load a copy and leave the loop's own object as
    it was."""
    states = {k: v for k, v in objects.items() if isinstance(v, TrainState)}
    others = {k: v for k, v in objects.items() if k not in states}
    remainder = fabric.load(path, others, weights_only=True)
    for key, state in states.items():
        state.load_state_dict(remainder[key])
    return int(remainder["global_step"])


def training_checkpoint_bytes(trained: Iterable[torch.Tensor] | int) -> int:
    """About the size of one training checkpoint: the trained weights and AdamW's two moments
    (kept in the weights' dtype; float32 unless given tensors say otherwise)."""
    if isinstance(trained, int):
        return 3 * 4 * trained
    return 3 * sum(p.numel() * p.element_size() for p in trained)


def training_checkpoint_problem(path: Path) -> str | None:
    """Why ``path`` cannot be resumed from (truncated, bit-flipped, not a checkpoint), or None.

    The zip container's CRC-32 of every record is checked (torch itself does not), so a flipped
    bit anywhere in the weights or optimizer state is found; then the pickle is read (weights
    memory-mapped, not loaded) and the keys a resume needs are looked up.
    """
    return _resumable(path)[0]


def training_checkpoint_step(path: Path) -> int | None:
    """The optimizer step a resumable checkpoint holds (None if it cannot be resumed from)."""
    problem, ckpt = _resumable(path)
    return None if problem is not None else int(ckpt["global_step"])


def _resumable(path: Path) -> tuple[str | None, Mapping[str, Any]]:
    """`training_checkpoint_problem`'s reason (None: none) and what the one read found."""
    try:
        if path.stat().st_size == 0:
            return "it is empty (0 bytes)", {}
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
        if bad is not None:
            return f"record {bad} fails its CRC-32 check (corrupted bytes)", {}
        ckpt = read_torch_file(path, mmap=True)
    except zipfile.BadZipFile:
        return "it is not a complete checkpoint archive (truncated, or another kind of file)", {}
    except Exception as err:  # any unreadable file becomes the reason (the caller names it)
        first = str(err).splitlines()[0] if str(err) else ""
        return f"it cannot be read ({err.__class__.__name__}: {first[:120]})", {}
    if not isinstance(ckpt, dict):
        return "it does not hold a checkpoint dictionary", {}
    missing = [k for k in RESUME_KEYS if k not in ckpt]
    if missing:
        return f"it lacks {', '.join(missing)} (not written by `goatdna train`?)", {}
    return None, ckpt
