"""`goatdna finetune`: a pretrained GOAT/RoPE model + a sequence head, trained on labelled data.

Its flags that set config keys (``--lr``, ``--mode``, ``--devices`` ...) are the library's
`FINETUNE_FLAGS`, one declaration each next to `FinetuneConfig`; the signature Typer reads is
built from them (`config_flags`), and `load_finetune_config` merges them into the config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from goatdna.cli.common import OverridesOpt, config_flags, option, say_once
from goatdna.formats import json_text
from goatdna.training.finetune_config import FINETUNE_FLAGS, FinetuneConfig


def finetune(
    out: Annotated[
        Path, option("out", "Run directory (config.yaml, checkpoints/, metrics.csv, summary.json).")
    ],
    overrides: OverridesOpt = None,
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
    **flags: Any,
) -> None:
    """Fine-tune a pretrained model for sequence classification or regression."""
    from goatdna.atomic import check_output_dir
    from goatdna.training.finetune import finetune as run_finetune
    from goatdna.training.finetune_config import finetune_runtime, load_finetune_config

    config = load_finetune_config(out, resume=resume, overrides=overrides or [], flags=flags)
    runtime = finetune_runtime(config, flags)  # the devices parsed once, before any work
    check_output_dir(out, "--out")  # before any work: a run folder we can write
    summary = run_finetune(config, out, resume=resume, force=force, runtime=runtime)
    shown = {k: summary[k] for k in ("task", "mode", "steps", "best_step")}
    if summary.get("probe"):
        shown["probe"] = summary["probe"]
    shown["val"] = summary["val"]
    if summary.get("test"):
        shown["test"] = summary["test"]
    say_once(json_text(shown, indent=None, end=""))
    say_once(f"run directory: {out}")


config_flags(
    finetune,
    FinetuneConfig,
    FINETUNE_FLAGS,
    ("out", ..., "overrides", "progress", "resume", "force"),
)
