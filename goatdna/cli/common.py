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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import EllipsisType, UnionType
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypedDict, TypeVar

import typer

from goatdna.configfile import (  # the bounds' vocabulary (NUMERIC_RANGES)
    COUNT,
    COUNT_OR_ZERO,
    SEED,
    Bounds,
    ConfigFlag,
    bounds_of,
    field_owner,
    field_type,
)
from goatdna.errors import GoatDNAError
from goatdna.inference.attribute import BASELINES as ATTRIBUTE_BASELINES
from goatdna.inference.attribute import METHODS as ATTRIBUTE_METHODS

if TYPE_CHECKING:  # pandas and rich load inside the functions: `goatdna --help` stays instant
    import pandas as pd
    from rich.console import Console
    from rich.table import Table
    from typing_extensions import Unpack

    from goatdna.progress import ProgressLines  # typing.Unpack from Python 3.11; 3.10 is supported

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
    """What a command may add to a shared option (forwarded to `typer.Option`). Not a range:
    ranges are declared once, on the library field (`option_range`) or in NUMERIC_RANGES below."""

    show_default: bool


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
ThreadsOpt = Annotated[int | None, option("threads")]
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
# finetune take them as config flags (`config_flags`), whose None keeps the run config's value.
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


def say_once(text: str, *, err: bool = False) -> None:
    """A command's closing line (``wrote ...``, a run's summary), printed by the first process
    only: a command launched on several devices runs in every rank, and a line each rank
    printed stood in the log once per rank."""
    from goatdna.runtime import is_first_process

    if is_first_process():
        typer.echo(text, err=err)


class ProgressLine:
    """A ``progress(done, total)`` callback for library code that reports counts (a bootstrap,
    check-precision's window passes): the shared plain lines of `goatdna.progress.ProgressLines`
    on stderr, so these read in a log like every other loop's (one progress behaviour)."""

    EVERY_S: float | None = None
    """Seconds between lines; None: `goatdna.progress.INTERVAL_S` (tests set 0)."""

    def __init__(self, label: str, unit: str) -> None:
        self.label, self.unit = label, unit
        self._lines: ProgressLines | None = None

    def __call__(self, done: int, total: int) -> None:
        from goatdna.progress import ProgressLines, stderr_console

        if self._lines is None:
            self._lines = ProgressLines(
                self.label, total, self.unit, stderr_console(), interval=self.EVERY_S
            )
        self._lines.total = total
        self._lines.update(done)


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
    from rich.measure import Measurement

    from goatdna.console import output_console

    console = console or output_console()
    table = frame_table(frame, title, formats)
    if not console.is_terminal:
        needed = Measurement.get(console, console.options.update_width(10_000), table).maximum
        if needed > console.width:  # rich caps print(width=) at the console's own width
            console = output_console(file=console.file, width=needed)
    console.print(table)


# ----------------------------------------------------------------------------- numeric ranges

# A numeric option takes the bounds its library field declares (`goatdna.configfile.bounded`),
# read as `default_of` reads defaults: `range_owners` lists, by command, the dataclasses its options
# fill in (the first with a field of the option's name, or of its FIELD_NAMES name, owns it). A
# flag that sets a config field (`config_flags`) carries its field's bounds itself. One concept
# has one range in every command (tests/test_cli_ranges.py holds it).
FIELD_NAMES: dict[tuple[str, str], str] = {
    # (command, option): the field that holds its value, where the names differ
    ("prepare", "synthetic_length"): "total_length",
    ("prepare", "synthetic_contigs"): "n_contigs",
    ("report", "prompts"): "n_prompts",
    ("report", "num_samples"): "samples_per_prompt",
    ("demo", "prompts"): "n_prompts",
    ("demo", "num_samples"): "samples_per_prompt",
    ("eval-variants", "bootstrap"): "resamples",
}


@functools.cache
def range_owners() -> dict[str, tuple[type, ...]]:
    """The library dataclasses whose fields each command's options fill in.
    Imported here, when the app is built: the command modules import the same light modules."""
    from goatdna.analysis.attention_run import AttentionRequest
    from goatdna.analysis.generate import SamplingOptions
    from goatdna.analysis.motifs import MotifOptions
    from goatdna.analysis.report_options import ReportOptions
    from goatdna.analysis.variant_eval import EvalOptions
    from goatdna.data_prep.options import PrepareOptions
    from goatdna.data_prep.synthetic import SyntheticGenomeConfig
    from goatdna.data_prep.tasks import WindowTaskOptions
    from goatdna.data_prep.variant_task import VariantTaskOptions
    from goatdna.inference.attribute import AttributeOptions
    from goatdna.inference.calibration import CalibrationRequest
    from goatdna.inference.embed import EmbedOptions
    from goatdna.inference.mutagenesis_run import MutagenesisRequest
    from goatdna.inference.precision_check import Thresholds
    from goatdna.inference.precision_run import PrecisionRequest
    from goatdna.inference.tracks import TrackOptions
    from goatdna.inference.variant_run import ScoreVariantsRequest
    from goatdna.runtime import Runtime

    return {
        "attention": (AttentionRequest,),
        "attribute": (AttributeOptions, Runtime),
        "check-precision": (PrecisionRequest, Thresholds),
        "demo": (ReportOptions,),
        "embed": (EmbedOptions, Runtime),
        "eval-variants": (EvalOptions,),
        "generate": (SamplingOptions,),
        "make-task": (WindowTaskOptions,),
        "make-variant-task": (VariantTaskOptions,),
        "motifs": (MotifOptions,),
        "mutagenesis": (MutagenesisRequest, Runtime),
        "predict": (Runtime,),
        "prepare": (PrepareOptions, SyntheticGenomeConfig),
        "report": (ReportOptions,),
        "score-track": (TrackOptions, Runtime),
        "score-variants": (ScoreVariantsRequest, CalibrationRequest, Runtime),
    }


def field_range(command: str, name: str) -> Bounds | None:
    """The bounds declared on the library field that holds option ``name`` of ``command``
    (None: no owner has that field, or it declares none)."""
    field = FIELD_NAMES.get((command, name), name)
    for owner in range_owners().get(command, ()):
        if any(item.name == field for item in dataclasses.fields(owner)):
            return bounds_of(owner, field)
    return None


# What has no library field with bounds, by parameter name (a name another command's field
# holds takes the same range: one concept, one range). Each stays because its value is a function's parameter (probe-
# recall's `run_probe`, predict's `predict_file`, evaluate's), a command's own (demo's, info's,
# model-info's, --threads: the process's), a CLI spelling the field does not hold (0 for None:
# --max-eval-tokens), or the library's own rule is stricter than the flag's range and says why
# in its own message (score-track's --context >= 2 and --stride < context, check-precision's
# --length >= 2, make-task's --window >= 8 and --max-train/--max-eval >= 2, score-variants'
# --null-size >= 2), so --help keeps the flag's range. `with_declared_ranges` refuses a command
# whose numeric option has neither, so a new option cannot go unchecked.
NUMERIC_RANGES: dict[str, Bounds] = {
    "seed": SEED,  # probe-recall (`run_probe`)
    "steps": COUNT,  # demo
    "genome_length": COUNT,  # demo
    "max_eval_tokens": COUNT_OR_ZERO,  # 0 = the whole split (None in the library)
    "threads": COUNT,
    "max_records": COUNT_OR_ZERO,  # info
    "seq_len": COUNT,  # model-info
    "batch_tokens": COUNT,  # evaluate, probe-recall
    "batch_size": COUNT,  # predict (`predict_file`)
    "segment": COUNT,  # probe-recall
    "trials": COUNT,  # probe-recall
    "window": COUNT,  # make-task (the library wants >= 8)
    "context": COUNT,  # score-track (the library wants >= 2)
    "stride": COUNT,  # score-track (the library wants < context)
    "zoom_levels": Bounds(0, 10),  # score-track (the bigWig writer's)
    "length": COUNT,  # check-precision (the library wants >= 2)
    "max_train": COUNT,  # make-task (the library wants >= 2)
    "max_eval": COUNT,  # make-task (the library wants >= 2)
    "null_size": COUNT,  # score-variants (the library wants >= 2)
}

# Options that take one of a fixed set of words: shown as <a|b|c> in --help (the library checks
# them and names the choices in its error).
CHOICES: dict[str, tuple[str, ...]] = {
    "strands": ("both", "forward"),
    "accelerator": ("auto", "cpu", "cuda", "gpu", "mps"),
    "strategy": ("auto", "ddp", "fsdp"),
    "precision": ("auto", "32-true", "bf16-mixed", "16-mixed", "bf16-true"),
    "rope_extension": ("none", "linear", "ntk"),
    "split": ("train", "val", "test"),
    "kind": ("auto", "binary", "continuous"),
    "task": ("auto", "classification", "regression"),
    "attention": ("auto", "sdpa", "flash", "explicit"),
    "reference": ("float64", "float32"),
    "method": ("full", "local"),
    "what": ("logp", "entropy"),
}
COMMAND_CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("embed", "pool"): ("mean", "last", "none"),
    ("make-task", "label"): ("repeat", "gc", "motif"),
    ("make-task", "decoys"): ("shuffled", "none"),
    ("finetune", "strategy"): ("auto", "ddp"),
    ("check-precision", "precision"): ("bf16-mixed", "16-mixed", "bf16-true", "32-true"),
    # attribute's --method is not mutagenesis' (full|local): its own words, from the library
    ("attribute", "method"): ATTRIBUTE_METHODS,
    ("attribute", "baseline"): ATTRIBUTE_BASELINES,
}

_TYPE_NAMES = {int: "int", float: "float", str: "text", Path: "path", bool: ""}


def option_range(command: str, name: str) -> Bounds:
    """The range of numeric option ``name`` of ``command``: its library field's bounds
    (`field_range`), else NUMERIC_RANGES; a KeyError where neither says."""
    bounds = field_range(command, name) or NUMERIC_RANGES.get(name)
    if bounds is None:
        raise KeyError(
            f"goatdna {command}: numeric option {name!r} has no declared range; declare bounds "
            "on its library field (`bounded`, `range_owners`) or add it to NUMERIC_RANGES "
            "in goatdna/cli/common.py"
        )
    return bounds


def _range_callback(bounds: Bounds, then: Callable[..., Any] | None) -> Callable[..., Any]:
    def check(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        if value is not None and not bounds.accepts(value):
            flag = max(param.opts, key=len)  # the long name, as the user reads it in --help
            # a GoatDNAError (the app prints it as one line): the house's "--flag value: must"
            raise GoatDNAError(f"{flag} {value}: must be {bounds.describe()}")
        return then(ctx, param, value) if then is not None else value

    return check


def metavar_of(command: str, name: str, annotation: Any) -> str:
    """What --help shows after a flag: nothing for a switch, the choices, or a plain type name."""
    import typing

    choices = COMMAND_CHOICES.get((command, name), CHOICES.get(name))
    if choices:
        return "<" + "|".join(choices) + ">"
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is list:  # a repeatable option: one value per flag
        return metavar_of(command, "", args[0]) if args else "<text>"
    if args and typing.get_origin(annotation) is not typing.Annotated:  # X | None
        return metavar_of(command, name, args[0])
    base = _TYPE_NAMES.get(annotation, getattr(annotation, "__name__", "value"))
    return f"<{base}>" if base else ""


def with_declared_ranges(func: Callable[P, R]) -> Callable[P, R]:
    """``func`` with the range check of `option_range` on each numeric option, and --help's
    metavars (no ``<bool>`` on a switch, choices instead of ``<str>``, no Python types).

    Applied by the app to every command, so a command never declares a range itself; a numeric
    option missing from the tables is a KeyError when the app is built, so it cannot be forgotten.
    """
    import copy
    import typing

    command = func.__name__.replace("_", "-")
    hints = typing.get_type_hints(func, include_extras=True)
    parameters = []
    for param in inspect.signature(func).parameters.values():
        hint = hints.get(param.name, param.annotation)
        base, infos = hint, []
        if typing.get_origin(hint) is typing.Annotated:
            base, *infos = typing.get_args(hint)
        default = param.default
        info: typer.models.ParameterInfo | None
        if isinstance(default, typer.models.ParameterInfo):  # the `= typer.Option(...)` style
            default = copy.copy(default)
            info = default
        else:
            infos = [
                copy.copy(i) if isinstance(i, typer.models.ParameterInfo) else i for i in infos
            ]
            info = next((i for i in infos if isinstance(i, typer.models.ParameterInfo)), None)
        if info is not None:
            plain = next((a for a in typing.get_args(base) if a is not type(None)), base)
            if plain in (int, float) and typing.get_origin(base) is not list:
                declared = [i for i in infos if isinstance(i, Bounds)]  # a config field's own
                bounds = declared[0] if declared else option_range(command, param.name)
                info.callback = _range_callback(bounds, info.callback)
                info.help = f"{info.help or ''} [{bounds.describe()}]".strip()
            if info.metavar is None and isinstance(info, typer.models.OptionInfo):
                info.metavar = metavar_of(command, param.name, base)
            elif info.metavar is None:  # an argument: its name, as Click writes it in usage
                info.metavar = param.name.upper()
        metadata = (base, *infos)
        annotation = typing.Annotated[metadata] if infos else base
        parameters.append(param.replace(annotation=annotation, default=default))

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        return func(*args, **kwargs)

    wrapper.__signature__ = inspect.signature(func).replace(parameters=parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    return wrapper


# ----------------------------------------------------------------------------- config flags


def config_flags(
    func: Callable[P, R],
    owner: type,
    flags: Sequence[ConfigFlag],
    layout: Sequence[str | EllipsisType],
    *,
    own_defaults: bool = False,
    more: Mapping[type, Sequence[ConfigFlag]] | None = None,
) -> Callable[P, R]:
    """``func`` whose signature is its own parameters plus one option per `ConfigFlag` of the
    config dataclass ``owner`` (the flags arrive in its ``**flags``), in ``layout`` order: names
    of its parameters and flags, ``...`` for the flags not named (in their table's order).

    The library's table holds each flag once (name, config key, help); its type, bounds and
    metavar are the config field's (`bounds_of`, as `default_of` reads defaults); its default
    is None, which keeps the config's value. ``own_defaults``: ``owner`` is an options
    dataclass that only the flags fill (`goatdna.configfile.options_with_flags`, `prepare`), so
    each flag's default is its field's, shown in --help. ``more``: the flags of further
    dataclasses the command fills (a request's optional part: score-variants' calibration),
    after ``flags`` in the table order. Typer builds the command from this signature.
    """
    own = {
        p.name: p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        for p in inspect.signature(func).parameters.values()
        if p.kind is not inspect.Parameter.VAR_KEYWORD
    }
    tables = [(owner, flags), *(more or {}).items()]
    every = [(table_owner, flag) for table_owner, table in tables for flag in table]
    by_name = {flag.name: (table_owner, flag) for table_owner, flag in every}
    named = {item for item in layout if isinstance(item, str)}
    if set(own) - named or named - set(own) - set(by_name):
        raise KeyError(f"{func.__name__}: layout {layout} must name each own parameter once")
    parameters = []
    for item in layout:
        if isinstance(item, str) and item in own:
            parameters.append(own[item])
        else:
            chosen = (
                [by_name[item]]
                if isinstance(item, str)
                else [(o, flag) for o, flag in every if flag.name not in named]
            )
            parameters += [_flag_parameter(o, flag, own_defaults) for o, flag in chosen]
    func.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return func


def _flag_parameter(owner: type, flag: ConfigFlag, own_default: bool) -> inspect.Parameter:
    """One option of a config flag: ``X | None`` of the field's number, switch or path type
    (``int | None`` too; text otherwise: a choice, a list spec), its bounds in the annotation for
    the range check; its default None, or with ``own_default`` the field's (`default_of`)."""
    import typing

    section, name = field_owner(owner, flag.key)
    hint = field_type(owner, flag.key)
    members = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, UnionType) and len(members) == 1:
        hint = members[0]  # X | None
    plain = hint if hint in (int, float, bool, Path) else str
    help_text = flag.help_text
    if flag.name in OPTION_NAMES:
        info = option(flag.name, help_text)
    elif flag.names:
        info = typer.Option(*flag.names, help=help_text)
    else:
        spelled = flag.name.replace("_", "-")
        names = f"--{spelled}/--no-{spelled}" if plain is bool else f"--{spelled}"
        info = typer.Option(names, help=help_text)
    bounds = bounds_of(section, name) if plain in (int, float) else None
    metadata = (info,) if bounds is None else (info, bounds)
    args = (plain | None, *metadata)
    annotation = typing.Annotated[args]  # type: ignore[valid-type]
    default = default_of(section, name) if own_default else None
    return inspect.Parameter(
        flag.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


# ----------------------------------------------------------------------------- shared by several

# Options that several commands declare word for word (one declaration each, issue 42.3).
TrainCheckpointOpt = Annotated[Path, option("checkpoint", "A .ckpt written by `goatdna train`.")]
OutCacheDirOpt = Annotated[
    Path | None,
    option(
        "cache_dir",
        "Where a plain-gzip FASTA is decompressed once (default: OUT's folder/.goatdna-cache).",
    ),
]
