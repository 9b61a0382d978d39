"""MFU is never reported above 1: a measured CPU peak is re-measured at the end of the run (the
best measurement is kept), and where the achieved rate still exceeds the peak, MFU is null with
the reason beside it and a warning line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import invoke, tiny_train_overrides

from goatdna.training.throughput import CPU_PEAK_SOURCE, REMEASURED, ThroughputMonitor

REPO = Path(__file__).resolve().parents[1]
TINY_TRAIN = tiny_train_overrides(
    "trainer.max_steps=3", "trainer.eval_every=3", "trainer.ckpt_every=3"
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _monitor(seconds_per_step: float) -> ThroughputMonitor:
    """100 tokens a step of 10 FLOPs each, 2 steps of ``seconds_per_step`` (no warm-up)."""
    times = iter([0.0, seconds_per_step, 2 * seconds_per_step])
    monitor = ThroughputMonitor(
        tokens_per_step=100, flops_per_token=10.0, warmup_steps=0, clock=lambda: next(times)
    )
    monitor.start(0)
    monitor.step_done(1)
    monitor.step_done(2)
    return monitor


def test_achieved_above_a_measured_peak_gives_no_mfu_but_a_reason() -> None:
    monitor = _monitor(1.0)  # 1,000 FLOP/s achieved
    monitor.set_peak(300.0, 2, CPU_PEAK_SOURCE)  # 600 FLOP/s: a peak measured too low
    assert monitor.achieved_flops == pytest.approx(1000.0)
    assert monitor.mfu is None
    note = monitor.mfu_note
    assert note is not None and "1e+03 FLOP/s exceeds the peak of 600 FLOP/s" in note
    assert CPU_PEAK_SOURCE in note and "trainer.peak_flops" in note


def test_mfu_is_a_number_at_or_below_the_peak() -> None:
    monitor = _monitor(1.0)
    monitor.set_peak(500.0, 2, "test")  # exactly the achieved rate: MFU 1 is still a fact
    assert monitor.mfu == pytest.approx(1.0) and monitor.mfu_note is None
    monitor.set_peak(2000.0, 2, "test")
    assert monitor.mfu == pytest.approx(0.25) and monitor.mfu_note is None


def test_no_known_peak_gives_no_mfu_and_says_why() -> None:
    monitor = _monitor(1.0)
    monitor.set_peak(None, 1, "unknown GPU 'X': set trainer.peak_flops for MFU")
    assert monitor.mfu is None
    assert monitor.mfu_note == (
        "MFU not reported: no peak FLOP/s (unknown GPU 'X': set trainer.peak_flops for MFU)"
    )


def test_remeasured_peak_keeps_the_best_measurement() -> None:
    measurements = iter([800.0, 200.0])  # the end of the run: first a better, then a worse one
    monitor = _monitor(1.0)  # 1,000 FLOP/s achieved
    monitor.set_peak(400.0, 2, CPU_PEAK_SOURCE, measure=lambda: next(measurements))
    assert monitor.mfu is None  # 800 FLOP/s at start-up: below the achieved rate
    monitor.remeasure_peak()
    assert monitor.peak_flops_total == pytest.approx(1600.0)  # 800 per device, 2 devices
    assert monitor.mfu == pytest.approx(1000.0 / 1600.0) and monitor.mfu_note is None
    assert monitor.peak_source == CPU_PEAK_SOURCE + REMEASURED
    monitor.remeasure_peak()  # a plausible MFU: no second measurement (a CPU run's cost)
    assert next(measurements) == 200.0 and monitor.peak_flops_total == pytest.approx(1600.0)
    plausible = _monitor(1.0)
    plausible.set_peak(5000.0, 1, CPU_PEAK_SOURCE, measure=lambda: 1.0e9)
    plausible.remeasure_peak()  # never measured again: its source says one measurement
    assert (plausible.peak_flops_total, plausible.peak_source) == (5000.0, CPU_PEAK_SOURCE)
    lower = iter([100.0])
    monitor.set_peak(400.0, 2, CPU_PEAK_SOURCE, measure=lambda: next(lower))
    monitor.remeasure_peak()  # a lower measurement does not replace the best
    assert monitor.peak_flops_total == pytest.approx(800.0) and monitor.mfu is None


def test_a_datasheet_or_configured_peak_is_not_remeasured() -> None:
    monitor = _monitor(1.0)
    monitor.set_peak(5000.0, 1, "config trainer.peak_flops")
    monitor.remeasure_peak()
    assert monitor.peak_flops_total == pytest.approx(5000.0)


def test_train_remeasures_the_cpu_peak_and_reports_null_mfu_above_it(
    synthetic_shards: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a machine so busy that both measurements come out far below what training achieves
    measured = iter([1.0e3, 2.0e3])
    monkeypatch.setattr(
        "goatdna.training.throughput.measure_cpu_matmul_flops", lambda: next(measured)
    )
    run = tmp_path / "run"
    sets = [x for item in TINY_TRAIN for x in ("--set", item)]
    config = REPO / "configs" / "goat-tiny.yaml"
    result = invoke(["train", "--config", config, *sets, "--data", synthetic_shards, "--out", run])
    assert result.exit_code == 0, (result.output, result.exception)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["peak_flops"] == 2.0e3  # the end-of-run measurement, the better one
    assert summary["peak_flops_source"] == CPU_PEAK_SOURCE + REMEASURED
    assert summary["mfu"] is None
    assert summary["mfu_note"].startswith("MFU not reported: the achieved ")
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings == [f"warning: {summary['mfu_note']}"]
    printed = json.loads(result.stdout.splitlines()[0])  # the closing summary line
    assert printed["mfu"] is None
