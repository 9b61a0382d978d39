"""`goatdna make-task`: its --seed, and --force replacing only a task folder under its lock."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import assert_ok, assert_one_error_line, invoke

from goatdna.locking import folder_lock

pytestmark = pytest.mark.usefixtures("one_thread")


def test_make_task_negative_seed_is_one_line(synthetic_shards: Path, tmp_path: Path) -> None:
    res = invoke(
        ["make-task", "--data", str(synthetic_shards), "--out", str(tmp_path / "t"),
              "--seed", "-1"],
    )  # fmt: skip
    assert_one_error_line(res, "--seed")
    assert not (tmp_path / "t").exists()


def test_make_task_replaces_only_a_task_folder_under_its_lock(
    synthetic_shards: Path, tmp_path: Path
) -> None:
    out = tmp_path / "t"
    args = ["make-task", "--data", str(synthetic_shards), "--out", str(out), "--label", "gc",
            "--window", "48", "--max-train", "20", "--max-eval", "10"]  # fmt: skip
    with folder_lock(out, "--out"):  # this process plays a first run still writing --out
        assert_one_error_line(invoke(args), f"pid {os.getpid()}")
    assert not out.exists()
    assert_ok(invoke(args))
    assert_one_error_line(invoke(args), "exists; pass --force")
    (out / "notes.txt").write_text("mine")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert_one_error_line(invoke([*args, "--force"]), "does not write (notes.txt)")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    (out / "notes.txt").unlink()
    assert_ok(invoke([*args, "--force", "--seed", "3"]))
    assert sorted(p.name for p in out.iterdir()) == [
        "task.json",
        "test.csv",
        "train.csv",
        "val.csv",
    ]
    assert '"seed": 3' in (out / "task.json").read_text()
    # the prepared data itself, or a folder holding it, is never the task's --out
    for where in (synthetic_shards, synthetic_shards.parent):
        res = invoke([*args[:4], str(where), *args[5:], "--force"])
        assert_one_error_line(res, "an input of this run")
    assert (synthetic_shards / "manifest.json").is_file()
