"""What every command shares: user errors become one line on stderr and exit status 2.

Command modules import heavy libraries (torch, Lightning) inside their functions, so that
``goatdna --help`` stays instant.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from goatdna.errors import GoatDNAError

F = TypeVar("F", bound=Callable[..., Any])

USER_ERROR_EXIT_CODE = 2


def user_errors(func: F) -> F:
    """Print a `GoatDNAError` as ``error: <message>`` and exit 2; let real bugs keep their traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except GoatDNAError as err:
            message = " ".join(str(err).split())  # always exactly one line
            print(f"{getattr(err, 'prefix', 'error')}: {message}", file=sys.stderr)
            raise typer.Exit(getattr(err, "exit_code", USER_ERROR_EXIT_CODE)) from None

    return wrapper  # type: ignore[return-value]
