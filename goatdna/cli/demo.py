"""`goatdna demo`: the whole pipeline on the embedded synthetic genome, on CPU, in minutes.

prepare (synthetic genome -> OUT/shards) -> train tiny GOAT and tiny RoPE (OUT/runs/{goat,rope})
-> evaluate, GC% study, plots, report (OUT/report/report.html).

Re-running is cheap and safe: prepared shards are reused, a finished run whose config matches is
kept, an interrupted run resumes from its last checkpoint, and the report is rebuilt only when a
checkpoint or a report option changed. ``--force`` redoes every stage.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from goatdna.analysis.report import INPUTS_FILE, ReportOptions, report_inputs
from goatdna.atomic import check_output_dir
from goatdna.cli.common import (
    ContextLengthsOpt,
    MaxEvalTokensOpt,
    NumSamplesOpt,
    PromptsOpt,
    ThreadsOpt,
    default_of,
    option,
)

if TYPE_CHECKING:  # the pipeline's modules load when the demo runs, not for `goatdna --help`
    from goatdna.data_prep import ShardedGenome
    from goatdna.training.config import RunConfig

DEFAULT_STEPS = 200
DEFAULT_GENOME_LENGTH = 2_000_000
DEFAULT_EVAL_TOKENS = 32_768  # the demo's cap: minutes on a CPU, not the report's default
MODELS = ("goat", "rope")


def _configs_dir() -> Path:
    """configs/ next to the package (a source checkout), else in the working directory."""
    import goatdna

    for candidate in (Path(goatdna.__file__).resolve().parents[1] / "configs", Path("configs")):
        if (candidate / "goat-tiny.yaml").is_file():
            return candidate
    from goatdna.errors import GoatDNAError

    raise GoatDNAError(
        "configs/goat-tiny.yaml not found: run the demo from a goatdna source checkout "
        "(pip install -e .) or pass --goat-config/--rope-config"
    )


def _prepare(
    out: Path, genome_length: int, force: bool, say: Callable[[str], None]
) -> ShardedGenome:
    from goatdna.data_prep import PrepareOptions, SyntheticGenomeConfig, prepare_synthetic

    shards = out / "shards"
    say(f"[bold]1/3 prepare[/bold] synthetic genome ({genome_length:,} bp) -> {shards}")
    fresh = not out.exists()
    try:
        return prepare_synthetic(
            shards,
            SyntheticGenomeConfig(total_length=genome_length),
            PrepareOptions(force=force, progress=True),
        )
    except BaseException:
        if fresh:  # the first stage kept nothing: no empty --out is left behind either
            with contextlib.suppress(OSError):
                out.rmdir()
        raise


def _same_config(run_dir: Path, config: RunConfig) -> bool:
    """True when run_dir/config.yaml describes exactly this RunConfig (provenance keys aside)."""
    from goatdna.configfile import to_dict
    from goatdna.errors import GoatDNAError
    from goatdna.training import load_run_config

    stored_path = run_dir / "config.yaml"
    if not stored_path.is_file():
        return False
    try:
        stored = load_run_config(stored_path)
    except GoatDNAError:
        return False
    return to_dict(stored) == to_dict(config)


def _train_one(
    name: str,
    config: RunConfig,
    shards: Path,
    run_dir: Path,
    force: bool,
    say: Callable[[str], None],
) -> None:
    from goatdna.errors import GoatDNAError
    from goatdna.training import train

    summary_path = run_dir / "summary.json"
    if not force and summary_path.is_file() and _same_config(run_dir, config):
        from goatdna.data_prep import ShardedGenome

        summary = json.loads(summary_path.read_text())
        if (
            summary.get("steps") == config.trainer.max_steps
            and summary.get("data_manifest_sha256") == ShardedGenome(shards).manifest_sha256
        ):
            say(
                f"  {name}: finished run found in {run_dir} (val loss {summary['val_loss']:.4f}); kept"
            )
            return
    resume = not force and (run_dir / "checkpoints" / "last.ckpt").is_file()
    say(
        f"  {name}: {'resuming' if resume else 'training'} {config.trainer.max_steps} steps "
        f"-> {run_dir}"
    )
    try:
        summary = train(config, shards, run_dir, resume=resume, force=not resume)
    except GoatDNAError as err:
        raise GoatDNAError(f"{err}; or rerun `goatdna demo --force` to start over") from None
    say(
        f"  {name}: val loss {summary['val_loss']:.4f} nats/base, "
        f"{summary['tokens_per_s']:,.0f} tokens/s, {summary['wall_seconds']:.0f} s"
    )


def _saved_inputs(path: Path, say: Callable[[str], None]) -> object:
    """What a kept report says it was built from; None if absent or damaged (said)."""
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        say(f"  {path}: damaged; building the report again")
        return None


def demo(
    out: Annotated[Path, option("out", "Directory for shards, runs and the report.")] = Path(
        "demo"
    ),
    steps: Annotated[
        int, typer.Option("--steps", help="Training steps per model.")
    ] = DEFAULT_STEPS,
    genome_length: Annotated[
        int, typer.Option("--genome-length", help="Synthetic genome size in bases.")
    ] = DEFAULT_GENOME_LENGTH,
    prompts: PromptsOpt = default_of(ReportOptions, "n_prompts"),
    num_samples: NumSamplesOpt = default_of(ReportOptions, "samples_per_prompt"),
    max_eval_tokens: MaxEvalTokensOpt = DEFAULT_EVAL_TOKENS,
    context_lengths: ContextLengthsOpt = None,
    goat_config: Annotated[
        Path | None, typer.Option("--goat-config", help="Default: configs/goat-tiny.yaml.")
    ] = None,
    rope_config: Annotated[
        Path | None, typer.Option("--rope-config", help="Default: configs/rope-tiny.yaml.")
    ] = None,
    overrides: Annotated[
        list[str] | None,
        option("overrides", "Config override for both runs, e.g. --set data.micro_batch_size=8."),
    ] = None,
    force: Annotated[bool, option("force", "Redo every stage from scratch.")] = False,
    threads: ThreadsOpt = None,
) -> None:
    """Prepare a synthetic genome, train tiny GOAT and RoPE, evaluate, and write the report."""
    from goatdna.analysis.evaluate import parse_context_lengths
    from goatdna.analysis.report import build_report
    from goatdna.cli.common import eval_token_cap
    from goatdna.cli.report import print_summary
    from goatdna.console import output_console
    from goatdna.errors import GoatDNAError
    from goatdna.runtime import choose_cpu_threads, using_cpu_threads
    from goatdna.training import load_run_config

    if steps < 1 or prompts < 1 or num_samples < 1:
        raise GoatDNAError("--steps, --prompts and --num-samples must be >= 1")
    cap = eval_token_cap(max_eval_tokens)
    console = output_console(stderr=True)
    say = console.print
    started = time.perf_counter()
    timings: dict[str, float] = {}
    check_output_dir(out, "--out")  # before any work: a folder we can write
    choice = choose_cpu_threads(threads)  # for every stage, training included
    say(f"torch CPU threads: {choice.reason}")
    with using_cpu_threads(choice):
        configs_dir = None if goat_config and rope_config else _configs_dir()
        paths = {
            "goat": goat_config or configs_dir / "goat-tiny.yaml",  # type: ignore[operator]
            "rope": rope_config or configs_dir / "rope-tiny.yaml",  # type: ignore[operator]
        }
        overrides = [*(overrides or []), f"trainer.max_steps={steps}"]
        configs = {name: load_run_config(paths[name], overrides) for name in MODELS}
        lengths = parse_context_lengths(context_lengths) if context_lengths else None

        t = time.perf_counter()
        genome = _prepare(out, genome_length, force, say)
        timings["prepare"] = time.perf_counter() - t

        t = time.perf_counter()
        say(f"[bold]2/3 train[/bold] tiny GOAT and tiny RoPE ({steps} steps each)")
        runs = []
        for name in MODELS:
            run_dir = out / "runs" / name
            _train_one(name, configs[name], genome.root, run_dir, force, say)
            runs.append(run_dir)
        timings["train"] = time.perf_counter() - t

        t = time.perf_counter()
        report_dir = out / "report"
        options = ReportOptions(
            runs=runs,
            data_dir=genome.root,
            out_dir=report_dir,
            context_lengths=lengths,
            max_eval_tokens=cap,
            n_prompts=prompts,
            samples_per_prompt=num_samples,
        )
        inputs = report_inputs(options) if (report_dir / "report.html").is_file() else None
        current = (
            not force
            and inputs is not None
            and _saved_inputs(report_dir / INPUTS_FILE, say) == json.loads(json.dumps(inputs))
        )
        say("[bold]3/3 report[/bold] evaluate, GC% study, plots -> " + str(report_dir))
        if current:
            say("  report is up to date with the checkpoints; kept")
        else:
            result = build_report(options, log=lambda msg: say(f"  {msg}"), progress=True)
            print_summary(result, console)
        timings["report"] = time.perf_counter() - t
        total = time.perf_counter() - started
        say(
            f"done in {total:.0f} s (prepare {timings['prepare']:.0f} s, train {timings['train']:.0f} s, "
            f"report {timings['report']:.0f} s): open {report_dir / 'report.html'}"
        )
