"""`goatdna train`: train a GOAT or RoPE decoder on prepared shards into a run directory.

Its flags that set config keys (``--max-steps``, ``--devices`` ...) are the library's
`TRAIN_FLAGS`, declared next to `RunConfig`; the signature Typer reads is built from them
(`config_flags`), and `train_config` merges them into the run config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from goatdna.cli.common import DataOpt, OverridesOpt, config_flags, option, say_once
from goatdna.errors import GoatDNAError
from goatdna.formats import json_text
from goatdna.training.config import TRAIN_FLAGS, RunConfig


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
    **flags: Any,
) -> None:
    """Train a decoder; writes config.yaml, checkpoints/, metrics.csv and summary.json."""
    from goatdna.training.config import train_config
    from goatdna.training.trainer import train as run_training

    how: bool | str = resume
    if resume_mode is not None:
        if resume_mode != "auto" or not resume:
            raise GoatDNAError(
                f"unexpected argument {resume_mode!r}: train takes no arguments except "
                "'auto' right after --resume (--resume auto)"
            )
        how = "auto"
    run_config = train_config(
        config, out, resume=resume, overrides=list(overrides or []), flags=flags
    )
    summary = run_training(run_config, data, out, resume=how, force=force)
    keys = ("steps", "train_loss", "val_loss", "val_bits_per_base", "tokens_per_s", "mfu")
    say_once(json_text({k: summary[k] for k in keys}, indent=None, end=""))
    say_once(f"run directory: {out}")


config_flags(
    train,
    RunConfig,
    TRAIN_FLAGS,
    ("data", "out", "config", "max_steps", "overrides", "resume", "resume_mode", "force", ...),
)
