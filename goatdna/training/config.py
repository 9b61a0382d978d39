"""`RunConfig`: everything one training run needs, as dataclasses loaded strictly from YAML.

A config file has the sections ``model:`` (`ModelConfig`), ``data:``, ``optim:``, ``trainer:`` and
``seed:``. Loading goes through `goatdna.configfile`, so an unknown key or a wrong type is an error
that names the key (a silently ignored typo costs a GPU-day). ``--set section.key=value``
overrides use the same paths. This module imports no torch: the CLI validates configs instantly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from goatdna.configfile import (
    COUNT,
    COUNT_OR_ZERO,
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    Bounds,
    ConfigFlag,
    ConfigKeyError,
    bounded,
    check_bounds,
    config_with_flags,
    from_dict,
    load_yaml,
)
from goatdna.errors import GoatDNAError
from goatdna.model.config import ModelConfig

PROVENANCE_KEYS = ("data_manifest_sha256", "goatdna_version", "cpu_threads")
"""Keys a run directory's config.yaml adds next to the sections; dropped again when it is re-read.
``cpu_threads``: torch's CPU thread count when the run started (`RunDir.resume_cpu_threads`)."""

Precision = Literal["auto", "32-true", "bf16-mixed", "16-mixed", "bf16-true"]
Strategy = Literal["auto", "ddp", "fsdp"]


@dataclass
class DataConfig:
    """Training windows and validation tiling over a prepared shard directory."""

    seq_len: int = bounded(1024, POSITIVE)
    """Tokens the model sees per sequence; windows hold seq_len + 1 bases (inputs + shifted targets).
    Also the model's ``train_length`` (the GOAT prior scales its features by it): set here only."""
    micro_batch_size: int = bounded(8, POSITIVE)
    """Sequences per device per forward/backward pass."""
    max_n_fraction: float = bounded(0.0, FRACTION)
    """Largest fraction of N bases a training or validation window may hold (0: none)."""
    rc_prob: float = bounded(0.5, Bounds(0, 1))
    """Probability that a training window is reverse-complemented (A<->T, C<->G, N->N)."""
    val_max_windows: int = bounded(2048, POSITIVE)
    """Cap on validation windows (an evenly spaced subset of the held-out windows of val.bin)."""
    val_batch_size: int = bounded(16, POSITIVE)
    num_workers: int = bounded(2, COUNT_OR_ZERO)
    """DataLoader worker processes per device (0: load in the training process)."""
    verify: bool = True
    """Re-hash every shard record against the manifest before training starts."""
    source_weights: dict[str, float] | None = None
    """Share of training windows drawn from each FASTA source of a multi-source dataset (e.g.
    ``{human: 0.7, mouse: 0.3}``, normalised; 0 leaves a source out). None: every valid window
    equally likely, so sources count in proportion to their windows."""

    def __post_init__(self) -> None:
        check_bounds(self)
        if self.source_weights is not None:
            _check_weights(self.source_weights)


@dataclass
class OptimConfig:
    """AdamW with linear warmup then cosine decay to ``lr * min_lr_ratio``."""

    lr: float = bounded(6e-4, POSITIVE)
    min_lr_ratio: float = bounded(0.1, Bounds(0, 1))
    """Floor of the cosine decay as a fraction of ``lr`` (reached at trainer.max_steps)."""
    warmup_steps: int = bounded(1000, COUNT_OR_ZERO)
    weight_decay: float = bounded(0.1, NON_NEGATIVE)
    """Applied to weight matrices only: never to norms, embeddings or GOAT prior parameters
    (unless ``decay_all``)."""
    decay_all: bool = False
    """Decay every parameter (norms, biases, embeddings, the GOAT prior) in one group, as
    ``torch.optim.AdamW(model.parameters(), weight_decay=...)`` does: the paper's genome.py
    recipe (configs/*-paper-dna.yaml). Off, the default split keeps positions and rare tokens
    from being pulled to zero (`training.module.parameter_groups`)."""
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = bounded(1e-8, NON_NEGATIVE)  # torch.optim.AdamW refuses a negative eps
    grad_clip: float = bounded(1.0, NON_NEGATIVE)
    """Global gradient-norm clip (0 disables it)."""
    prior_lr_scale: float = bounded(1.0, POSITIVE)
    """Multiplies ``lr`` for the GOAT prior's parameters (their own AdamW group when != 1)."""

    def __post_init__(self) -> None:
        check_bounds(self)
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas}")


@dataclass
class TrainerConfig:
    """How the loop runs: length, accumulation, devices, precision (Fabric), cadence of I/O."""

    max_steps: int = bounded(1000, COUNT)
    """Optimizer steps; the cosine schedule ends here."""
    accumulate: int = bounded(1, COUNT)
    """Micro-batches per optimizer step (global batch = micro_batch_size * accumulate * world size)."""
    precision: Precision = "auto"
    """``auto``: bf16-mixed on a GPU that supports it, 32-true on CPU."""
    accelerator: Literal["auto", "cpu", "gpu", "cuda", "mps"] = "auto"
    devices: int | str = "auto"
    num_nodes: int = bounded(1, COUNT)
    strategy: Strategy = "auto"
    compile: bool = False
    """Wrap the model in torch.compile for training and validation (opt-in)."""
    eval_every: int = bounded(500, COUNT)
    """Validate every this many optimizer steps, and always at the last step."""
    ckpt_every: int = bounded(500, COUNT)
    """Write checkpoints/last.ckpt every this many optimizer steps, and always at the end."""
    log_every: int = bounded(10, COUNT)
    """Write a metrics.csv row (train loss, LR, tokens/s) every this many optimizer steps."""
    throughput_warmup: int = bounded(10, COUNT_OR_ZERO)
    """Optimizer steps excluded from the tokens/s and MFU average (compilation, allocator warm-up)."""
    peak_flops: float | None = None
    """Peak FLOP/s per device for MFU; None: the GPU table, or a measured matmul rate on CPU."""
    tensorboard: bool = True
    """Also log to TensorBoard (run_dir/tensorboard) when the package is installed."""
    progress_bar: bool = True
    early_stop_evals: int | None = None
    """Stop after this many validations in a row without a new best validation loss (last.ckpt is
    written there, best.ckpt keeps the best); None: run to max_steps. The LR schedule still
    spans max_steps."""

    def __post_init__(self) -> None:
        check_bounds(self)
        if self.early_stop_evals is not None and self.early_stop_evals < 1:
            raise ValueError(f"early_stop_evals must be >= 1 or null, got {self.early_stop_evals}")
        if self.peak_flops is not None and self.peak_flops <= 0:
            raise ValueError(f"peak_flops must be > 0, got {self.peak_flops}")
        if isinstance(self.devices, int) and self.devices < 1 and self.devices != -1:
            raise ValueError(f"devices must be >= 1 (or -1 for all), got {self.devices}")


@dataclass
class RunConfig:
    """One training run: model shape, data, optimizer, trainer and the seed of everything random."""

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    seed: int = 1234

    def __post_init__(self) -> None:
        self.model.train_length = self.data.seq_len  # derived: data.seq_len is the one source

    @property
    def tokens_per_micro_batch(self) -> int:
        """Model input tokens in one device's micro-batch."""
        return self.data.micro_batch_size * self.data.seq_len


def _check_weights(weights: dict[str, float]) -> None:
    for name, weight in weights.items():
        ok = isinstance(weight, (int, float)) and not isinstance(weight, bool)
        if not isinstance(name, str) or not name or not ok or not 0 <= weight < float("inf"):
            raise ValueError(
                f"source_weights: {name!r}: {weight!r} is not a finite number >= 0 for a source name"
            )
    if not any(w > 0 for w in weights.values()):
        raise ValueError("source_weights: at least one source needs a weight > 0")


def run_config_from_dict(data: dict[str, Any], source: str = "config") -> RunConfig:
    """Strict dict -> RunConfig; provenance keys written into a run's config.yaml are ignored."""
    data = {k: v for k, v in data.items() if k not in PROVENANCE_KEYS}
    model, section = data.get("model"), data.get("data")
    seq_len = section.get("seq_len", DataConfig.seq_len) if isinstance(section, dict) else None
    length = model.get("train_length", seq_len) if isinstance(model, dict) else seq_len
    if isinstance(seq_len, int) and isinstance(length, int) and length != seq_len:
        raise ConfigKeyError(
            "model.train_length",
            f"{source}: model.train_length ({length}) differs from data.seq_len "
            f"({seq_len}); data.seq_len sets both: drop model.train_length (or make them equal)",
        )
    try:
        return from_dict(RunConfig, data)
    except ConfigKeyError as err:
        wrapped = ConfigKeyError(err.key, f"{source}: {err.detail}")
        wrapped.detail = err.detail
        raise wrapped from None


# Where every run's options come from, shared by `train` and `finetune`: the device flags.
ACCELERATOR_FLAG = ConfigFlag(
    "accelerator",
    "trainer.accelerator",
    "auto | cpu | cuda (gpu) | mps (default: trainer.accelerator, normally auto).",
)
DEVICES_FLAG = ConfigFlag(
    "devices",
    "trainer.devices",
    "Devices per node: a count, -1 for all, 'auto', or ids like 0,1 (default: trainer.devices).",
)
NUM_NODES_FLAG = ConfigFlag(
    "num_nodes", "trainer.num_nodes", "Nodes (torchrun/SLURM; default: trainer.num_nodes)."
)

TRAIN_FLAGS: tuple[ConfigFlag, ...] = (
    ConfigFlag("max_steps", "trainer.max_steps", "Override trainer.max_steps."),
    DEVICES_FLAG,
    ConfigFlag("strategy", "trainer.strategy"),
    ConfigFlag("precision", "trainer.precision"),
    NUM_NODES_FLAG,
    ACCELERATOR_FLAG,
)
"""`goatdna train`'s flags that set config keys, in --help order (None help: the shared one)."""


def resumed_config(run_dir: str | Path, resume: bool | str) -> Path | None:
    """The one resume rule of `train` and `finetune`: a ``--resume`` (``auto`` too) reads its
    options from the run directory's config.yaml when there is one; a new run has none."""
    stored = Path(run_dir) / "config.yaml"
    return stored if resume and stored.is_file() else None


def load_run_config(
    path: str | Path,
    overrides: list[str] | None = None,
    flags: Mapping[str, object] | None = None,
) -> RunConfig:
    """Read a YAML config (or a run directory's config.yaml), apply ``key=value`` overrides and
    the values of `TRAIN_FLAGS` given (``flags``: by name; None: not given)."""
    raw = load_yaml(path)
    if not isinstance(raw.get("model"), dict):
        raise GoatDNAError(
            f"{path}: no `model:` section; a run config needs one (see configs/goat-tiny.yaml), "
            "so that an empty or wrong file never trains the default 125M model"
        )
    return config_with_flags(
        RunConfig,
        raw,
        TRAIN_FLAGS,
        flags or {},
        list(overrides or []),
        build=lambda data: run_config_from_dict(data, source=str(path)),
    )


def train_config(
    config: Path | None,
    run_dir: Path,
    *,
    resume: bool | str,
    overrides: list[str],
    flags: Mapping[str, object],
) -> RunConfig:
    """`goatdna train`'s run config: ``--config``, or with ``--resume`` the run's own."""
    if config is None:
        if not resume:
            raise GoatDNAError("--config is required (e.g. --config configs/goat-tiny.yaml)")
        config = resumed_config(run_dir, resume)
        if config is None:
            raise GoatDNAError(
                f"--resume: {run_dir / 'config.yaml'} not found; pass --config or check --out"
            )
    return load_run_config(config, overrides, flags)
