"""Progress of long work, on a terminal and in a log: the one behaviour every loop shares.

On a terminal each loop draws its own rich bar (with the time left). When stderr is not a
terminal (a log file, a pipe, a CI job) a bar draws nothing until it ends, so a step of minutes
looked dead; there `ProgressLines` prints one plain line every `INTERVAL_S` seconds instead:

    train: 120/200 steps (60%), 2.1 steps/s, 57 s elapsed, ~38 s left  loss 1.234

and one line when the work ends. The data path (`goatdna.data_prep.progress.Reporter`), the
training loop (`goatdna.training.loop.StepProgress`), the inference loops
(`goatdna.inference.loop.rank_zero_progress`) and the report's stages (`progress_bar`) all go
through it, so a log reads the same whichever command wrote it.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

INTERVAL_S = 5.0  # seconds between two lines in a log: often enough to see work move


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s`` or ``2 h 07 min``: short, and exact enough for an estimate."""
    if not math.isfinite(seconds):
        return "?"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class ProgressLines:
    """Plain progress lines for a log: ``label: done/total unit (pct), rate, elapsed, left``.

    ``update``/``advance`` print at most one line per ``interval`` seconds (default `INTERVAL_S`;
    the first one after the first interval, so work of a few seconds stays silent), ``close`` prints the last one.
    The rate counts only the work done here (a resumed run's ``start`` is not), so the time left
    is an honest estimate. ``clock`` is for tests.
    """

    def __init__(
        self,
        label: str,
        total: int | None,
        unit: str,
        console: Console,
        start: int = 0,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.console = console
        self.completed = start
        self._start = start
        self._interval = INTERVAL_S if interval is None else interval
        self._clock = clock
        self._began = clock()
        self._last = self._began
        self._closed = False
        self._printed: int | None = None  # completed units at the last line printed
        self.info = ""

    def line(self) -> str:
        """The line as it would print now."""
        elapsed = self._clock() - self._began
        done = self.completed - self._start
        rate = done / elapsed if elapsed > 0 else math.nan
        parts = [
            f"{self.completed:,}" + (f"/{self.total:,}" if self.total else "") + f" {self.unit}"
        ]
        if self.total:
            parts[0] += f" ({100 * self.completed / self.total:.0f}%)"
        if math.isfinite(rate) and rate > 0:
            parts.append(
                f"{rate:,.0f} {self.unit}/s" if rate >= 100 else f"{rate:.3g} {self.unit}/s"
            )
        parts.append(f"{duration(elapsed)} elapsed")
        if self.total and self.completed < self.total and math.isfinite(rate) and rate > 0:
            parts.append(f"~{duration((self.total - self.completed) / rate)} left")
        text = f"{self.label}: " + ", ".join(parts)
        return f"{text}  {self.info}" if self.info else text

    def update(self, completed: int, info: str | None = None) -> None:
        self.completed = completed
        if info is not None:
            self.info = info
        now = self._clock()
        if now - self._last >= self._interval:
            self._last = now
            self._print()

    def advance(self, n: int = 1) -> None:
        self.update(self.completed + n)

    def close(self) -> None:
        """The last line (once, and not when the last update printed it already), so a log says
        how the work ended and how long it took; work that ended before its first line stays
        silent (a command's own lines, an ``error:`` say, stand alone)."""
        if not self._closed:
            self._closed = True
            if self._printed is not None and self._printed != self.completed:
                self._print()

    def _print(self) -> None:
        self._printed = self.completed
        self.console.print(self.line(), markup=False, highlight=False, soft_wrap=True)


def stderr_console() -> Console:
    from goatdna.console import output_console

    return output_console(stderr=True)


@contextlib.contextmanager
def progress_bar(
    label: str,
    total: int,
    unit: str,
    enabled: bool = True,
    console: Console | None = None,
) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)`` over ``total`` units: a transient rich bar with the time left on a
    terminal, `ProgressLines` in a log, nothing when not ``enabled``."""
    if not enabled:
        yield lambda _n: None
        return
    console = console or stderr_console()
    if not console.is_terminal:
        lines = ProgressLines(label, total, unit, console)
        try:
            yield lines.advance
        finally:
            lines.close()
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        Task,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class Rate(ProgressColumn):  # units per second, as the log lines give it
        def render(self, task: Task) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:,.0f} {unit}/s" if speed else "")

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        Rate(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)
