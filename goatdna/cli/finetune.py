"""`goatdna finetune`: a pretrained GOAT/RoPE model + a sequence head, trained on labelled data."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from goatdna.cli.common import (
    ConfigAcceleratorOpt,
    ConfigDevicesOpt,
    ConfigNumNodesOpt,
    OverridesOpt,
    option,
    say_once,
)
from goatdna.errors import GoatDNAError
from goatdna.formats import json_text


def _config_key(key: str, text: str) -> str:
    """Help of a flag that overrides one key of the fine-tuning config (its default lives there)."""
    return f"{text} (default: config key {key})."


def finetune(
    out: Annotated[
        Path, option("out", "Run directory (config.yaml, checkpoints/, metrics.csv, summary.json).")
    ],
    checkpoint: Annotated[
        str | None, option("checkpoint", "Pretrained backbone: a `goatdna train` .ckpt.")
    ] = None,
    train: Annotated[
        str | None,
        typer.Option(
            "--train",
            help="Training table: CSV/TSV/Parquet with sequence,label (or BED + --fasta).",
        ),
    ] = None,
    val: Annotated[
        str | None,
        typer.Option(
            "--val", help="Validation table (default: hold out --val-fraction of --train)."
        ),
    ] = None,
    test: Annotated[
        str | None, typer.Option("--test", help="Test table, evaluated with the best checkpoint.")
    ] = None,
    fasta: Annotated[str | None, option("fasta", "Reference FASTA for BED inputs.")] = None,
    bed_label_column: Annotated[
        int | None,
        typer.Option(
            "--bed-label-column",
            help=_config_key("task.bed_label_column", "1-based BED column with the label"),
        ),
    ] = None,
    sequence_column: Annotated[
        str | None,
        typer.Option("--sequence-column", help=_config_key("task.sequence_column", "Column")),
    ] = None,
    label_column: Annotated[
        str | None, typer.Option("--label-column", help=_config_key("task.label_column", "Column"))
    ] = None,
    task: Annotated[
        str | None,
        typer.Option("--task", help="auto | classification | regression (auto: from the labels)."),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            help="full (train everything) | probe (frozen backbone, cached embeddings) | lora | "
            "ia3 (frozen backbone + peft adapters on --lora-targets, trained with the head; the "
            "checkpoint holds only those; needs `pip install 'goatdna[lora]'`).",
        ),
    ] = None,
    lora_rank: Annotated[
        int | None,
        typer.Option("--lora-rank", help=_config_key("backbone.lora_rank", "LoRA rank r")),
    ] = None,
    lora_alpha: Annotated[
        int | None,
        typer.Option(
            "--lora-alpha",
            help=_config_key("backbone.lora_alpha", "LoRA alpha (updates scaled by alpha/rank)"),
        ),
    ] = None,
    lora_dropout: Annotated[
        float | None,
        typer.Option(
            "--lora-dropout",
            help=_config_key("backbone.lora_dropout", "Dropout on the LoRA branch's input"),
        ),
    ] = None,
    lora_targets: Annotated[
        str | None,
        typer.Option(
            "--lora-targets",
            help=_config_key(
                "backbone.lora_targets",
                "Comma-separated module names that get adapters (--mode lora/ia3)",
            ),
        ),
    ] = None,
    layer: Annotated[
        str | None,
        typer.Option(
            "--layer",
            help="Probe input: block number (1-based), final (the final norm's output), a list "
            "(1,3,final) or all; several sweep with --mode probe, the best on validation is kept "
            "(default: config key backbone.layer).",
        ),
    ] = None,
    pool: Annotated[
        str | None,
        typer.Option(
            "--pool",
            help="mean | last (hidden state of the last base), or a list (mean,last) to sweep "
            "with --mode probe.",
        ),
    ] = None,
    rc_augment: Annotated[
        bool | None, typer.Option("--rc-augment/--no-rc-augment", help="Train on random strands.")
    ] = None,
    rc_average: Annotated[
        bool | None,
        typer.Option(
            "--rc-average/--no-rc-average", help="Evaluate/predict with the mean of both strands."
        ),
    ] = None,
    epochs: Annotated[
        int | None, typer.Option("--epochs", help=_config_key("trainer.epochs", "Epochs"))
    ] = None,
    lr: Annotated[
        float | None, typer.Option("--lr", help=_config_key("optim.head_lr", "Head learning rate"))
    ] = None,
    backbone_lr: Annotated[
        float | None,
        typer.Option(
            "--backbone-lr",
            help=_config_key(
                "optim.backbone_lr",
                "Backbone learning rate (full), adapter learning rate (lora/ia3)",
            ),
        ),
    ] = None,
    batch_size: Annotated[
        int | None,
        option(
            "batch_size",
            _config_key("trainer.batch_size", "Sequences per step over all devices"),
        ),
    ] = None,
    max_length: Annotated[
        int | None,
        typer.Option(
            "--max-length",
            help=_config_key("task.max_length", "Keep the first N bases of longer sequences"),
        ),
    ] = None,
    val_fraction: Annotated[
        float | None,
        typer.Option(
            "--val-fraction",
            help=_config_key("task.val_fraction", "Held out of --train when --val is absent"),
        ),
    ] = None,
    seed: Annotated[int | None, option("seed", _config_key("seed", "Random seed"))] = None,
    devices: ConfigDevicesOpt = None,
    accelerator: ConfigAcceleratorOpt = None,
    strategy: Annotated[str | None, option("strategy", "auto | ddp.")] = None,
    num_nodes: ConfigNumNodesOpt = None,
    precision: Annotated[str | None, option("precision")] = None,
    overrides: OverridesOpt = None,
    progress: Annotated[bool | None, option("progress")] = None,
    resume: Annotated[
        bool,
        option(
            "resume",
            "Continue OUT from checkpoints/last.ckpt (options default to its config.yaml).",
        ),
    ] = False,
    force: Annotated[
        bool, option("force", "Start over in a run directory that holds a run.")
    ] = False,
) -> None:
    """Fine-tune a pretrained model for sequence classification or regression."""
    from goatdna.configfile import apply_overrides, from_dict, load_yaml, to_dict
    from goatdna.runtime import parse_devices
    from goatdna.training.finetune_config import FinetuneConfig

    if devices is not None:  # checked before any work; a count stays a number in config.yaml
        parsed = parse_devices(devices)
        devices_value: int | str | None = parsed if isinstance(parsed, int) else devices
    else:
        devices_value = None

    flags: dict[str, Any] = {
        "task.train": train, "task.val": val, "task.test": test, "task.fasta": fasta,
        "task.bed_label_column": bed_label_column, "task.sequence_column": sequence_column,
        "task.label_column": label_column, "task.task": task, "task.max_length": max_length,
        "task.val_fraction": val_fraction, "backbone.checkpoint": checkpoint,
        "backbone.mode": mode, "backbone.layer": layer, "backbone.pool": pool, "backbone.rc_augment": rc_augment,
        "backbone.rc_average": rc_average,
        "backbone.lora_rank": lora_rank, "backbone.lora_alpha": lora_alpha,
        "backbone.lora_dropout": lora_dropout, "backbone.lora_targets": lora_targets, "optim.head_lr": lr, "optim.backbone_lr": backbone_lr,
        "trainer.epochs": epochs, "trainer.batch_size": batch_size,
        "trainer.devices": devices_value, "trainer.accelerator": accelerator,
        "trainer.strategy": strategy, "trainer.num_nodes": num_nodes,
        "trainer.precision": precision, "trainer.progress_bar": progress, "seed": seed,
    }  # fmt: skip
    sections = ("task", "backbone", "optim", "trainer", "seed")
    base = to_dict(FinetuneConfig())
    stored = out / "config.yaml"
    if resume and stored.is_file():
        saved = load_yaml(stored)
        base = {k: saved[k] for k in sections if k in saved}
    for key, value in flags.items():
        if value is not None:
            section, _, name = key.partition(".")
            if name:
                base.setdefault(section, {})[name] = value
            else:
                base[section] = value
    base = apply_overrides(base, list(overrides or []))
    config = from_dict(FinetuneConfig, base)
    if not config.task.train:
        raise GoatDNAError("--train is required (a CSV/TSV/Parquet file with sequence,label)")
    from goatdna.atomic import check_output_dir
    from goatdna.training.finetune import finetune as run_finetune

    check_output_dir(out, "--out")  # before any work: a run folder we can write
    summary = run_finetune(config, out, resume=resume, force=force)
    shown = {k: summary[k] for k in ("task", "mode", "steps", "best_step")}
    if summary.get("probe"):
        shown["probe"] = summary["probe"]
    shown["val"] = summary["val"]
    if summary.get("test"):
        shown["test"] = summary["test"]
    say_once(json_text(shown, indent=None, end=""))
    say_once(f"run directory: {out}")
