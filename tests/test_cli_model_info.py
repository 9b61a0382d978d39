"""`goatdna model-info`: its options' ranges."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import assert_one_error_line, invoke

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "args",
    [
        ["model-info", REPO / "configs" / "goat-tiny.yaml", "--seq-len", "0"],
        ["model-info", REPO / "configs" / "goat-tiny.yaml", "--seq-len", "-5"],
    ],
)
def test_zero_lengths_are_rejected_not_taken_as_unset(args):
    line = assert_one_error_line(invoke(args))
    assert "--seq-len" in line and "must be >= 1" in line
