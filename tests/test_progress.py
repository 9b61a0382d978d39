"""`goatdna.progress`: long work says how far it is and how long is left, in a log too (the
thread count the CLI picks is tested in test_runtime.py)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

import goatdna.progress
from goatdna.progress import ProgressLines, duration, progress_bar


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _log() -> tuple[Console, io.StringIO]:
    text = io.StringIO()
    return Console(file=text, force_terminal=False, width=80), text


def test_progress_lines_print_rate_and_time_left_every_interval() -> None:
    console, text = _log()
    clock = Clock()
    lines = ProgressLines("train", 100, "steps", console, start=20, interval=5.0, clock=clock)
    clock.now += 1
    lines.update(25)
    assert text.getvalue() == ""  # a few seconds of work stay silent
    clock.now += 5  # 6 s in: 30 steps done here (the 20 resumed ones do not count) -> 5/s
    lines.update(50, "loss 1.2")
    assert text.getvalue().splitlines() == [
        "train: 50/100 steps (50%), 5 steps/s, 6 s elapsed, ~10 s left  loss 1.2"
    ]
    clock.now += 1
    lines.update(55)  # within the interval: no line
    clock.now += 94
    lines.close()
    lines.close()  # once
    last = text.getvalue().splitlines()[1:]
    assert last == ["train: 55/100 steps (55%), 0.347 steps/s, 1 min 41 s elapsed, ~2 min 10 s left"
                    "  loss 1.2"]  # fmt: skip
    assert duration(7300) == "2 h 01 min"
    done = ProgressLines("eval", 8, "windows", console, interval=5.0, clock=clock)
    clock.now += 6
    done.update(8)  # all of it in one update that printed: close does not repeat the line
    done.close()
    assert [line for line in text.getvalue().splitlines() if line.startswith("eval")] == [
        "eval: 8/8 windows (100%), 1.33 windows/s, 6 s elapsed"
    ]


def test_progress_bar_in_a_log_prints_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(goatdna.progress, "INTERVAL_S", 0.0)
    console, text = _log()
    with progress_bar("score", 4, "windows", console=console) as advance:
        for _ in range(4):
            advance(1)
    got = text.getvalue().splitlines()
    assert len(got) == 4 and got[0].startswith("score: 1/4 windows (25%), ")
    assert all("left" in line for line in got[:3]) and got[-1].startswith("score: 4/4 windows")
    with progress_bar("off", 4, "windows", enabled=False, console=console) as advance:
        advance(4)
    assert len(text.getvalue().splitlines()) == 4  # the last update's line is not repeated


def test_training_and_inference_loops_print_lines_in_a_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from goatdna.inference.loop import rank_zero_progress
    from goatdna.training.loop import StepProgress

    monkeypatch.setattr(goatdna.progress, "INTERVAL_S", 0.0)
    console, text = _log()
    monkeypatch.setattr(goatdna.progress, "stderr_console", lambda: console)
    steps = StepProgress(True, 10, 4, "finetune")
    steps.update(5, train_loss=1.25, tokens_per_s=12345.6)
    steps.close()
    assert text.getvalue().splitlines()[0].startswith("finetune: 5/10 steps (50%), ")
    assert text.getvalue().splitlines()[0].endswith("loss 1.25  tok/s 12,346")

    class Rank:
        def __init__(self, rank: int) -> None:
            self.global_rank = rank

    with rank_zero_progress(Rank(1), 3, "score", "variants") as advance:  # type: ignore[arg-type]
        advance(3)
    assert len(text.getvalue().splitlines()) == 1  # other ranks say nothing
    with rank_zero_progress(Rank(0), 3, "score", "variants") as advance:  # type: ignore[arg-type]
        advance(2)
    assert "score: 2/3 variants (67%)" in text.getvalue() and "left" in text.getvalue()
