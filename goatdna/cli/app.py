"""The Typer application: registers the functions listed in `goatdna.cli.commands`.

Each command lives in its own module under `goatdna.cli` and is wrapped by `user_errors`, so a
`GoatDNAError` anywhere below prints one line and exits 2; `with_declared_ranges` gives every
numeric option its range (a config field's own, else `common.NUMERIC_RANGES`). A mistake on the command line itself
(a missing required option, an unknown flag, a value out of range) gets the same one line and
exit 2 from `OneLineErrors`, instead of Click's usage box.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

from goatdna import __version__
from goatdna.cli.commands import COMMANDS
from goatdna.cli.common import (
    USER_ERROR_EXIT_CODE,
    metavar_of,
    user_errors,
    with_declared_ranges,
)
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


app = typer.Typer(
    name="goatdna",
    cls=OneLineErrors,
    help="Nucleotide-level language models of the human genome: GOAT attention priors vs RoPE.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"goatdna {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_version_callback,
        is_eager=True,
        help="Print the version and exit.",
        metavar="",
    ),
) -> None:
    """Nucleotide-level language models of the human genome: GOAT attention priors vs RoPE."""
    # every command's torch CPU threads: OMP_NUM_THREADS if set, else the cores the load leaves
    # free (goatdna.runtime.choose_cpu_threads); a command's --threads still overrides it
    from goatdna.runtime import apply_cpu_threads, choose_cpu_threads

    apply_cpu_threads(choose_cpu_threads())


def summary(command: Any) -> str:
    """A command's one-line summary in listings: its docstring's whole first paragraph (Click
    would cut it to 45 characters, as in the generated CLI reference)."""
    return " ".join((command.__doc__ or "").strip().split("\n\n")[0].split())


for command in COMMANDS:
    app.command(cls=PlainCommand, short_help=summary(command))(
        user_errors(with_declared_ranges(command))
    )


def main() -> None:
    app()


if __name__ == "__main__":
    main()
