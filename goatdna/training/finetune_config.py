"""`FinetuneConfig`: what one fine-tuning run needs, as dataclasses (no torch; the CLI checks it).

A run directory's ``config.yaml`` holds these sections fully spelled out plus what was resolved
from the inputs (``model``: the backbone's `ModelConfig`; ``head``: task type, classes, label
scaling; ``inputs``: sha256 of every input file), so a ``--resume`` that would learn something
else is refused by name, exactly as for ``goatdna train``.

`FINETUNE_FLAGS` are `goatdna finetune`'s flags, one per config key they set (the command's
signature is built from them, `load_finetune_config` merges them); numeric fields declare their
bounds (`goatdna.configfile.bounded`), which the fields' checks and the CLI's ranges both read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from goatdna.adapters import (
    ADAPTER_MODES,
    ADAPTER_TARGETS,
    LORA_ALPHA,
    LORA_DROPOUT,
    LORA_RANK,
    split_targets,
)
from goatdna.configfile import (
    COUNT,
    FRACTION,
    MAX_INT,
    OPEN_FRACTION,
    POSITIVE,
    SEED,
    Bounds,
    ConfigFlag,
    bounded,
    check_bounds,
    comma_list,
    config_with_flags,
    load_yaml,
    to_dict,
)
from goatdna.errors import GoatDNAError
from goatdna.training.config import (
    ACCELERATOR_FLAG,
    DEVICES_FLAG,
    NUM_NODES_FLAG,
    resumed_config,
)

if TYPE_CHECKING:
    from goatdna.runtime import Runtime

PROBE_POOLS = ("mean", "last")
FINAL_LAYER = "final"


def spec_items(spec: int | str) -> list[str]:
    """The comma-separated items of a ``--layer``/``--pool`` value."""
    return comma_list(str(spec))


def check_layer_spec(spec: int | str) -> None:
    """Syntax of ``--layer`` (its depth is checked against the backbone, `probe.probe_choices`)."""
    items = spec_items(spec)
    if not items:
        raise ValueError("layer must name a layer (a block number, final or all)")
    for item in items:
        if item not in (FINAL_LAYER, "all") and not (item.isdigit() and int(item) >= 1):
            raise ValueError(f"layer {item!r}: use a block number >= 1, final or all")


def check_pool_spec(spec: str) -> None:
    items = spec_items(spec)
    if not items or any(p not in PROBE_POOLS for p in items):
        raise ValueError(f"pool {spec!r}: use one or more of {', '.join(PROBE_POOLS)}")


@dataclass
class TaskConfig:
    """The labelled sequences: files, columns, task type, hold-out and length cap."""

    train: str = ""
    """CSV/TSV/Parquet (``sequence``, ``label`` columns) or BED (with ``fasta``)."""
    val: str | None = None
    """Validation file; None: hold out ``val_fraction`` of train (fixed by ``seed``)."""
    test: str | None = None
    fasta: str | None = None
    """Reference FASTA for BED inputs."""
    sequence_column: str = "sequence"
    label_column: str = "label"
    bed_label_column: int = bounded(4, Bounds(4, MAX_INT, note="columns 1-3 are chrom, start, end"))
    """1-based BED column holding the label (4: the name column)."""
    task: Literal["auto", "classification", "regression"] = "auto"
    """``auto``: regression when every label is a number and some is not whole, or all are
    whole numbers nearly all distinct (`goatdna.data_prep.tables.infer_task`)."""
    val_fraction: float = bounded(0.1, OPEN_FRACTION)
    max_length: int = bounded(1024, COUNT)
    """Longer sequences keep their first ``max_length`` bases (counted in summary.json)."""

    def __post_init__(self) -> None:
        check_bounds(self)


@dataclass
class BackboneConfig:
    """Which pretrained model and how it is used."""

    checkpoint: str = ""
    mode: Literal["full", "probe", "lora", "ia3"] = "full"
    """``full``: train backbone and head; ``probe``: frozen backbone, cached embeddings;
    ``lora``/``ia3``: frozen backbone with peft adapters on ``lora_targets``, trained with the
    head (the checkpoint holds only those, `goatdna.adapters`)."""
    layer: int | str = "final"
    """Probe input: a 1-based block number, ``final`` (the final norm's output), a list
    (``1,3,final``) or ``all`` (every block and final); several sweep (``mode: probe``)."""
    pool: str = "mean"
    """``mean`` | ``last``, or a list (``mean,last``) to sweep (``mode: probe``)."""
    rc_augment: bool = False
    """Train on either strand (drawn per epoch and row from the seed)."""
    rc_average: bool = False
    """Evaluate and predict with the mean of both strands' outputs."""
    dropout: float = bounded(0.1, FRACTION)
    lora_rank: int = bounded(LORA_RANK, COUNT)
    """LoRA's rank ``r`` (peft's default); ``mode: lora`` only."""
    lora_alpha: int = bounded(LORA_ALPHA, COUNT)
    """LoRA's scale numerator (updates are scaled by alpha / rank; peft's default)."""
    lora_dropout: float = bounded(LORA_DROPOUT, FRACTION)
    """Dropout on the LoRA branch's input (peft's default)."""
    lora_targets: str = ",".join(ADAPTER_TARGETS)
    """Comma-separated module names that get adapters (``mode: lora`` and ``ia3``)."""

    def __post_init__(self) -> None:
        check_bounds(self)
        if not split_targets(self.lora_targets):
            raise ValueError("lora_targets (--lora-targets) must name at least one module")
        defaults = {"lora_rank": LORA_RANK, "lora_alpha": LORA_ALPHA, "lora_dropout": LORA_DROPOUT}
        changed = [k for k, v in defaults.items() if getattr(self, k) != v]
        if self.mode != "lora" and changed:
            raise ValueError(f"{', '.join(changed)} apply to mode lora only (mode is {self.mode})")
        if self.mode not in ADAPTER_MODES and split_targets(self.lora_targets) != ADAPTER_TARGETS:
            raise ValueError(f"lora_targets applies to modes lora and ia3 (mode is {self.mode})")
        check_layer_spec(self.layer)
        check_pool_spec(self.pool)
        if self.mode != "probe" and (str(self.layer) != "final" or "," in self.pool):
            raise ValueError(
                f"layer and pool lists, and layers other than final, need mode probe ({self.mode} "
                "fine-tuning trains through the whole backbone and reads its final norm)"
            )

    @property
    def adapters(self) -> bool:
        """Whether this mode trains peft adapters (`goatdna.adapters.ADAPTER_MODES`)."""
        return self.mode in ADAPTER_MODES


@dataclass
class FinetuneOptimConfig:
    """AdamW with separate head and backbone learning rates; linear warmup, cosine to zero."""

    head_lr: float = bounded(1e-3, POSITIVE)
    backbone_lr: float = bounded(1e-4, POSITIVE)
    weight_decay: float = 0.01
    warmup_fraction: float = bounded(0.1, FRACTION)
    grad_clip: float = 1.0

    def __post_init__(self) -> None:
        check_bounds(self)


@dataclass
class FinetuneTrainerConfig:
    """Epochs, batch sizes and where Fabric runs (the device keys may change on --resume)."""

    epochs: int = bounded(5, COUNT)
    batch_size: int = bounded(32, COUNT)
    """Sequences per optimizer step over all devices (each device takes its share)."""
    eval_batch_size: int = bounded(64, COUNT)
    log_every: int = bounded(10, COUNT)
    precision: Literal["auto", "32-true", "bf16-mixed", "16-mixed", "bf16-true"] = "auto"
    accelerator: Literal["auto", "cpu", "gpu", "cuda", "mps"] = "auto"
    devices: int | str = 1
    num_nodes: int = bounded(1, COUNT)
    strategy: Literal["auto", "ddp"] = "auto"
    progress_bar: bool = True

    def __post_init__(self) -> None:
        check_bounds(self)


@dataclass
class FinetuneConfig:
    task: TaskConfig = field(default_factory=TaskConfig)
    backbone: BackboneConfig = field(default_factory=BackboneConfig)
    optim: FinetuneOptimConfig = field(default_factory=FinetuneOptimConfig)
    trainer: FinetuneTrainerConfig = field(default_factory=FinetuneTrainerConfig)
    seed: int = bounded(0, SEED)  # numpy's generators take no negative seed

    def __post_init__(self) -> None:
        check_bounds(self)


FINETUNE_SECTIONS = ("task", "backbone", "optim", "trainer", "seed")
"""The sections of a run's config.yaml that are `FinetuneConfig` (the rest is resolved from the
inputs: ``model``, ``head``, ``inputs``)."""

FINETUNE_FLAGS: tuple[ConfigFlag, ...] = (
    ConfigFlag(
        "checkpoint", "backbone.checkpoint", "Pretrained backbone: a `goatdna train` .ckpt."
    ),
    ConfigFlag(
        "train",
        "task.train",
        "Training table: CSV/TSV/Parquet with sequence,label (or BED + --fasta).",
    ),
    ConfigFlag(
        "val", "task.val", "Validation table (default: hold out --val-fraction of --train)."
    ),
    ConfigFlag("test", "task.test", "Test table, evaluated with the best checkpoint."),
    ConfigFlag("fasta", "task.fasta", "Reference FASTA for BED inputs."),
    ConfigFlag(
        "bed_label_column",
        "task.bed_label_column",
        "1-based BED column with the label",
        names_key=True,
    ),
    ConfigFlag("sequence_column", "task.sequence_column", "Column", names_key=True),
    ConfigFlag("label_column", "task.label_column", "Column", names_key=True),
    ConfigFlag("task", "task.task", "auto | classification | regression (auto: from the labels)."),
    ConfigFlag(
        "mode",
        "backbone.mode",
        "full (train everything) | probe (frozen backbone, cached embeddings) | lora | ia3 (frozen "
        "backbone + peft adapters on --lora-targets, trained with the head; the checkpoint holds "
        "only those; needs `pip install 'goatdna[lora]'`).",
    ),
    ConfigFlag("lora_rank", "backbone.lora_rank", "LoRA rank r", names_key=True),
    ConfigFlag(
        "lora_alpha",
        "backbone.lora_alpha",
        "LoRA alpha (updates scaled by alpha/rank)",
        names_key=True,
    ),
    ConfigFlag(
        "lora_dropout",
        "backbone.lora_dropout",
        "Dropout on the LoRA branch's input",
        names_key=True,
    ),
    ConfigFlag(
        "lora_targets",
        "backbone.lora_targets",
        "Comma-separated module names that get adapters (--mode lora/ia3)",
        names_key=True,
    ),
    ConfigFlag(
        "layer",
        "backbone.layer",
        "Probe input: block number (1-based), final (the final norm's output), a list (1,3,final) "
        "or all; several sweep with --mode probe, the best on validation is kept",
        names_key=True,
    ),
    ConfigFlag(
        "pool",
        "backbone.pool",
        "mean | last (hidden state of the last base), or a list (mean,last) to sweep with --mode "
        "probe.",
    ),
    ConfigFlag("rc_augment", "backbone.rc_augment", "Train on random strands."),
    ConfigFlag(
        "rc_average", "backbone.rc_average", "Evaluate/predict with the mean of both strands."
    ),
    ConfigFlag("epochs", "trainer.epochs", "Epochs", names_key=True),
    ConfigFlag("lr", "optim.head_lr", "Head learning rate", names_key=True),
    ConfigFlag(
        "backbone_lr",
        "optim.backbone_lr",
        "Backbone learning rate (full), adapter learning rate (lora/ia3)",
        names_key=True,
    ),
    ConfigFlag(
        "batch_size", "trainer.batch_size", "Sequences per step over all devices", names_key=True
    ),
    ConfigFlag(
        "max_length",
        "task.max_length",
        "Keep the first N bases of longer sequences",
        names_key=True,
    ),
    ConfigFlag(
        "val_fraction",
        "task.val_fraction",
        "Held out of --train when --val is absent",
        names_key=True,
    ),
    ConfigFlag("seed", "seed", "Random seed", names_key=True),
    DEVICES_FLAG,
    ACCELERATOR_FLAG,
    ConfigFlag("strategy", "trainer.strategy", "auto | ddp."),
    NUM_NODES_FLAG,
    ConfigFlag("precision", "trainer.precision"),
    ConfigFlag("progress", "trainer.progress_bar"),
)
"""`goatdna finetune`'s flags, in --help order (None help: the shared one)."""


def load_finetune_config(
    run_dir: Path, *, resume: bool, overrides: Sequence[str], flags: Mapping[str, object]
) -> FinetuneConfig:
    """The run's config: the defaults (a resumed run: its config.yaml's sections), ``--set``
    items, then the flags given; checked before any work (--train; the devices are parsed
    once, by `finetune_runtime`)."""
    stored = resumed_config(run_dir, resume)
    if stored is None:
        base = to_dict(FinetuneConfig())
    else:
        saved = load_yaml(stored)
        base = {k: saved[k] for k in FINETUNE_SECTIONS if k in saved}
    config = config_with_flags(FinetuneConfig, base, FINETUNE_FLAGS, flags, overrides)
    if not config.task.train:
        raise GoatDNAError("--train is required (a CSV/TSV/Parquet file with sequence,label)")
    return config


def finetune_runtime(config: FinetuneConfig, flags: Mapping[str, object] | None = None) -> Runtime:
    """The run's one `Runtime`: ``trainer.devices`` is parsed here, once, and the run reads the
    parsed value from it (as `preflight.check_before_training` does for `train`). The command
    builds it before any work, so a bad ``--devices`` is one line before the run folder is
    touched; its message quotes the flag as typed (``flags["devices"]``), else the config's."""
    from goatdna.runtime import Runtime, resolve_precision

    trainer = config.trainer
    typed = (flags or {}).get("devices")
    devices = typed if isinstance(typed, str) else trainer.devices
    precision = resolve_precision(trainer.precision, trainer.accelerator)
    return Runtime.from_options(trainer.accelerator, devices, trainer.num_nodes, precision)
