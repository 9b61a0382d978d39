"""benchmarks/authors_bench.py, goatdna against the authors' GoatAttention: its --quick run
gives the whole table in seconds, and it refuses to time two layers that compute different
functions (a timing of two functions would say nothing about the implementations)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import authors_bench  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def test_quick_run_prints_every_ratio_with_its_interval(capsys: pytest.CaptureFixture) -> None:
    try:  # this process's heap thresholds stay glibc's: other tests run in it
        authors_bench.main(["--quick", "--default-malloc"])
    finally:
        torch.set_flush_denormal(False)  # torch's default, which main changes
    out = capsys.readouterr().out
    for measure in (
        "forward: goatdna / authors",
        "forward + backward: goatdna / authors",
        "forward peak memory: goatdna / authors",
        "training step: goatdna / bare",
        "training step: goatdna / authors",
    ):
        (row,) = [line for line in out.splitlines() if f"| {measure} |" in line]
        if "memory" not in measure:  # ratio (low-high), the median inside its interval
            text = row.split("|")[3].strip()
            value, interval = text.split(" ", 1)
            low, high = (float(v) for v in interval.strip("()").split("-"))
            assert low <= round(float(value), 2) <= high
    assert "load average (1 min)" in out


def test_refuses_layers_that_differ() -> None:
    layers = authors_bench.build_layers(authors_bench.QUICK)
    x = torch.randn(1, 16, authors_bench.QUICK.d)
    authors_bench.check_same_layer(layers, x)
    with torch.no_grad():
        layers["goatdna"].o_proj.bias.add_(1e-3)
    with pytest.raises(ValueError, match="different functions"):
        authors_bench.check_same_layer(layers, x)
