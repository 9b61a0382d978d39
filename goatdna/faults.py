"""Crash drills: the one place where a test makes a goatdna process die at a chosen point.

Resume guarantees ("a ``kill -9`` at any moment loses nothing finished") can only be tested by
killing a real process at a known moment. Instead of each module reading its own environment
variable, the code under test calls :func:`crash_point` at the named points below, and a test
arms exactly one of them for a subprocess with :func:`arm`::

    env = {**os.environ, **faults.arm("prepare.record_journaled", 7)}

``GOATDNA_CRASH_AT=<point>:<count>`` sends SIGKILL to the process when the point's count reaches
``count``. Unarmed, a crash point costs one dictionary lookup. Nothing in normal use sets it.
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "GOATDNA_CRASH_AT"

POINTS: dict[str, str] = {
    "prepare.record_journaled": "records this process has journaled as done",
    "prepare.bases_written": "bases this process has written, before their record is journaled",
    "predict.unit_saved": "units of rows `goatdna predict` has saved to its work folder",
    "attribute.unit_saved": "units of sequences `goatdna attribute` has saved to its work folder",
    "score_track.block_saved": "blocks of bases this `score-track` process has saved",
    "train.checkpoint_saved": "the optimizer step whose last.ckpt is now on disk",
}
"""Every crash point, and what its count counts."""

_counts: dict[str, int] = {}  # per-process totals for the points whose count accumulates


def arm(point: str, count: int) -> dict[str, str]:
    """The environment entry that arms ``point`` at ``count`` (for a subprocess's ``env``)."""
    if point not in POINTS:
        raise ValueError(f"unknown crash point {point!r}; known: {', '.join(POINTS)}")
    return {CRASH_ENV: f"{point}:{count}"}


def _armed(point: str) -> int | None:
    name, _, count = os.environ.get(CRASH_ENV, "").rpartition(":")
    return int(count) if name == point and count.isdigit() else None


def crash_point(point: str, value: int) -> None:
    """SIGKILL this process if ``point`` is armed and ``value`` has reached its count."""
    limit = _armed(point)
    if limit is not None and value >= limit:
        os.kill(os.getpid(), signal.SIGKILL)


def crash_point_add(point: str, n: int) -> None:
    """Add ``n`` to this process's running total for ``point``, then check it as crash_point."""
    if _armed(point) is None:
        return
    _counts[point] = _counts.get(point, 0) + n
    crash_point(point, _counts[point])
