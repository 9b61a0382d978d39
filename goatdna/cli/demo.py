"""`goatdna demo`: the whole pipeline on the embedded synthetic genome, on CPU, in minutes.

prepare (synthetic genome -> OUT/shards) -> train tiny GOAT and tiny RoPE (OUT/runs/{goat,rope})
-> evaluate, GC% study, plots, report (OUT/report/report.html).

Re-running is cheap and safe: prepared shards are reused, a finished run whose config matches is
kept, an interrupted run resumes from its last checkpoint, and the report is rebuilt only when a
checkpoint or a report option changed. ``--force`` redoes every stage.

The stages and their reuse rules are the library's: `goatdna.training.demo` (`demo_stages`:
threads, configs, shards and runs) and `goatdna.analysis.report` (`demo_report`: kept when
`report_is_current`, else `build_report`). This command joins them because only the CLI may
import both rooms (the import contracts in pyproject.toml).
"""

from __future__ import annotations

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
    from goatdna.analysis.report import demo_report
    from goatdna.cli.common import eval_token_cap
    from goatdna.cli.report_summary import print_summary
    from goatdna.console import output_console
    from goatdna.training.demo import DemoRequest, demo_stages

    # --steps, --prompts and --num-samples: their ranges are checked as they are parsed
    # (`common.option_range`: the library field's bounds, else `common.NUMERIC_RANGES`)
    cap = eval_token_cap(max_eval_tokens)
    console = output_console(stderr=True)
    request = DemoRequest(
        out, steps, genome_length, goat_config, rope_config, tuple(overrides or ()), force, threads
    )
    with demo_stages(request, console.print) as demo:
        lengths = parse_context_lengths(context_lengths) if context_lengths else None
        genome, runs = demo.prepare_and_train()
        options = ReportOptions(
            runs=runs,
            data_dir=genome.root,
            out_dir=out / "report",
            context_lengths=lengths,
            max_eval_tokens=cap,
            n_prompts=prompts,
            samples_per_prompt=num_samples,
        )
        result = demo_report(options, force, console.print)
        if result is not None:
            print_summary(result, console)
        console.print(demo.done(out / "report" / "report.html"))
