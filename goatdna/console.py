"""The rich Console every command prints through (`output_console`).

On a terminal rich wraps at the terminal's width, as a reader wants. Elsewhere (a pipe, a log
file, ``| grep``, CI) rich assumed 80 columns and hard-wrapped: a path broke in two
(``.../shard`` then ``s``), and a table wider than 80 columns was cut to ``1.2…``. There a line
stays one line, and a table gets its natural width; ``COLUMNS``, when set, still sets the width.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich loads inside the function: `goatdna --help` stays instant
    from rich.console import Console

LOG_WIDTH = 10_000
"""Columns of a console that is not a terminal (and has no ``COLUMNS``): wide enough that no
table is cut; nothing printed pads to the console's width (no Panel, Rule or centred text)."""


def output_console(**options: Any) -> Console:
    """A `rich.console.Console` built with ``options`` (``stderr=True``, ``quiet=``, ``file=``,
    ...) that does not hard-wrap when it is not a terminal (see the module docstring)."""
    from rich.console import Console

    console = Console(**options)
    if not console.is_terminal and not console.is_jupyter:
        console.soft_wrap = True  # a long line is one line, not broken at the width
        if "width" not in options and "COLUMNS" not in os.environ:
            console.width = LOG_WIDTH
    return console
