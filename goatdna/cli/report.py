"""`goatdna report`: compare trained runs (GOAT vs RoPE): NLL, extrapolation, GC%, prior plots."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from goatdna.analysis.report import ReportOptions
from goatdna.cli.common import (
    AcceleratorOpt,
    ContextLengthsOpt,
    DataOpt,
    MaxEvalTokensOpt,
    NumSamplesOpt,
    OneDeviceOpt,
    PromptsOpt,
    TemperatureOpt,
    ThreadsOpt,
    TopKOpt,
    default_of,
    option,
)


def report(
    run: Annotated[
        list[Path],
        typer.Option(
            "--run",
            help="A run directory from `goatdna train` (repeat: --run runs/goat --run runs/rope).",
        ),
    ],
    data: DataOpt,
    out: Annotated[Path, option("out", "Directory for the report files.")] = Path("report"),
    name: Annotated[
        list[str] | None,
        typer.Option(
            "--name",
            help="Model names in the tables (one per --run; default: run directory names).",
        ),
    ] = None,
    split: Annotated[str, option("split", "Split for NLL/bits per base.")] = default_of(
        ReportOptions, "split"
    ),
    context_lengths: ContextLengthsOpt = None,
    max_eval_tokens: MaxEvalTokensOpt = default_of(ReportOptions, "max_eval_tokens") or 0,
    prompts: PromptsOpt = default_of(ReportOptions, "n_prompts"),
    num_samples: NumSamplesOpt = default_of(ReportOptions, "samples_per_prompt"),
    temperature: TemperatureOpt = default_of(ReportOptions, "temperature"),
    top_k: TopKOpt = default_of(ReportOptions, "top_k"),
    seed: Annotated[int, option("seed", "Seed for prompt drawing and sampling.")] = default_of(
        ReportOptions, "seed"
    ),
    prior_layer: Annotated[
        int | None,
        typer.Option(
            "--prior-layer", help="GOAT layer whose prior is plotted (default: the last)."
        ),
    ] = None,
    recall_trials: Annotated[
        int,
        typer.Option(
            "--recall-trials", help="Recall probe: trials per distance (0 = skip the probe)."
        ),
    ] = default_of(ReportOptions, "recall_trials"),
    recall_distances: Annotated[
        str | None,
        typer.Option(
            "--recall-distances",
            help="Recall probe: filler lengths, e.g. 256,1024,4096 (default: two that fit the "
            "training length and 4x the training length).",
        ),
    ] = None,
    accelerator: AcceleratorOpt = default_of(ReportOptions, "device"),
    devices: OneDeviceOpt = "1",
    threads: ThreadsOpt = None,
) -> None:
    """Evaluate each run's best checkpoint, run the GC% study, write tables, plots and report.html."""
    from rich.markup import escape

    from goatdna.analysis.report_run import ReportRequest, report_from_request
    from goatdna.cli.common import eval_token_cap
    from goatdna.cli.report_summary import print_summary
    from goatdna.console import output_console

    # --recall-trials, --prompts and --num-samples: their ranges are checked as they are parsed
    # (`common.option_range`: `ReportOptions`' field bounds)
    request = ReportRequest(
        runs=tuple(run),
        data=data,
        out=out,
        names=tuple(name) if name else None,
        split=split,
        context_lengths=context_lengths,
        max_eval_tokens=eval_token_cap(max_eval_tokens),
        prompts=prompts,
        num_samples=num_samples,
        temperature=temperature,
        top_k=top_k,
        seed=seed,
        prior_layer=prior_layer,
        recall_trials=recall_trials,
        recall_distances=recall_distances,
        accelerator=accelerator,
        devices=devices,
        threads=threads,
    )
    console = output_console(stderr=True)
    result = report_from_request(
        request, log=lambda msg: console.print(f"[dim]report:[/dim] {escape(msg)}")
    )
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    print_summary(result, console)
    console.print(
        f"wrote {out / 'report.html'} and {len(result.files) - 1} other files in {out}",
        markup=False,
    )
