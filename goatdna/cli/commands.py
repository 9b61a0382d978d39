"""The list of commands, in the order `goatdna --help` shows them.

Each command module defines one function with Typer annotations; add new commands here.
Modules that do not exist yet are skipped so the CLI works while the project grows.
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
]


def all_commands() -> Iterator[tuple[str, Callable[..., Any]]]:
    for name, module_name, func_name in COMMANDS:
        try:
            module = importlib.import_module(f"goatdna.cli.{module_name}")
        except ModuleNotFoundError as err:
            if err.name == f"goatdna.cli.{module_name}":
                continue
            raise
        yield name, getattr(module, func_name)
