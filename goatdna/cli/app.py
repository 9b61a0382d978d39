"""The Typer application: registers the functions listed in `goatdna.cli.commands`.

Each command lives in its own module under `goatdna.cli` and is wrapped by `user_errors`, so a
`GoatDNAError` anywhere below prints one line and exits 2.
"""

from __future__ import annotations

import typer

from goatdna import __version__
from goatdna.cli.commands import COMMANDS
from goatdna.cli.common import user_errors

app = typer.Typer(
    name="goatdna",
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
    ),
) -> None:
    """Nucleotide-level language models of the human genome: GOAT attention priors vs RoPE."""
    # every command's torch CPU threads: OMP_NUM_THREADS if set, else the cores the load leaves
    # free (goatdna.runtime.choose_cpu_threads); a command's --threads still overrides it
    from goatdna.runtime import apply_cpu_threads, choose_cpu_threads

    apply_cpu_threads(choose_cpu_threads())


for command in COMMANDS:
    app.command()(user_errors(command))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
