"""`goatdna train`: train a GOAT or RoPE decoder on prepared shards into a run directory."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from goatdna.errors import GoatDNAError


def train(
    config: Path | None = typer.Option(
        None,
        "--config",
        "-c",
        help="Run config YAML (configs/goat-tiny.yaml ...). With --resume it defaults to the run "
        "directory's config.yaml.",
    ),
    data: Path = typer.Option(..., "--data", "-d", help="Shard directory from `goatdna prepare`."),
    run_dir: Path = typer.Option(
        ...,
        "--run-dir",
        "-o",
        help="Where checkpoints, metrics and the summary go (e.g. runs/goat-tiny).",
    ),
    max_steps: int | None = typer.Option(None, "--max-steps", help="Override trainer.max_steps."),
    overrides: list[str] = typer.Option(
        [], "--set", help="Override any config key, e.g. --set optim.lr=3e-4 (repeatable)."
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Continue from RUN_DIR/checkpoints/last.ckpt (step, optimizer, "
        "LR schedule and data position). `--resume auto`: resume when that checkpoint exists, "
        "else start fresh (one command line for requeued or preempted cluster jobs).",
    ),
    resume_mode: str | None = typer.Argument(
        None, metavar="[auto]", help="Only after --resume: `--resume auto`.", show_default=False
    ),
    force: bool = typer.Option(
        False, "--force", help="Start over in a run directory that already holds a run."
    ),
    devices: str | None = typer.Option(
        None, "--devices", help="Devices per node: a count, 'auto', or a list like '0,1'."
    ),
    strategy: str | None = typer.Option(
        None, "--strategy", help="auto | ddp | fsdp (multi-GPU; under torchrun/SLURM too)."
    ),
    precision: str | None = typer.Option(
        None,
        "--precision",
        help="auto (bf16-mixed on GPU, 32-true on CPU) | 32-true | "
        "bf16-mixed | 16-mixed | bf16-true.",
    ),
    num_nodes: int | None = typer.Option(None, "--num-nodes", help="Nodes (torchrun/SLURM)."),
    accelerator: str | None = typer.Option(
        None, "--accelerator", help="auto | cpu | gpu (default: the config's, normally auto)."
    ),
) -> None:
    """Train a decoder; writes config.yaml, checkpoints/, metrics.csv and summary.json."""
    from goatdna.training.config import load_run_config
    from goatdna.training.trainer import train as run_training

    flags = {
        "trainer.max_steps": max_steps,
        "trainer.devices": devices,
        "trainer.strategy": strategy,
        "trainer.precision": precision,
        "trainer.num_nodes": num_nodes,
        "trainer.accelerator": accelerator,
    }
    all_overrides = list(overrides) + [
        f"{key}={value}" for key, value in flags.items() if value is not None
    ]
    how: bool | str = resume
    if resume_mode is not None:
        if resume_mode != "auto" or not resume:
            raise GoatDNAError(
                f"unexpected argument {resume_mode!r}: train takes no arguments except "
                "'auto' right after --resume (--resume auto)"
            )
        how = "auto"
    if config is None:
        if not resume:
            raise GoatDNAError("--config is required (e.g. --config configs/goat-tiny.yaml)")
        config = run_dir / "config.yaml"
        if not config.is_file():
            raise GoatDNAError(f"--resume: {config} not found; pass --config or check --run-dir")
    run_config = load_run_config(config, all_overrides)
    summary = run_training(run_config, data, run_dir, resume=how, force=force)
    keys = ("steps", "train_loss", "val_loss", "val_bits_per_base", "tokens_per_s", "mfu")
    typer.echo(json.dumps({k: summary[k] for k in keys}))
    typer.echo(f"run directory: {run_dir}")
