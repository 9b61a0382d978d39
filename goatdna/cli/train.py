"""`goatdna train`: train a GOAT or RoPE decoder on prepared shards into a run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from goatdna.cli.common import (
    ConfigAcceleratorOpt,
    ConfigDevicesOpt,
    ConfigNumNodesOpt,
    DataOpt,
    OverridesOpt,
    option,
    say_once,
)
from goatdna.errors import GoatDNAError
from goatdna.formats import json_text


def train(
    data: DataOpt,
    out: Annotated[
        Path,
        option("out", "Run directory: checkpoints, metrics and the summary (e.g. runs/goat-tiny)."),
    ],
    config: Annotated[
        Path | None,
        option(
            "config",
            "Run config YAML (configs/goat-tiny.yaml ...): required for a new run; with --resume "
            "it defaults to the run directory's config.yaml.",
        ),
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option("--max-steps", help="Override trainer.max_steps.")
    ] = None,
    overrides: OverridesOpt = None,
    resume: Annotated[
        bool,
        option(
            "resume",
            "Continue from OUT/checkpoints/last.ckpt (step, optimizer, LR schedule and data "
            "position). `--resume auto`: resume when that checkpoint exists, else start fresh (one "
            "command line for requeued or preempted cluster jobs).",
        ),
    ] = False,
    resume_mode: Annotated[
        str | None,
        typer.Argument(
            metavar="auto", help="Only after --resume: `--resume auto`.", show_default=False
        ),
    ] = None,
    force: Annotated[
        bool, option("force", "Start over in a run directory that already holds a run.")
    ] = False,
    devices: ConfigDevicesOpt = None,
    strategy: Annotated[str | None, option("strategy")] = None,
    precision: Annotated[str | None, option("precision")] = None,
    num_nodes: ConfigNumNodesOpt = None,
    accelerator: ConfigAcceleratorOpt = None,
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
    all_overrides = list(overrides or []) + [
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
        config = out / "config.yaml"
        if not config.is_file():
            raise GoatDNAError(f"--resume: {config} not found; pass --config or check --out")
    run_config = load_run_config(config, all_overrides)
    summary = run_training(run_config, data, out, resume=how, force=force)
    keys = ("steps", "train_loss", "val_loss", "val_bits_per_base", "tokens_per_s", "mfu")
    say_once(json_text({k: summary[k] for k in keys}, indent=None, end=""))
    say_once(f"run directory: {out}")
