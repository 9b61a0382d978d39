"""The Typer application: registers the functions listed in `goatdna.cli.commands`.

Each command lives in its own module under `goatdna.cli` and is wrapped by `user_errors`, so a
`GoatDNAError` anywhere below prints one line and exits 2; `with_declared_ranges` gives every
numeric option its range (its library field's own, else `common.NUMERIC_RANGES`). A mistake on the command line itself
(a missing required option, an unknown flag, a value out of range) gets the same one line and
exit 2 from `OneLineErrors`, instead of Click's usage box (`goatdna.cli.click_classes`).
"""

from __future__ import annotations

from typing import Any

import typer

from goatdna import __version__
from goatdna.cli.click_classes import OneLineErrors, PlainCommand
from goatdna.cli.commands import COMMANDS
from goatdna.cli.common import user_errors, with_declared_ranges

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
