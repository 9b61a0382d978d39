"""The crash-drill point: armed only by its own variable, for one named point, at one count."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from goatdna import faults


def _run(env_extra: dict[str, str], code: str) -> int:
    env = {**os.environ, **env_extra}
    return subprocess.run([sys.executable, "-c", code], env=env, timeout=60).returncode


def test_arm_names_only_known_points() -> None:
    assert faults.arm("train.checkpoint_saved", 3) == {faults.CRASH_ENV: "train.checkpoint_saved:3"}
    with pytest.raises(ValueError, match="unknown crash point"):
        faults.arm("train.nowhere", 1)


def test_an_armed_point_kills_at_its_count_and_no_other_point_does() -> None:
    code = (
        "from goatdna import faults\n"
        "faults.crash_point('prepare.record_journaled', 5)\n"  # another point: ignored
        "faults.crash_point('train.checkpoint_saved', 1)\n"  # below the count: ignored
        "faults.crash_point('train.checkpoint_saved', 2)\n"  # reached: SIGKILL
        "raise SystemExit(3)\n"
    )
    assert _run(faults.arm("train.checkpoint_saved", 2), code) == -9
    assert _run({}, code) == 3


def test_an_accumulating_point_kills_once_the_running_total_reaches_its_count() -> None:
    code = (
        "from goatdna import faults\n"
        "for _ in range(4):\n"
        "    faults.crash_point_add('prepare.bases_written', 10)\n"
        "raise SystemExit(3)\n"
    )
    assert _run(faults.arm("prepare.bases_written", 40), code) == -9
    assert _run(faults.arm("prepare.bases_written", 41), code) == 3
