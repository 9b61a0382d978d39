"""`goatdna.checkpoint`: what a file that is no checkpoint is told."""

from __future__ import annotations

from pathlib import Path

from helpers import assert_one_error_line, invoke


def test_a_garbage_checkpoint_message_gives_no_unsafe_advice(tmp_path: Path) -> None:
    bad = tmp_path / "x.ckpt"
    bad.write_text("not a checkpoint at all " * 20)
    line = assert_one_error_line(
        invoke(["generate", "-c", str(bad), "--prompt", "ACGT"]),
        "not a readable goatdna checkpoint",
    )
    assert "weights_only" not in line and "arbitrary code" not in line
