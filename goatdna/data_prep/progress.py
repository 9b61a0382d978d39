"""Console messages and rich progress bars for long data jobs (one bar per contig).

Messages go to stderr so that stdout stays clean for tables and pipes. Bars only render on a
terminal; in a log the same progress comes as a timed line with the rate and time left
(`goatdna.progress.ProgressLines`, shared with training and inference).
"""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from goatdna.console import output_console
from goatdna.progress import ProgressLines

MAX_CONTIG_BARS = 40


class Reporter:
    """Says what the data path is doing; ``enabled=False`` silences the bars, not the messages."""

    def __init__(self, enabled: bool = True, console: Console | None = None) -> None:
        self.console = console or output_console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self.log_lines = enabled and not self.console.is_terminal  # a log: timed lines instead
        self._lines: ProgressLines | None = None
        self._progress: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        self._byte_bars: list[Progress] = []

    def message(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def _new_progress(self, *columns) -> Progress:
        progress = Progress(*columns, console=self.console, disable=not self.enabled)
        progress.start()
        return progress

    def bytes_progress(self, label: str, total: int) -> Callable[[int], None]:
        """A one-off bar over ``total`` bytes; returns ``advance(n)``; closes when full."""
        if self.log_lines:
            lines = ProgressLines(label, total, "bytes", self.console)

            def advance_lines(n: int) -> None:
                lines.advance(n)
                if lines.completed >= total:
                    lines.close()

            return advance_lines
        progress = self._new_progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
        )
        task = progress.add_task(label, total=total)
        self._byte_bars.append(progress)
        seen = 0

        def advance(n: int) -> None:
            nonlocal seen
            seen += n
            progress.advance(task, n)
            if seen >= total:
                progress.stop()

        return advance

    def start_contigs(self, totals: dict[str, int], completed: dict[str, int]) -> None:
        if self.log_lines:
            self._lines = ProgressLines(
                f"{len(totals)} contig(s)", sum(totals.values()), "bp", self.console,
                start=sum(completed.values()),
            )  # fmt: skip
            return
        self._progress = self._new_progress(
            TextColumn("{task.description:>20}"),
            BarColumn(),
            TextColumn("{task.percentage:>5.1f}%"),
            TextColumn("{task.completed:,}/{task.total:,} bp"),
            TimeRemainingColumn(),
        )
        if len(totals) > MAX_CONTIG_BARS:  # e.g. hg38 with every scaffold: one bar for all
            task = self._progress.add_task(
                f"{len(totals)} contigs",
                total=sum(totals.values()),
                completed=sum(completed.values()),
            )
            self._tasks = dict.fromkeys(totals, task)
            return
        for name, total in totals.items():
            self._tasks[name] = self._progress.add_task(
                name[:20], total=total, completed=completed.get(name, 0)
            )

    def advance(self, name: str, n: int) -> None:
        if self._lines is not None:
            self._lines.advance(n)
        if self._progress is not None and name in self._tasks:
            self._progress.advance(self._tasks[name], n)

    def stop_contigs(self) -> None:
        if self._lines is not None:
            self._lines.close()
            self._lines = None
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
            self._tasks.clear()

    def close(self) -> None:
        """Stop every bar (also those an error left unfinished)."""
        self.stop_contigs()
        for progress in self._byte_bars:
            progress.stop()
        self._byte_bars.clear()
