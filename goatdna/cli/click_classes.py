"""The Click classes of goatdna's Typer application (`goatdna.cli.app`): --help as goatdna
shows it, and a mistake on the command line itself (a missing required option, an unknown flag,
a value out of range) as one ``error: ...`` line and exit 2 instead of Click's usage box.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

from goatdna.cli.common import USER_ERROR_EXIT_CODE, metavar_of
from goatdna.errors import GoatDNAError


def _fixed(label: str, ctx: Any) -> str:
    return label


def _switch_help(option: Any) -> Any:
    """Typer shows ``<bool>`` after --help as if it took a value; a switch shows nothing."""
    if option is not None:
        option.metavar = ""
    return option


@contextlib.contextmanager
def literal_help(command: Any) -> Iterator[None]:
    """While ``command``'s --help renders: its help texts, its options' and (for the group) its
    commands' summaries escaped for rich, which reads ``[lora]`` in ``pip install
    'goatdna[lora]'`` as a markup tag and drops it. At render time, for every command (`PlainCommand`
    and `OneLineErrors` call it), so the texts stay as written everywhere else: the CLI
    reference the docs build from them, Click's plain help."""
    from typer.core import HAS_RICH

    if not HAS_RICH or getattr(command, "rich_markup_mode", None) != "rich":
        yield
        return
    from rich.markup import escape

    saved = []
    for obj in (command, *command.params, *getattr(command, "commands", {}).values()):
        for attr in ("help", "short_help", "epilog"):
            text = getattr(obj, attr, None)
            if isinstance(text, str):
                saved.append((obj, attr, text))
                setattr(obj, attr, escape(text))
    try:
        yield
    finally:
        for obj, attr, text in saved:
            setattr(obj, attr, text)


class PlainCommand(TyperCommand):
    """A command whose --help names value types as `common.metavar_of` does, arguments too
    (Typer prints an argument's Python type, e.g. ``<list[Path]>``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, TyperArgument):
                annotation = param.type_descriptor.annotation
                label = metavar_of(self.name or "", param.name or "", annotation)
                param.display_type_rich = functools.partial(_fixed, label)  # type: ignore[method-assign]

    def get_help_option(self, ctx: Any) -> Any:
        return _switch_help(super().get_help_option(ctx))

    def format_help(self, ctx: Any, formatter: Any) -> None:
        with literal_help(self):
            super().format_help(ctx, formatter)


class OneLineErrors(TyperGroup):
    """The command group whose usage errors are one ``error: ...`` line naming what to do."""

    def get_help_option(self, ctx: Any) -> Any:
        return _switch_help(super().get_help_option(ctx))

    def format_help(self, ctx: Any, formatter: Any) -> None:
        with literal_help(self):
            super().format_help(ctx, formatter)

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:  # typer >= 0.29 ships its own copy of Click, whose exceptions it raises
            from typer._click.exceptions import ClickException, UsageError
        except ImportError:  # pragma: no cover - older typer raises Click's own
            from click.exceptions import ClickException, UsageError  # type: ignore[assignment]

        try:
            status = super().main(args, prog_name, complete_var, False, **extra)
        except UsageError as err:
            if err.__class__.__name__ == "NoArgsIsHelpError":  # `goatdna` alone: the help
                err.show()
                sys.exit(err.exit_code)
            message = " ".join(err.format_message().split())
            where = getattr(err.ctx, "command_path", "goatdna")
            print(f"error: {message} (see `{where} --help`)", file=sys.stderr)
            sys.exit(USER_ERROR_EXIT_CODE)
        except GoatDNAError as err:  # raised while parsing: a range check (common.Bounds)
            print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
            sys.exit(USER_ERROR_EXIT_CODE)
        except ClickException as err:
            print(f"error: {' '.join(err.format_message().split())}", file=sys.stderr)
            sys.exit(err.exit_code)
        except typer.Abort:
            print("Aborted.", file=sys.stderr)
            sys.exit(1)
        sys.exit(status if isinstance(status, int) else 0)
