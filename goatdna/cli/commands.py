"""The list of commands, in the order `goatdna --help` shows them.

Each command module defines one function with Typer annotations; add new commands here. Modules
are imported here, not at the top of `app`, so one list says what the CLI offers.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any

COMMANDS: list[tuple[str, str, str]] = [
    # (command name, module under goatdna.cli, function name)
    ("demo", "demo", "demo"),
    ("prepare", "prepare", "prepare"),
    ("info", "info", "info"),
    ("model-info", "model_info", "model_info"),
    ("train", "train", "train"),
    ("generate", "generate", "generate"),
    ("evaluate", "evaluate", "evaluate"),
    ("report", "report", "report"),
    ("export", "export", "export"),
    ("embed", "embed", "embed"),
    ("probe-recall", "probe_recall", "probe_recall"),
    ("score-variants", "score_variants", "score_variants"),
    ("score-track", "score_track", "score_track"),
    ("make-task", "make_task", "make_task"),
    ("finetune", "finetune", "finetune"),
    ("predict", "predict", "predict"),
]


def all_commands() -> Iterator[tuple[str, Callable[..., Any]]]:
    for name, module_name, func_name in COMMANDS:
        module = importlib.import_module(f"goatdna.cli.{module_name}")
        yield name, getattr(module, func_name)
