"""`goatdna demo`: the whole pipeline on the embedded synthetic genome, on CPU, in minutes.

prepare (synthetic genome -> OUT/shards) -> train tiny GOAT and tiny RoPE (OUT/runs/{goat,rope})
-> evaluate, GC% study, plots, report (OUT/report/report.html).

Re-running is cheap and safe: prepared shards are reused, a finished run whose config matches is
kept, an interrupted run resumes from its last checkpoint, and the report is rebuilt only when a
checkpoint or a report option changed. ``--force`` redoes every stage.

The stages and their reuse rules are the library's: `goatdna.training.demo` (shards and runs)
and `goatdna.analysis.report` (`report_is_current`, `build_report`). This command joins them
because only the CLI may import both rooms (the import contracts in pyproject.toml).
"""

from __future__ import annotations

import time
from itertools import pairwise
from pathlib import Path
from typing import Annotated

import typer

from goatdna.analysis.report import ReportOptions
from goatdna.cli.common import (
    ContextLengthsOpt,
    MaxEvalTokensOpt,
    NumSamplesOpt,
    PromptsOpt,
    ThreadsOpt,
    default_of,
    option,
)

# the demo's sizes (flag defaults here: importing goatdna.training loads torch, and --help must not)
DEFAULT_STEPS = 200
DEFAULT_GENOME_LENGTH = 2_000_000
DEFAULT_EVAL_TOKENS = 32_768  # the demo's cap: minutes on a CPU, not the report's default


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
    from goatdna.analysis.report import build_report, report_is_current
    from goatdna.atomic import check_output_dir
    from goatdna.cli.common import eval_token_cap
    from goatdna.cli.report_summary import print_summary
    from goatdna.console import output_console
    from goatdna.runtime import choose_cpu_threads, using_cpu_threads
    from goatdna.training.demo import demo_configs, prepare_demo_genome, train_demo_runs

    # --steps, --prompts and --num-samples: their ranges are checked as they are parsed
    # (`common.NUMERIC_RANGES`)
    cap = eval_token_cap(max_eval_tokens)
    console = output_console(stderr=True)
    say = console.print
    started = time.perf_counter()
    check_output_dir(out, "--out")  # before any work: a folder we can write
    choice = choose_cpu_threads(threads)  # for every stage, training included
    say(f"torch CPU threads: {choice.reason}")
    with using_cpu_threads(choice):
        configs = demo_configs(goat_config, rope_config, overrides or [], steps)
        lengths = parse_context_lengths(context_lengths) if context_lengths else None
        marks = [time.perf_counter()]  # each stage's start, then the end
        say(f"[bold]1/3 prepare[/bold] synthetic genome ({genome_length:,} bp) -> {out / 'shards'}")
        genome = prepare_demo_genome(out, genome_length, force)
        marks.append(time.perf_counter())
        say(f"[bold]2/3 train[/bold] tiny GOAT and tiny RoPE ({steps} steps each)")
        runs = train_demo_runs(configs, genome, out / "runs", force, say)
        marks.append(time.perf_counter())
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
        current = not force and report_is_current(options, say)
        say("[bold]3/3 report[/bold] evaluate, GC% study, plots -> " + str(report_dir))
        if current:
            say("  report is up to date with the checkpoints; kept")
        else:
            result = build_report(options, log=lambda msg: say(f"  {msg}"), progress=True)
            print_summary(result, console)
        marks.append(time.perf_counter())
        prepare_s, train_s, report_s = (b - a for a, b in pairwise(marks))
        say(
            f"done in {marks[-1] - started:.0f} s (prepare {prepare_s:.0f} s, train "
            f"{train_s:.0f} s, report {report_s:.0f} s): open {report_dir / 'report.html'}"
        )
