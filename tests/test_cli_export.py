"""`goatdna export`: --force keeps the files goatdna did not write, an occupied or input --out
is refused, a full disk is one line and leaves nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import assert_ok, assert_one_error_line, invoke

from goatdna.locking import folder_lock

pytestmark = pytest.mark.usefixtures("one_thread")


def test_export_force_keeps_the_files_goatdna_did_not_write(backbone: Path, tmp_path: Path) -> None:
    out = tmp_path / "hf"
    assert_ok(invoke(["export", "-c", str(backbone), "--out", str(out)]))
    (out / "NOTES.md").write_text("my notes\n")
    (out / "eval").mkdir()
    (out / "eval" / "res.csv").write_text("metric,value\n")
    res = invoke(["export", "-c", str(backbone), "--out", str(out), "--force"])
    assert_ok(res)
    assert (out / "NOTES.md").read_text() == "my notes\n"  # --force used to delete both
    assert (out / "eval" / "res.csv").read_text() == "metric,value\n"
    assert "kept 2 file(s)" in res.stderr and "NOTES.md" in res.stderr, res.stderr
    assert (out / "model.safetensors").is_file() and (out / "config.json").is_file()


def test_export_refuses_its_input_and_a_second_run(backbone: Path, tmp_path: Path) -> None:
    out = tmp_path / "hf"
    assert_ok(invoke(["export", "-c", str(backbone), "--out", str(out)]))
    before = (out / "model.safetensors").stat().st_mtime_ns
    assert_one_error_line(
        invoke(["export", "-c", str(out), "--out", str(out), "--force"]),
        "also an input",
    )
    assert (out / "model.safetensors").stat().st_mtime_ns == before
    other = tmp_path / "hf2"
    with folder_lock(other, "--out"):  # this process plays the first run
        assert_one_error_line(
            invoke(["export", "-c", str(backbone), "--out", str(other)]),
            f"pid {os.getpid()}",
        )
    assert not other.exists()


def test_export_disk_full_is_one_line_and_leaves_nothing(
    backbone: Path, tmp_path: Path, monkeypatch
) -> None:
    import safetensors.torch
    from safetensors import SafetensorError

    def full(*_args, **_kwargs):  # what safetensors raises when the disk fills up
        raise SafetensorError(
            'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No '
            'space left on device" })'
        )

    monkeypatch.setattr(safetensors.torch, "save_file", full)
    out = tmp_path / "hf"
    assert_one_error_line(
        invoke(["export", "-c", str(backbone), "--out", str(out)]),
        "disk full while writing",
    )
    assert not out.exists() and list(tmp_path.iterdir()) == []  # no temporary folder left
