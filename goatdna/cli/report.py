"""`goatdna report`: compare trained runs (GOAT vs RoPE): NLL, extrapolation, GC%, prior plots."""

from __future__ import annotations

from pathlib import Path

import typer


def report(
    run: list[Path] = typer.Option(
        ...,
        "--run",
        "-r",
        help="A run directory from `goatdna train` (repeat: --run runs/goat --run runs/rope).",
    ),
    data: Path = typer.Option(
        ..., "--data", "-d", help="Shard directory the runs were trained on."
    ),
    out: Path = typer.Option(Path("report"), "--out", "-o", help="Directory for the report files."),
    name: list[str] | None = typer.Option(
        None,
        "--name",
        help="Model names in the tables (one per --run; default: run directory names).",
    ),
    split: str = typer.Option("val", "--split", help="Split for NLL/bits per base."),
    context_lengths: str | None = typer.Option(
        None,
        "--context-lengths",
        help="Comma-separated evaluation context lengths (default: training length x 1, 2, 4, 8).",
    ),
    max_eval_tokens: int = typer.Option(
        1_048_576,
        "--max-eval-tokens",
        help="Bases scored per context length and model (0 = the whole split).",
    ),
    prompts: int = typer.Option(100, "--prompts", help="GC study: number of test-split prompts."),
    samples: int = typer.Option(
        1, "--samples", help="GC study: continuations per prompt and model."
    ),
    temperature: float = typer.Option(1.0, "--temperature", help="GC study: sampling temperature."),
    top_k: int | None = typer.Option(None, "--top-k", help="GC study: top-k sampling (1..4)."),
    seed: int = typer.Option(0, "--seed", help="Seed for prompt drawing and sampling."),
    prior_layer: int | None = typer.Option(
        None, "--prior-layer", help="GOAT layer whose prior is plotted (default: the last)."
    ),
    recall_trials: int = typer.Option(
        16, "--recall-trials", help="Recall probe: trials per distance (0 = skip the probe)."
    ),
    recall_distances: str | None = typer.Option(
        None,
        "--recall-distances",
        help="Recall probe: filler lengths, e.g. 256,1024,4096 (default: two that fit the training "
        "length and 4x the training length).",
    ),
    device: str = typer.Option("cpu", "--device", help="torch device, e.g. cpu or cuda."),
) -> None:
    """Evaluate each run's best checkpoint, run the GC% study, write tables, plots and report.html."""
    from rich.console import Console
    from rich.markup import escape

    from goatdna.analysis.evaluate import parse_context_lengths
    from goatdna.analysis.generate import SamplingOptions
    from goatdna.analysis.recall import parse_distances
    from goatdna.analysis.report import ReportOptions, build_report
    from goatdna.errors import GoatDNAError

    if max_eval_tokens < 0:
        raise GoatDNAError(f"--max-eval-tokens must be >= 0, got {max_eval_tokens}")
    if recall_trials < 0:
        raise GoatDNAError(f"--recall-trials must be >= 0, got {recall_trials}")
    distances = parse_distances(recall_distances) if recall_distances else None
    if prompts < 1 or samples < 1:
        raise GoatDNAError("--prompts and --samples must be >= 1")
    SamplingOptions(temperature=temperature, top_k=top_k, num_samples=samples).validate()
    console = Console(stderr=True)
    result = build_report(
        ReportOptions(
            runs=list(run),
            data_dir=data,
            out_dir=out,
            names=list(name) if name else None,
            split=split,
            context_lengths=parse_context_lengths(context_lengths) if context_lengths else None,
            max_eval_tokens=max_eval_tokens or None,
            n_prompts=prompts,
            samples_per_prompt=samples,
            temperature=temperature,
            top_k=top_k,
            seed=seed,
            prior_layer=prior_layer,
            recall_trials=recall_trials,
            recall_distances=distances,
            device=device,
        ),
        log=lambda msg: console.print(f"[dim]report:[/dim] {escape(msg)}"),
    )
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    console.print(result.summary.to_string(index=False), markup=False, highlight=False)
    console.print(
        f"wrote {out / 'report.html'} and {len(result.files) - 1} other files in {out}",
        markup=False,
    )
