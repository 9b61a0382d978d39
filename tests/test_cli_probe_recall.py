"""`goatdna probe-recall`: its --out and --seed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import assert_ok, assert_one_error_line, invoke

from goatdna.locking import folder_lock

pytestmark = pytest.mark.usefixtures("one_thread")


def test_probe_recall_keeps_earlier_csvs_without_force_and_refuses_a_negative_seed(
    tiny_runs: dict[str, Path], synthetic_shards: Path, tmp_path: Path
) -> None:
    ckpt = str(tiny_runs["goat"] / "checkpoints" / "best.ckpt")
    out = tmp_path / "r"
    base = ["probe-recall", "-c", ckpt, "-d", str(synthetic_shards), "--segment", "10",
            "--trials", "2", "--distances", "5", "-o", str(out)]  # fmt: skip
    out.mkdir()
    (out / "recall_summary.csv").write_text("a user's earlier result\n")
    assert_one_error_line(invoke(base), "recall_summary.csv exists; pass --force")
    assert (out / "recall_summary.csv").read_text() == "a user's earlier result\n"
    with folder_lock(out, "--out"):
        assert_one_error_line(invoke([*base, "--force"]), f"pid {os.getpid()}")
    assert_one_error_line(invoke([*base, "--force", "--seed", "-1"]), "--seed")
    assert_ok(invoke([*base, "--force"]))
    assert (out / "recall_summary.csv").read_text().startswith("distance")
