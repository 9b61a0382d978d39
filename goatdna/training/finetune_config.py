"""`FinetuneConfig`: what one fine-tuning run needs, as dataclasses (no torch; the CLI checks it).

A run directory's ``config.yaml`` holds these sections fully spelled out plus what was resolved
from the inputs (``model``: the backbone's `ModelConfig`; ``head``: task type, classes, label
scaling; ``inputs``: sha256 of every input file), so a ``--resume`` that would learn something
else is refused by name, exactly as for ``goatdna train``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from goatdna.adapters import (
    ADAPTER_MODES,
    ADAPTER_TARGETS,
    LORA_ALPHA,
    LORA_DROPOUT,
    LORA_RANK,
    split_targets,
)

PROBE_POOLS = ("mean", "last")
FINAL_LAYER = "final"


def spec_items(spec: int | str) -> list[str]:
    """The comma-separated items of a ``--layer``/``--pool`` value."""
    return [item.strip() for item in str(spec).split(",") if item.strip()]


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
    bed_label_column: int = 4
    """1-based BED column holding the label (4: the name column)."""
    task: Literal["auto", "classification", "regression"] = "auto"
    """``auto``: regression when every label is a number and some is not whole, or all are
    whole numbers nearly all distinct (`goatdna.data_prep.tables.infer_task`)."""
    val_fraction: float = 0.1
    max_length: int = 1024
    """Longer sequences keep their first ``max_length`` bases (counted in summary.json)."""

    def __post_init__(self) -> None:
        if not 0.0 < self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in (0, 1), got {self.val_fraction}")
        if self.max_length < 1:
            raise ValueError(f"max_length must be >= 1, got {self.max_length}")
        if self.bed_label_column < 4:
            raise ValueError("bed_label_column must be >= 4 (columns 1-3 are chrom, start, end)")


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
    dropout: float = 0.1
    lora_rank: int = LORA_RANK
    """LoRA's rank ``r`` (peft's default); ``mode: lora`` only."""
    lora_alpha: int = LORA_ALPHA
    """LoRA's scale numerator (updates are scaled by alpha / rank; peft's default)."""
    lora_dropout: float = LORA_DROPOUT
    """Dropout on the LoRA branch's input (peft's default)."""
    lora_targets: str = ",".join(ADAPTER_TARGETS)
    """Comma-separated module names that get adapters (``mode: lora`` and ``ia3``)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.lora_rank < 1:
            raise ValueError(f"lora_rank (--lora-rank) must be >= 1, got {self.lora_rank}")
        if not (math.isfinite(self.lora_alpha) and self.lora_alpha > 0):
            raise ValueError(f"lora_alpha (--lora-alpha) must be > 0, got {self.lora_alpha}")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise ValueError(
                f"lora_dropout (--lora-dropout) must be in [0, 1), got {self.lora_dropout}"
            )
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

    head_lr: float = 1e-3
    backbone_lr: float = 1e-4
    weight_decay: float = 0.01
    warmup_fraction: float = 0.1
    grad_clip: float = 1.0

    def __post_init__(self) -> None:
        for name, flag in (("head_lr", "--lr"), ("backbone_lr", "--backbone-lr")):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):  # nan and inf pass a plain "> 0"
                raise ValueError(f"{name} ({flag}) must be a finite number > 0, got {value}")
        if not 0.0 <= self.warmup_fraction < 1.0:
            raise ValueError(f"warmup_fraction must be in [0, 1), got {self.warmup_fraction}")


@dataclass
class FinetuneTrainerConfig:
    """Epochs, batch sizes and where Fabric runs (the device keys may change on --resume)."""

    epochs: int = 5
    batch_size: int = 32
    """Sequences per optimizer step over all devices (each device takes its share)."""
    eval_batch_size: int = 64
    log_every: int = 10
    precision: Literal["auto", "32-true", "bf16-mixed", "16-mixed", "bf16-true"] = "auto"
    accelerator: Literal["auto", "cpu", "gpu", "cuda", "mps"] = "auto"
    devices: int | str = 1
    num_nodes: int = 1
    strategy: Literal["auto", "ddp"] = "auto"
    progress_bar: bool = True

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "eval_batch_size", "log_every", "num_nodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


@dataclass
class FinetuneConfig:
    task: TaskConfig = field(default_factory=TaskConfig)
    backbone: BackboneConfig = field(default_factory=BackboneConfig)
    optim: FinetuneOptimConfig = field(default_factory=FinetuneOptimConfig)
    trainer: FinetuneTrainerConfig = field(default_factory=FinetuneTrainerConfig)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.seed < 0:  # numpy's generators take no negative seed
            raise ValueError(f"seed (--seed) must be >= 0, got {self.seed}")
