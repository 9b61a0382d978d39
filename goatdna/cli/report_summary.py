"""The report's summary as `goatdna report` and `goatdna demo` print it after building one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from goatdna.cli.common import print_frame

if TYPE_CHECKING:  # rich loads when a table is printed, not for `goatdna --help`
    from rich.console import Console

    from goatdna.analysis.report import ReportResult


def print_summary(result: ReportResult, console: Console | None = None) -> None:
    """The report's summary table (one row per model) as a rich table, formatted as in report.md."""
    from goatdna.analysis.report_frames import SUMMARY_FORMATS, with_intervals
    from goatdna.console import output_console

    print_frame(
        with_intervals(result.summary, SUMMARY_FORMATS),
        "summary (NLL in nats/base; in brackets: 95% bootstrap intervals)",
        SUMMARY_FORMATS,
        console,
    )
    out = console or output_console()
    for line in result.differences:  # so a difference inside the noise is not read as a result
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    if len(result.summary) > 1:
        out.print("tokens_per_s: each run's own training, not measured side by side", markup=False)
