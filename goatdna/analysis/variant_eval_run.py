"""`goatdna eval-variants` from its checked options to its outputs: the orchestration the command
calls (the flags stay in `goatdna.cli.eval_variants`, the readers in
`goatdna.inference.variant_io`, the metrics in `goatdna.analysis.variant_eval`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from goatdna.analysis.variant_eval import (
    EvalOptions,
    VariantEvaluation,
    evaluate_variants,
    plot_paths,
    write_metrics,
)
from goatdna.errors import GoatDNAError

if TYPE_CHECKING:
    import pandas as pd

Echo = Callable[[str, bool], None]
"""(text, to stderr): how the command prints its notes and ``wrote`` lines."""


def check_eval_outputs(out: Path | None, plots: Path | None) -> None:
    """--out and --plots, before any work: the one suffix rule, a file or folder we can write."""
    from goatdna.atomic import check_output_file
    from goatdna.formats import output_format

    if out is not None:
        output_format(out, (".tsv", ".json"))
        check_output_file(out, "--out")
    if plots is not None:
        if plots.exists() and not plots.is_dir():
            raise GoatDNAError(f"--plots {plots} is a file; give a folder for the plots")
        check_output_file(plots / "roc.png", "--plots")


def run_eval(
    read: Callable[[], pd.DataFrame],
    options: EvalOptions,
    out: Path | None,
    plots: Path | None,
    force: bool,
    inputs: Sequence[Path | None],
    progress: Callable[[int, int], None] | None,
    echo: Echo,
) -> VariantEvaluation:
    """Lock the outputs (one writer each, held from before the first read), claim --out
    (``--force``), ``read`` the joined scores and labels, evaluate, print the table, then write
    the metrics and the plots (claimed once the label kind says which plots there are)."""
    from goatdna.workdir import claim_output, output_lock

    with ExitStack() as locks:
        if out is not None:
            locks.enter_context(output_lock(out, True))
        if plots is not None:
            locks.enter_context(output_lock(plots, True, "--plots"))
        if out is not None:
            claim_output([out], force, inputs=list(inputs))
        evaluation = evaluate_variants(read(), options, progress)
        for note in evaluation.notes:
            echo(f"note: {note}", True)
        if plots is not None:
            claim_output(plot_paths(evaluation.kind, plots), force, option="--plots",
                         inputs=list(inputs))  # fmt: skip
        print_evaluation(evaluation)
        if out is not None:
            write_metrics(evaluation, out)
            echo(f"wrote {out}", False)
        if plots is not None:
            from goatdna.analysis.variant_plots import plot_evaluation

            for path in plot_evaluation(evaluation, plots):
                echo(f"wrote {path}", False)
    return evaluation


def print_evaluation(evaluation: VariantEvaluation) -> None:
    """The counts line and the metrics table on the output console (eval-variants' stdout)."""
    from rich.table import Table

    from goatdna.console import output_console

    console = output_console()
    unscored = ", ".join(f"{k} {v:,}" for k, v in evaluation.unscored.items()) or "none"
    console.print(
        f"{evaluation.rows:,} rows: {evaluation.evaluated:,} evaluated, "
        f"{sum(evaluation.unscored.values()):,} unscored ({unscored}), "
        f"{evaluation.unlabelled:,} unlabelled"
    )
    intervals = (
        f"{evaluation.level:.0%} bootstrap intervals, {evaluation.resamples} resamples"
        if evaluation.resamples
        else "no intervals"
    )
    table = Table(
        title=f"score {evaluation.score} against the {evaluation.kind} label "
        f"{evaluation.label!r} ({intervals})"
    )
    for name in ("subset", "metric", "value", "interval", "n", "positives"):
        table.add_column(name, justify="left" if name in ("subset", "metric") else "right",
                         no_wrap=name == "metric")  # fmt: skip
    for row in evaluation.metrics:
        subset = "all" if row.subset_column == "all" else f"{row.subset_column}={row.subset}"
        interval = "" if math.isnan(row.low) else f"[{row.low:.3f}, {row.high:.3f}]"
        value = "n/a" if math.isnan(row.value) else f"{row.value:.3f}"
        positives = "" if row.n_positive is None else f"{row.n_positive:,}"
        table.add_row(subset, row.metric, value, interval, f"{row.n:,}", positives)
    console.print(table)
