"""`goatdna finetune`: a pretrained GOAT/RoPE model + a sequence head, trained on labelled data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from goatdna.errors import GoatDNAError


def finetune(
    checkpoint: str | None = typer.Option(
        None, "--checkpoint", "-c", help="Pretrained backbone: a `goatdna train` .ckpt."
    ),
    train: str | None = typer.Option(
        None,
        "--train",
        help="Training table: CSV/TSV/Parquet with sequence,label (or BED + --fasta).",
    ),
    val: str | None = typer.Option(
        None, "--val", help="Validation table (default: hold out --val-fraction of --train)."
    ),
    test: str | None = typer.Option(
        None, "--test", help="Test table, evaluated with the best checkpoint."
    ),
    out: Path = typer.Option(
        ...,
        "--out",
        "-o",
        help="Run directory (config.yaml, checkpoints/, metrics.csv, summary.json).",
    ),
    fasta: str | None = typer.Option(None, "--fasta", help="Reference FASTA for BED inputs."),
    bed_label_column: int | None = typer.Option(
        None, "--bed-label-column", help="1-based BED column with the label (default 4)."
    ),
    sequence_column: str | None = typer.Option(
        None, "--sequence-column", help="Default: sequence."
    ),
    label_column: str | None = typer.Option(None, "--label-column", help="Default: label."),
    task: str | None = typer.Option(
        None, "--task", help="auto | classification | regression (auto: from the labels)."
    ),
    mode: str | None = typer.Option(
        None, "--mode", help="full (train everything) | probe (frozen backbone, cached embeddings)."
    ),
    pool: str | None = typer.Option(
        None, "--pool", help="mean | last (hidden state of the last base)."
    ),
    rc_augment: bool | None = typer.Option(
        None, "--rc-augment/--no-rc-augment", help="Train on random strands."
    ),
    rc_average: bool | None = typer.Option(
        None, "--rc-average/--no-rc-average", help="Evaluate/predict with the mean of both strands."
    ),
    epochs: int | None = typer.Option(None, "--epochs", help="Default 5."),
    lr: float | None = typer.Option(None, "--lr", help="Head learning rate (default 1e-3)."),
    backbone_lr: float | None = typer.Option(
        None, "--backbone-lr", help="Backbone learning rate in full mode (default 1e-4)."
    ),
    batch_size: int | None = typer.Option(
        None, "--batch-size", help="Sequences per step over all devices (default 32)."
    ),
    max_length: int | None = typer.Option(
        None, "--max-length", help="Keep the first N bases of longer sequences (default 1024)."
    ),
    val_fraction: float | None = typer.Option(
        None, "--val-fraction", help="Held out of --train when --val is absent (default 0.1)."
    ),
    seed: int | None = typer.Option(None, "--seed", help="Default 0."),
    devices: str | None = typer.Option(
        None, "--devices", help="Devices per node: a count, 'auto' or '0,1'."
    ),
    accelerator: str | None = typer.Option(None, "--accelerator", help="auto | cpu | gpu."),
    strategy: str | None = typer.Option(None, "--strategy", help="auto | ddp."),
    num_nodes: int | None = typer.Option(None, "--num-nodes", help="Nodes (torchrun/SLURM)."),
    precision: str | None = typer.Option(
        None,
        "--precision",
        help="auto (bf16-mixed on GPU, 32-true on CPU) | 32-true | bf16-mixed | 16-mixed.",
    ),
    overrides: list[str] = typer.Option(
        [], "--set", help="Any config key, e.g. --set optim.weight_decay=0.1 (repeatable)."
    ),
    progress: bool | None = typer.Option(
        None, "--progress/--no-progress", help="Rich progress bar."
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Continue RUN_DIR from checkpoints/last.ckpt (options default to its config.yaml).",
    ),
    force: bool = typer.Option(
        False, "--force", help="Start over in a run directory that holds a run."
    ),
) -> None:
    """Fine-tune a pretrained model for sequence classification or regression."""
    from goatdna.configfile import apply_overrides, from_dict, load_yaml, to_dict
    from goatdna.training.finetune_config import FinetuneConfig

    flags: dict[str, Any] = {
        "task.train": train, "task.val": val, "task.test": test, "task.fasta": fasta,
        "task.bed_label_column": bed_label_column, "task.sequence_column": sequence_column,
        "task.label_column": label_column, "task.task": task, "task.max_length": max_length,
        "task.val_fraction": val_fraction, "backbone.checkpoint": checkpoint,
        "backbone.mode": mode, "backbone.pool": pool, "backbone.rc_augment": rc_augment,
        "backbone.rc_average": rc_average, "optim.head_lr": lr, "optim.backbone_lr": backbone_lr,
        "trainer.epochs": epochs, "trainer.batch_size": batch_size,
        "trainer.devices": _devices(devices), "trainer.accelerator": accelerator,
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
    base = apply_overrides(base, list(overrides))
    config = from_dict(FinetuneConfig, base)
    if not config.task.train:
        raise GoatDNAError("--train is required (a CSV/TSV/Parquet file with sequence,label)")
    from goatdna.atomic import check_output_dir
    from goatdna.training.finetune import finetune as run_finetune

    check_output_dir(out, "--out")  # before any work: a run folder we can write
    summary = run_finetune(config, out, resume=resume, force=force)
    shown = {k: summary[k] for k in ("task", "mode", "steps", "best_step")}
    shown["val"] = summary["val"]
    if summary.get("test"):
        shown["test"] = summary["test"]
    typer.echo(json.dumps(shown))
    typer.echo(f"run directory: {out}")


def _devices(value: str | None) -> int | str | None:
    if value is not None and value.strip().lstrip("-").isdigit():
        return int(value)
    return value
