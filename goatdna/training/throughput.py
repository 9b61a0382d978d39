"""Throughput (tokens/s, MFU) and peak memory of a training run (plain classes the loop calls).

MFU = achieved model FLOP/s / peak FLOP/s of the devices. Model FLOPs per token come from
`goatdna.model.flops_per_token` (6N plus the attention term, the PaLM convention), so MFU does not
credit recomputation or padding. Peak rates are *dense* (no 2:4 sparsity) tensor-core numbers from
the vendors' datasheets, per device; ``trainer.peak_flops`` overrides them. On a CPU there is no
datasheet number, so the peak is the fp32 matmul rate measured on this machine, at start-up and
again at the end of the run (the best measurement is kept: the peak is a property of the hardware,
and on a shared machine every measurement can only come out low). Where the achieved rate still
exceeds the peak, the peak was underestimated and MFU is not reported (None, with `mfu_note`
saying why) rather than a number above 1.

Why not `lightning_fabric.utilities.throughput` (checked against lightning-fabric 2.6): its
``get_available_flops`` table gives the 2:4-*sparse* tensor-core peaks for Hopper (1978.8e12
bf16 for an H100 SXM, 2.0e15 for an H200: twice the dense rate, which would halve every MFU),
needs a live CUDA device to read the name (so the table cannot be checked on a CPU-only test
machine), and returns None on a CPU; its ``Throughput``/``ThroughputMonitor`` keep a rolling
window over the last ``window_size`` updates and have no notion of time paused for validation
and checkpoints or of warm-up steps kept out of the run's average, which is what summary.json's
``tokens_per_s`` and ``mfu`` report. `goatdna.model.flops_per_token` stands in for its
``measure_flops`` (an analytic count, no meta-device forward).
"""

from __future__ import annotations

import contextlib
import resource
import sys
import time
from collections.abc import Callable, Iterator

import torch

# Dense peak FLOP/s per device: (bf16/fp16 tensor cores with fp32 accumulate, tf32).
# Order matters: more specific names first ("h100 pcie" before "h100", "l40s" before "l4").
PEAK_FLOPS: dict[str, tuple[float, float]] = {
    "h200 nvl": (835e12, 417.5e12),
    "h200": (989.4e12, 494.7e12),  # SXM: the H100 SXM's compute with more, faster memory
    "h100 nvl": (835e12, 417.5e12),
    "h100 pcie": (756e12, 378e12),
    "h100": (989.4e12, 494.7e12),  # SXM (reports itself as "H100 80GB HBM3")
    "a100": (312e12, 156e12),
    "l40s": (362e12, 183e12),
    "l40": (181e12, 90.5e12),
    "l4": (121e12, 60e12),
    "a10": (125e12, 62.5e12),  # A10 datasheet; also matches "A10G" (override if clocks differ)
    "rtx 4090": (165.2e12, 82.6e12),
    "rtx 3090": (35.6e12, 35.6e12),  # GeForce Ampere: fp32 accumulate runs at half rate
    "v100": (125e12, 15.7e12),  # fp16 only: no bf16, no tf32
    "t4": (65e12, 8.1e12),
}


def gpu_peak_flops(device_name: str, precision: str) -> float | None:
    """Dense peak for a GPU name (``torch.cuda.get_device_name``) and a Lightning precision."""
    name = device_name.lower()
    low_precision = precision.startswith(("bf16", "16"))
    for key, (half, tf32) in PEAK_FLOPS.items():  # most specific keys come first
        if key in name:
            return half if low_precision else tf32
    return None


def measure_cpu_matmul_flops(size: int = 512, seconds: float = 0.25, trials: int = 10) -> float:
    """Peak FLOP/s of fp32 ``size x size`` matmuls on this CPU with the current torch threads
    (the trainer calls it after Fabric's launch, so with the count the training steps run on).

    The best of ``trials`` short windows: on a shared machine the slow windows measure the other
    processes, not the hardware, and an underestimated peak would inflate MFU. Many short
    windows rather than a few long ones: a long window would average the other processes in.
    """
    a = torch.randn(size, size)
    b = torch.randn(size, size)
    torch.mm(a, b)  # warm-up
    flops_per_mm = 2.0 * size**3
    best = 0.0
    for _ in range(trials):
        n, t0 = 0, time.perf_counter()
        while True:
            torch.mm(a, b)
            n += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds / trials:
                break
        best = max(best, n * flops_per_mm / elapsed)
    return best


CPU_PEAK_SOURCE = "measured fp32 matmul rate on this CPU"
REMEASURED = " (best of the run's start and end)"
"""Added to a measured peak's source when `ThroughputMonitor.remeasure_peak` measured it again."""


def peak_flops_per_device(
    device: torch.device, precision: str, override: float | None
) -> tuple[float | None, str, Callable[[], float] | None]:
    """(peak FLOP/s per device, where the number came from, the measurement to repeat at the end
    of the run: `measure_cpu_matmul_flops` on a CPU without ``trainer.peak_flops``, else None)."""
    if override is not None:
        return float(override), "config trainer.peak_flops", None
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        peak = gpu_peak_flops(name, precision)
        if peak is not None:
            return peak, f"datasheet dense peak for {name}", None
        return None, f"unknown GPU {name!r}: set trainer.peak_flops for MFU", None
    return measure_cpu_matmul_flops(), CPU_PEAK_SOURCE, measure_cpu_matmul_flops


class ThroughputMonitor:
    """Tokens/s and MFU over optimizer steps after a warm-up, excluding validation/checkpoints.

    The clock runs between optimizer steps; `paused()` removes the time spent inside it (the
    loop wraps validation and checkpoint writes in it).
    """

    def __init__(
        self,
        tokens_per_step: int,
        flops_per_token: float,
        warmup_steps: int,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.clock = clock
        self.tokens_per_step = tokens_per_step
        self.flops_per_token = flops_per_token
        self.warmup_steps = warmup_steps
        self.peak_flops_total: float | None = None  # all devices together
        self.peak_source = ""
        self._peak_per_device: float | None = None
        self._world_size = 1
        self._measure: Callable[[], float] | None = None  # repeats a measured peak
        self._paused = 0.0  # seconds spent in `paused()` blocks
        self._last_step = 0
        self._last_time = 0.0
        self._last_paused = 0.0
        self._steps_run = 0  # optimizer steps this process has timed
        self._interval_steps = 0
        self._interval_busy = 0.0
        self._buckets: dict[str, tuple[int, float]] = {
            "first": (0, 0.0),
            "after_first": (0, 0.0),
            "measured": (0, 0.0),
        }

    def set_peak(
        self,
        per_device: float | None,
        world_size: int,
        source: str,
        measure: Callable[[], float] | None = None,
    ) -> None:
        """The peak per device and where it came from; ``measure`` (a measured peak) is called
        again by `remeasure_peak`."""
        self._peak_per_device, self._world_size, self._measure = per_device, world_size, measure
        self.peak_flops_total = None if per_device is None else per_device * world_size
        self.peak_source = source

    def remeasure_peak(self) -> None:
        """Measure a measured peak again (the loop calls it at the end of the run) and keep the
        best: load on the machine only ever lowers a measurement, so the highest one is the
        closest to the hardware's rate. Only when the run's achieved rate exceeds the peak
        measured at its start (a busy machine then): a plausible MFU costs no second
        measurement, so the many tiny CPU runs of a test suite pay the start-up one alone."""
        if self._measure is None:
            return
        achieved = self.tokens_per_s * self.flops_per_token
        if self.peak_flops_total is not None and achieved <= self.peak_flops_total:
            return
        again = self._measure()
        best = again if self._peak_per_device is None else max(self._peak_per_device, again)
        source = self.peak_source.removesuffix(REMEASURED) + REMEASURED
        self.set_peak(best, self._world_size, source, self._measure)

    def start(self, step: int) -> None:
        """The loop starts (or resumes) at optimizer step ``step``."""
        self._last_step = step
        self._last_time = self.clock()
        self._last_paused = self._paused

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        t0 = self.clock()
        try:
            yield
        finally:
            self._paused += self.clock() - t0

    def step_done(self, step: int, device: torch.device | None = None) -> float | None:
        """Record an optimizer step; returns tokens/s since the previous call (None if unknown).

        The first ``warmup_steps`` steps of this process (compilation, allocator, page cache)
        are kept out of the average; a run too short for that falls back to its steps after
        the first, then to everything.
        """
        if device is not None and device.type == "cuda":
            torch.cuda.synchronize(device)
        now = self.clock()
        steps = step - self._last_step
        busy = (now - self._last_time) - (self._paused - self._last_paused)
        self._last_step, self._last_time, self._last_paused = step, now, self._paused
        if steps <= 0 or busy <= 0:
            return None
        self._steps_run += steps
        self._interval_steps += steps
        self._interval_busy += busy
        if self._steps_run > self.warmup_steps:
            bucket = "measured"
        elif self._steps_run > steps:
            bucket = "after_first"
        else:
            bucket = "first"
        done, seconds = self._buckets[bucket]
        self._buckets[bucket] = (done + steps, seconds + busy)
        return steps * self.tokens_per_step / busy

    def take_interval_rate(self) -> float:
        """Tokens/s since the previous call (the rate a log row reports); resets the interval."""
        steps, busy = self._interval_steps, self._interval_busy
        self._interval_steps, self._interval_busy = 0, 0.0
        return steps * self.tokens_per_step / busy if steps > 0 and busy > 0 else 0.0

    @property
    def tokens_per_s(self) -> float:
        """Average over the measured steps (after warm-up when the run was long enough)."""
        for bucket in ("measured", "after_first", "first"):
            steps, seconds = self._buckets[bucket]
            if steps > 0 and seconds > 0:
                return steps * self.tokens_per_step / seconds
        return 0.0

    @property
    def achieved_flops(self) -> float:
        """Model FLOP/s of the measured steps, all devices together."""
        return self.tokens_per_s * self.flops_per_token

    @property
    def mfu(self) -> float | None:
        """Achieved over peak FLOP/s; None where that is not a fact: no peak is known, or the
        achieved rate exceeds the peak (a measured peak came out low; `mfu_note` says which)."""
        if self.mfu_note is not None or not self.peak_flops_total:
            return None
        return self.achieved_flops / self.peak_flops_total

    @property
    def mfu_note(self) -> str | None:
        """Why `mfu` is None (None when it is a number)."""
        if not self.peak_flops_total:
            return f"MFU not reported: no peak FLOP/s ({self.peak_source or 'none set'})"
        if self.achieved_flops > self.peak_flops_total:
            return (
                f"MFU not reported: the achieved {self.achieved_flops:.3g} FLOP/s exceeds the "
                f"peak of {self.peak_flops_total:.3g} FLOP/s ({self.peak_source}), so the peak "
                "is underestimated (a busy machine); --set trainer.peak_flops=FLOPS gives the "
                "device's real peak"
            )
        return None


def peak_memory_bytes(device: torch.device) -> int:
    """Peak memory: ``torch.cuda.max_memory_allocated`` on CUDA, peak RSS of the process on CPU."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)  # Linux reports KiB
