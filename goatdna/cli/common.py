"""What every command shares: option names, user errors, and how tables are printed.

One concept has one flag across all commands (``-c/--checkpoint`` is always a checkpoint, ``-o/--out``
always the output, ``-n/--num-samples`` always a sample count ...): every command declares its
options through `option(concept, help)`, whose names come from `OPTION_NAMES`, and defaults come
from the library's dataclasses and functions through `default_of`. A user error
(`GoatDNAError`) becomes one ``error: ...`` line and exit status 2.

Command modules import heavy libraries (torch, Lightning, pandas) inside their functions, so that
``goatdna --help`` stays instant.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypedDict, TypeVar

import typer

from goatdna.errors import GoatDNAError

if TYPE_CHECKING:  # pandas and rich load inside the functions: `goatdna --help` stays instant
    import pandas as pd
    from rich.console import Console
    from rich.table import Table
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11; 3.10 is supported

P = ParamSpec("P")
R = TypeVar("R")

USER_ERROR_EXIT_CODE = 2

OPTION_NAMES: dict[str, tuple[str, ...]] = {
    # concept: the flag names every command uses for it
    "checkpoint": ("--checkpoint", "-c"),
    "out": ("--out", "-o"),
    "data": ("--data", "-d"),
    "config": ("--config",),
    "fasta": ("--fasta", "-f"),
    "sequences": ("--sequences", "-s"),
    "region": ("--region", "-r"),
    "split": ("--split",),
    "context_lengths": ("--context-lengths",),
    "max_eval_tokens": ("--max-eval-tokens",),
    "batch_size": ("--batch-size",),
    "batch_tokens": ("--batch-tokens",),
    "strands": ("--strands",),
    "num_samples": ("--num-samples", "-n"),
    "prompts": ("--prompts",),
    "temperature": ("--temperature",),
    "top_k": ("--top-k",),
    "seed": ("--seed",),
    "threads": ("--threads",),
    "rope_extension": ("--rope-extension",),
    "accelerator": ("--accelerator",),
    "devices": ("--devices",),
    "num_nodes": ("--num-nodes",),
    "strategy": ("--strategy",),
    "precision": ("--precision",),
    "overrides": ("--set",),
    "force": ("--force",),
    "resume": ("--resume",),
    "progress": ("--progress/--no-progress",),
    "cache_dir": ("--cache-dir",),
}

OPTION_HELP: dict[str, str] = {
    "checkpoint": "A .ckpt written by `goatdna train` or a `goatdna export` folder.",
    "data": "Shard directory from `goatdna prepare`.",
    "fasta": "Reference FASTA (plain, gzip or bgzip); indexed on first use.",
    "split": "Split to read: train, val or test.",
    "context_lengths": "Comma-separated context lengths, e.g. 1024,2048,4096,8192 "
    "(default: training length x 1, 2, 4, 8; longer than training = extrapolation).",
    "max_eval_tokens": "Score at most this many bases per context length and model "
    "(max // L held-out windows, evenly spaced over the split; 0 = the whole split).",
    "batch_tokens": "Tokens per forward pass (batch = this / sequence length).",
    "num_samples": "Continuations drawn per prompt (and model).",
    "prompts": "GC study: test-split prompts.",
    "temperature": "Softmax temperature of sampling; 0 = greedy.",
    "top_k": "Sample among the k most likely bases (1..4).",
    "seed": "Random seed; equal seeds give equal results.",
    "threads": "torch CPU threads (default: OMP_NUM_THREADS if set, else the cores the load "
    "average leaves free, at least 1: on a busy CPU more threads than free cores run slower).",
    "rope_extension": "RoPE models only: none, linear (position interpolation) or ntk (NTK-aware "
    "scaling) beyond the training length, applied at load (default: the checkpoint's own).",
    "accelerator": "auto | cpu | cuda (gpu) | mps.",
    "devices": "Devices per node: a count, -1 for all, 'auto', or ids like 0,1 (Lightning's "
    "syntax: '1,' is the one device with id 1).",
    "num_nodes": "Nodes (torchrun/SLURM).",
    "strategy": "auto | ddp | fsdp (multi-GPU; under torchrun/SLURM too).",
    "precision": "auto (bf16-mixed on GPU, 32-true on CPU) | 32-true | bf16-mixed | 16-mixed "
    "| bf16-true.",
    "overrides": "Override any config key, e.g. --set optim.lr=3e-4 (repeatable).",
    "progress": "Show a rich progress bar.",
    "cache_dir": "Where a plain-gzip FASTA is decompressed once.",
}


class OptionExtras(TypedDict, total=False):
    """What a command may add to a shared option (forwarded to `typer.Option`)."""

    min: int


def option(concept: str, help: str | None = None, **kwargs: Unpack[OptionExtras]) -> object:
    """The `typer.Option` of a shared concept: its one set of flag names, and a help text.

    ``help`` replaces the shared text where a command says more (what its output file holds);
    the default value is the parameter's own default in the command's signature.
    """
    text = help if help is not None else OPTION_HELP.get(concept)
    if text is None:
        raise KeyError(f"option {concept!r} has no shared help: pass help=")
    return typer.Option(*OPTION_NAMES[concept], help=text, **kwargs)


# The options most commands take word for word.
CheckpointOpt = Annotated[Path, option("checkpoint")]
DataOpt = Annotated[Path, option("data")]
RopeExtensionOpt = Annotated[str | None, option("rope_extension")]
SeedOpt = Annotated[int, option("seed")]
SplitOpt = Annotated[str, option("split")]
ContextLengthsOpt = Annotated[str | None, option("context_lengths")]
MaxEvalTokensOpt = Annotated[int, option("max_eval_tokens")]
BatchTokensOpt = Annotated[int, option("batch_tokens")]
NumSamplesOpt = Annotated[int, option("num_samples")]
PromptsOpt = Annotated[int, option("prompts")]
TemperatureOpt = Annotated[float, option("temperature")]
TopKOpt = Annotated[int | None, option("top_k")]
ThreadsOpt = Annotated[int | None, option("threads", min=1)]
# the resumable-work pair of the commands whose work is kept in a work folder (embed, predict)
WorkResumeOpt = Annotated[
    bool, option("resume", "Continue an interrupted run with the same inputs and options.")
]
WorkForceOpt = Annotated[
    bool,
    option("force", "Replace an existing --out and start over an interrupted run's work."),
]
# Where a model runs: the same three flags everywhere (Lightning's spelling). Multi-device
# commands take all three; single-process ones (evaluate, generate, report, probe-recall) take
# --accelerator and --devices for one device (`goatdna.runtime.single_device`); train and
# finetune take the Config* forms, whose None keeps the run config's trainer.* value.
AcceleratorOpt = Annotated[str, option("accelerator")]
DevicesOpt = Annotated[str, option("devices")]
NumNodesOpt = Annotated[int, option("num_nodes")]
OneDeviceOpt = Annotated[
    str,
    option(
        "devices",
        "One device: 1 (the accelerator's first), or a GPU id with a trailing comma "
        "(Lightning's syntax: 1, is cuda:1).",
    ),
]
ConfigAcceleratorOpt = Annotated[
    str | None,
    option(
        "accelerator",
        "auto | cpu | cuda (gpu) | mps (default: trainer.accelerator, normally auto).",
    ),
]
ConfigDevicesOpt = Annotated[
    str | None,
    option(
        "devices",
        "Devices per node: a count, -1 for all, 'auto', or ids like 0,1 (default: "
        "trainer.devices).",
    ),
]
ConfigNumNodesOpt = Annotated[
    int | None, option("num_nodes", "Nodes (torchrun/SLURM; default: trainer.num_nodes).")
]
OverridesOpt = Annotated[list[str] | None, option("overrides")]
CacheDirOpt = Annotated[Path | None, option("cache_dir")]


def default_of(owner: Callable[..., object], name: str) -> Any:
    """The library's default of a dataclass field or a function parameter (one source of truth).

    ``owner`` is a dataclass or a function. The result stays Any: it is the default of a CLI
    parameter, whose type the command's signature states.
    """
    if dataclasses.is_dataclass(owner):
        for field in dataclasses.fields(owner):
            if field.name == name:
                if field.default is not dataclasses.MISSING:
                    return field.default
                if field.default_factory is not dataclasses.MISSING:
                    return field.default_factory()
        raise KeyError(f"{getattr(owner, '__name__', owner)}.{name} has no default")
    default = inspect.signature(owner).parameters[name].default
    if default is inspect.Parameter.empty:
        raise KeyError(f"{owner.__name__}({name}) has no default")
    return default


def eval_token_cap(value: int) -> int | None:
    """``--max-eval-tokens``: 0 means the whole split (None to the library); negative is an error."""
    if value < 0:
        raise GoatDNAError(f"--max-eval-tokens must be >= 0 (0 = the whole split), got {value}")
    return value or None


def user_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Print a `GoatDNAError` as ``error: <message>`` and exit 2; let real bugs keep their traceback."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except GoatDNAError as err:
            message = " ".join(str(err).split())  # always exactly one line
            print(f"{getattr(err, 'prefix', 'error')}: {message}", file=sys.stderr)
            raise typer.Exit(getattr(err, "exit_code", USER_ERROR_EXIT_CODE)) from None

    return wrapper


# ----------------------------------------------------------------------------- tables


def frame_table(
    frame: pd.DataFrame, title: str | None = None, formats: Mapping[str, str] | None = None
) -> Table:
    """A pandas DataFrame as a rich `Table`: text columns left-aligned, numbers right-aligned and
    formatted as report.md formats them (`report_frames.fmt`; per-column specs in ``formats``)."""
    from rich.table import Table
    from rich.text import Text

    from goatdna.analysis.report_frames import fmt

    formats = formats or {}
    table = Table(title=Text(title) if title else None)
    for column in frame.columns:
        numeric = frame[column].dtype.kind in "iuf"  # integers and floats; not bool or text
        # a narrow terminal wraps a cell over lines rather than cutting it to "1.2…"
        table.add_column(Text(str(column)), justify="right" if numeric else "left", overflow="fold")
    for row in frame.itertuples(index=False):
        # Text, not str: a run name like "[red]x" is shown as written, never read as markup
        table.add_row(
            *(
                Text(fmt(value, formats.get(str(column)), default=".4f"))
                for column, value in zip(frame.columns, row, strict=True)
            )
        )
    return table


def print_frame(
    frame: pd.DataFrame,
    title: str | None = None,
    formats: Mapping[str, str] | None = None,
    console: Console | None = None,
) -> None:
    """Print a DataFrame as a rich table (to ``console``, default stdout) at full width.

    Output that is not a terminal (a log file, a pipe) gets the table's natural width, so no cell
    is wrapped or cut in a log; a terminal gets its own width.
    """
    from rich.console import Console
    from rich.measure import Measurement

    console = console or Console()
    table = frame_table(frame, title, formats)
    if not console.is_terminal:
        needed = Measurement.get(console, console.options.update_width(10_000), table).maximum
        if needed > console.width:  # rich caps print(width=) at the console's own width
            console = Console(file=console.file, width=needed)
    console.print(table)
