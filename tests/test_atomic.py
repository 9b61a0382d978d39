"""`goatdna.atomic.write_error`: one line for a full disk or a read-only folder, whatever
library wrote (safetensors, torch.save), and the commands that used to show their tracebacks
(`export`, the `finetune --mode probe` feature cache) driven onto a real full tmpfs."""

from __future__ import annotations

import errno
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from helpers import invoke

from goatdna.atomic import DiskFullError, atomic_path, write_error
from goatdna.errors import GoatDNAError


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (root only; skipped where mounting is not permitted)."""
    where = tmp_path / f"tmpfs-{uuid.uuid4().hex[:6]}"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0 or not os.path.ismount(where):
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)  # lazy: a held fd


def test_safetensors_and_torch_messages_become_one_line(tmp_path: Path) -> None:
    from safetensors import SafetensorError

    full = SafetensorError(
        "Error while serializing: I/O error: No space left on device (os error 28)"
    )
    assert isinstance(write_error(full, tmp_path / "w", "rerun"), DiskFullError)
    read_only = SafetensorError("Error while serializing: I/O error: (os error 30)")
    line = write_error(read_only, tmp_path / "w", "rerun")
    assert line is not None and "read-only filesystem" in str(line)
    denied = write_error(OSError(errno.EACCES, "Permission denied"), tmp_path / "w", "rerun")
    assert denied is not None and "permission denied" in str(denied)
    # torch's zip writer has no errno: a full disk only when the filesystem is nearly full
    short = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1 vs 2")
    assert write_error(short, tmp_path / "w", "rerun") is None  # plenty free on tmp_path
    assert write_error(ValueError("a bug"), tmp_path / "w", "rerun") is None


def test_torch_save_onto_a_full_disk_is_one_line(full_disk: Path) -> None:
    with (
        pytest.raises(DiskFullError, match="disk full while writing"),
        atomic_path(full_disk / "big.pt") as tmp,
    ):
        torch.save(torch.zeros(1 << 16), tmp)
    assert list(full_disk.iterdir()) == []


def _one_line(args: list[object]) -> str:
    result = invoke(args)
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stderr.startswith("error: disk full while writing"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    return result.stderr


def test_export_onto_a_full_disk(
    full_disk: Path, tiny_runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["export", "-c", tiny_runs["rope"] / "checkpoints" / "best.ckpt",
            "--out", full_disk / "exp"]  # fmt: skip
    result = invoke(args)
    assert result.exit_code == 2 and "the export needs about" in result.stderr  # before writing
    # where the estimate falls short, the write itself still ends in one line
    monkeypatch.setattr("goatdna.hf.export.check_free_space", lambda *a, **k: None)
    _one_line(args)
    assert list(full_disk.iterdir()) == []  # nothing half-written left


def test_probe_sweep_onto_a_full_disk(
    full_disk: Path, tiny_runs: dict[str, Path], synthetic_shards: Path, tmp_path: Path
) -> None:
    task = tmp_path / "task"
    made = invoke(["make-task", "--data", str(synthetic_shards), "--out", str(task),
                               "--label", "gc", "--max-train", "60", "--max-eval", "20"])  # fmt: skip
    assert made.exit_code == 0, made.output
    line = _one_line(["finetune", "-c", tiny_runs["rope"] / "checkpoints" / "best.ckpt",
                      "--train", task / "train.csv", "--val", task / "val.csv",
                      "--out", full_disk / "ft", "--no-progress", "--mode", "probe",
                      "--layer", "all", "--epochs", "1"])  # fmt: skip
    assert "probe_features" in line and "nothing of this run was kept" in line
    assert list(full_disk.iterdir()) == []  # no config.yaml, no empty cache/: rerun as it was


def test_read_only_is_one_line(tmp_path: Path) -> None:
    with (
        pytest.raises(GoatDNAError, match="read-only filesystem"),
        atomic_path(tmp_path / "x.bin") as tmp,
    ):
        raise OSError(errno.EROFS, "Read-only file system", str(tmp))
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def little_room(monkeypatch: pytest.MonkeyPatch) -> int:
    """Every filesystem reports 4 KiB free (what `goatdna.atomic.check_free_space` reads)."""
    monkeypatch.setattr("goatdna.atomic.free_bytes", lambda path: 4096)
    return 4096


def _refused_for_room(args: list[object]) -> str:
    result = invoke(args)
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs about" in lines[0] and "4.0 KiB free there" in lines[0]
    return lines[0]


def test_train_without_room_for_its_checkpoints_stops_before_work(
    little_room: int, synthetic_shards: Path, tmp_path: Path
) -> None:
    from tests.conftest import REPO_ROOT, TINY_RUN_OVERRIDES

    sets = [x for item in TINY_RUN_OVERRIDES for x in ("--set", item)]
    line = _refused_for_room(["train", "--config", REPO_ROOT / "configs" / "goat-tiny.yaml",
                              *sets, "--data", synthetic_shards, "--out", tmp_path / "run"])  # fmt: skip
    assert "this run's checkpoints" in line and "--out" in line
    assert not (tmp_path / "run").exists()


def test_probe_and_export_without_room_stop_before_work(
    little_room: int, tiny_runs: dict[str, Path], synthetic_shards: Path, tmp_path: Path
) -> None:
    task = tmp_path / "task"
    made = invoke(["make-task", "--data", str(synthetic_shards), "--out", str(task),
                               "--label", "gc", "--max-train", "60", "--max-eval", "20"])  # fmt: skip
    assert made.exit_code == 0, made.output
    best = tiny_runs["rope"] / "checkpoints" / "best.ckpt"
    line = _refused_for_room(["finetune", "-c", best, "--train", task / "train.csv",
                              "--val", task / "val.csv", "--out", tmp_path / "ft",
                              "--no-progress", "--mode", "probe", "--layer", "all"])  # fmt: skip
    assert "feature cache" in line
    assert not (tmp_path / "ft").exists()
    line = _refused_for_room(["export", "-c", best, "--out", tmp_path / "exp"])
    assert "the export" in line
    assert not (tmp_path / "exp").exists()


def test_atomic_writes_keep_the_usual_file_mode_and_leave_no_temp_files(tmp_path):
    from goatdna.atomic import atomic_write_text

    old = os.umask(0o022)
    try:
        target = atomic_write_text(tmp_path / "x" / "out.json", "{}\n")
    finally:
        os.umask(old)
    assert target.read_text() == "{}\n"
    assert target.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["out.json"]


def test_atomic_dir_swaps_a_whole_folder_or_keeps_the_old_one(tmp_path):
    from goatdna.atomic import atomic_dir

    out = tmp_path / "store"
    with atomic_dir(out) as folder:
        assert folder.parent == tmp_path and folder != out and not out.exists()
        (folder / "a.txt").write_text("first")
    assert (out / "a.txt").read_text() == "first"
    with pytest.raises(RuntimeError), atomic_dir(out) as folder:
        (folder / "a.txt").write_text("half")
        raise RuntimeError("killed mid-write")
    assert (out / "a.txt").read_text() == "first"  # the old folder, untouched
    with atomic_dir(out) as folder:
        (folder / "b.txt").write_text("second")
    assert sorted(p.name for p in out.iterdir()) == ["b.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["store"]  # no temporary or old folder left
