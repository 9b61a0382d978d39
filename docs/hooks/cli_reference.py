"""MkDocs hook: the CLI reference page, generated from the Typer app at every build.

The page is never a file in the repository (so it cannot drift from the code): `on_files` adds
``reference/cli.md`` as a generated file whose Markdown is Typer's own ``typer ... utils docs``
output (`typer.cli.get_docs_for_click`) for `goatdna.cli.app.app`, below a short introduction.
"""

from __future__ import annotations

import click
import typer.cli
import typer.main
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

PAGE = "reference/cli.md"

INTRO = """\
This page is generated from the command-line application itself (`goatdna.cli.app`) each time
the documentation is built, so it always lists the options of the installed version;
`goatdna COMMAND --help` prints the same text.

Conventions that hold for every command: every option is declared through
`goatdna/cli/common.py`, so one concept (checkpoint, output, data, FASTA, region, seed,
strands, `--force`/`--resume`, ...) has one flag and one default everywhere, and
`tests/test_cli_consistency.py` checks that no command spells a concept differently and that no
flag means two things. `-c` is always a checkpoint (`train` takes its config as `--config`),
`-o/--out` is always what a command writes. User errors print one line `error: ...` and exit
with status 2.
"""


def cli_reference_markdown() -> str:
    """Typer's Markdown for every command of the goatdna app, headed by the page's introduction."""
    from goatdna.cli.app import app

    command = typer.main.get_command(app)
    ctx = click.Context(command, info_name="goatdna")
    body = typer.cli.get_docs_for_click(obj=command, ctx=ctx, name="goatdna", title=None)
    # Typer heads the root command with a level-1 title; the page has its own, so demote it
    body = body.replace("# `goatdna`", "## `goatdna`", 1)
    return f"# Command-line reference\n\n{INTRO}\n{body}"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, PAGE, content=cli_reference_markdown()))
    return files
