"""The report's tables as pandas DataFrames, and their numbers as the strings report.md shows.

Every table here is computed from the runs' evaluations and study results only; rendering
(`report_render`) and the CLI's printed summary format them with the same `formatted`, so a number
reads the same in report.md, report.html and the terminal.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, SupportsFloat

from goatdna.analysis.evaluate import ContextResult
from goatdna.analysis.report_runs import RunData

if TYPE_CHECKING:
    import pandas as pd


SUMMARY_COLUMNS = [
    "model",
    "positional",
    "params",
    "val_nll",
    "val_nll_low",
    "val_nll_high",
    "bits_per_base",
    "next_base_accuracy",
    "tokens_per_s",
    "peak_memory_gb",
    "gc_mae",
    "gc_mae_low",
    "gc_mae_high",
    "gc_rmse",
    "gc_rmse_low",
    "gc_rmse_high",
    "gc_pearson",
    "gc_pearson_low",
    "gc_pearson_high",
    "base_accuracy",
    "base_accuracy_low",
    "base_accuracy_high",
]
SUMMARY_FORMATS = {
    "params": ",d",
    "val_nll": ".4f",
    "val_nll_low": ".4f",
    "val_nll_high": ".4f",
    "bits_per_base": ".4f",
    "next_base_accuracy": ".4f",
    "tokens_per_s": ",.0f",
    "peak_memory_gb": ".3f",
    "gc_mae": ".4f",
    "gc_rmse": ".4f",
    "gc_pearson": ".3f",
    "base_accuracy": ".3f",
}
SUMMARY_FORMATS.update(  # an interval's bounds read like its estimate
    {
        f"{column}{end}": SUMMARY_FORMATS[column]
        for column in ("val_nll", "gc_mae", "gc_rmse", "gc_pearson", "base_accuracy")
        for end in ("_low", "_high")
    }
)
EXTRAPOLATION_FORMATS = {"context_length": "d"}
REPEAT_FORMATS = {
    "context_length": "d",
    "bases": ",d",
    "repeat bases": ",d",
    "non-repeat bases": ",d",
}
GC_FORMATS = {"n_samples": "d", "pearson_defined": "d", "pearson_undefined": "d"}
RECALL_FORMATS = {"distance": ",d"}
RECALL_COLUMNS = [
    "model",
    "distance",
    "nll_first",
    "nll_second",
    "recall_gain",
    "recall_gain_low",
    "recall_gain_high",
    "copy_accuracy",
    "copy_accuracy_low",
    "copy_accuracy_high",
    "extrapolation",
]

# The paper's DNA experiment (Litman & Guo, ICML 2026): ~125M decoders on hg38, one GPU, bf16.
PAPER_DNA = {
    "rope": {
        "nll": 1.2054,
        "bits_per_base": 1.739,
        "tokens_per_s": 139_886,
        "peak_memory_gb": 2.86,
    },
    "goat": {
        "nll": 1.1294,
        "bits_per_base": 1.629,
        "tokens_per_s": 138_171,
        "peak_memory_gb": 1.83,
    },
}
PAPER_METRICS = [  # (row label, paper key, summary column, number format)
    ("validation NLL (nats/base)", "nll", "val_nll", ".4f"),
    ("bits/base", "bits_per_base", "bits_per_base", ".3f"),
    ("training tokens/s", "tokens_per_s", "tokens_per_s", ",.0f"),
    ("peak memory (GB)", "peak_memory_gb", "peak_memory_gb", ".2f"),
]
PAPER_RECIPE = "the paper's (~125M, hg38, bf16)"
"""What produced the paper's columns, as its DNA section reports them."""
BYTES_PER_GB = 1e9
GPU_MEMORY = "GPU memory, CUDA max allocated"
RSS = "process peak RSS"
NOT_GPU_MEMORY = f" ({RSS}, not GPU memory as the paper's)"


def memory_measure(device: object) -> str:
    """What a run's ``peak_memory_bytes`` measured, from its summary.json ``device`` (the CUDA
    device's name on a GPU, else torch's device type, e.g. ``cpu``): GPU_MEMORY on a GPU, else
    the process's peak RSS on that device (`training.throughput.peak_memory_bytes`). The paper's numbers are GPU memory, so
    the paper table must say when ours are not; an unknown device says so too."""
    import torch

    if not isinstance(device, str) or not device or device == "?":
        return "unknown, no device in summary.json"
    try:
        kind = torch.device(device).type  # "cpu", "mps", ...: a device type, not a GPU's name
    except RuntimeError:
        return GPU_MEMORY  # the trainer writes a CUDA device's name, which is no device type
    return GPU_MEMORY if kind == "cuda" else f"{RSS} on {kind.upper()}"


def memory_label(devices: Mapping[str, object] | None, goat: str, rope: str) -> str:
    """The paper table's memory row label: the paper's measure and what ours measured."""
    if devices is None:
        ours = f"{GPU_MEMORY} on a GPU; {RSS} on CPU"
    else:
        goat_kind, rope_kind = memory_measure(devices.get(goat)), memory_measure(devices.get(rope))
        ours = goat_kind if goat_kind == rope_kind else f"RoPE {rope_kind}; GOAT {goat_kind}"
    return f"peak memory, GB (paper: {GPU_MEMORY}; ours: {ours})"


def _num(value: SupportsFloat | str | None) -> float:
    if value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def fmt(value: object, spec: str | None = None, default: str = ".4g") -> str:
    """One table cell as report.md and the console tables write it: booleans yes/no, missing or
    non-finite numbers n/a, integers with thousands separators unless ``spec`` says otherwise,
    other numbers with ``spec`` (else ``default``); strings pass through."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return "yes" if value else "no"
    if value is None:
        return "n/a"
    if isinstance(value, numbers.Integral):
        return format(int(value), spec or ",d")
    if isinstance(value, numbers.Real):
        number = float(value)
        return format(number, spec or default) if math.isfinite(number) else "n/a"
    return str(value)


def formatted(
    frame: pd.DataFrame, formats: Mapping[str, str], default: str = ".4g"
) -> list[list[str]]:
    """Rows of strings (header first) with per-column number formats."""
    header = [str(c) for c in frame.columns]
    body = [
        [
            fmt(value, formats.get(column), default)
            for column, value in zip(frame.columns, row, strict=True)
        ]
        for row in frame.itertuples(index=False)
    ]
    return [header, *body]


def with_intervals(
    frame: pd.DataFrame, formats: Mapping[str, str], default: str = ".4g"
) -> pd.DataFrame:
    """``frame`` for reading: each column ``x`` that has ``x_low`` and ``x_high`` becomes one
    cell ``value (low-high)``, formatted with ``formats[x]`` (the ``_low``/``_high`` columns go);
    the other columns stay as they are. summary.csv keeps the three numbers apart."""
    out = frame.copy()
    for column in frame.columns:
        low, high = f"{column}_low", f"{column}_high"
        if low not in frame or high not in frame:
            continue
        spec = formats.get(column)
        out[column] = [
            f"{fmt(v, spec, default)} ({interval_text(lo, hi, spec or default)})"
            if math.isfinite(float(lo)) and math.isfinite(float(hi))
            else fmt(v, spec, default)
            for v, lo, hi in zip(frame[column], frame[low], frame[high], strict=True)
        ]
        out = out.drop(columns=[low, high])
    return out


def summary_frame(runs: Sequence[RunData], gc_summaries: Mapping[str, Any]) -> pd.DataFrame:
    """The summary table: one row per model (SUMMARY_COLUMNS)."""
    import pandas as pd

    rows = []
    for run in runs:
        at_train = validation_result(run)
        gc = gc_summaries[run.name]
        params = run.summary.get("params")
        if not isinstance(params, int):
            params = int(run.model.num_params())
        rows.append(
            {
                "model": run.name,
                "positional": run.positional,
                "params": params,
                "val_nll": at_train.nll,
                "val_nll_low": at_train.nll_low,
                "val_nll_high": at_train.nll_high,
                "bits_per_base": at_train.bits_per_base,
                "next_base_accuracy": at_train.accuracy,
                "tokens_per_s": _num(run.summary.get("tokens_per_s")),
                "peak_memory_gb": _num(run.summary.get("peak_memory_bytes")) / BYTES_PER_GB,
                **{
                    f"{column}{end}": getattr(gc, f"{column}{end}")
                    for column in ("gc_mae", "gc_rmse", "gc_pearson", "base_accuracy")
                    for end in ("", "_low", "_high")
                },
            }
        )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def evaluation_frame(runs: Sequence[RunData]) -> pd.DataFrame:
    """Every run's evaluation rows (every context length), the model name first."""
    import pandas as pd

    frame = pd.concat(
        [run.evaluated().frame().assign(model=run.name) for run in runs], ignore_index=True
    )
    return frame[["model", *[c for c in frame.columns if c != "model"]]]


def extrapolation_frame(runs: Sequence[RunData]) -> pd.DataFrame:
    """Context length x model: NLL (nats/base) and bits/base, with the extrapolation factor."""
    import pandas as pd

    lengths = sorted({r.context_length for run in runs for r in run.evaluated().results})
    base = min(run.train_length for run in runs)
    rows = []
    for length in lengths:
        row: dict[str, Any] = {
            "context_length": length,
            "x_train_length": f"{length / base:g}x",
        }
        for run in runs:
            try:
                res = run.evaluated().at(length)
                row[f"{run.name} nll"] = res.nll
                row[f"{run.name} nll 95% CI"] = interval_text(res.nll_low, res.nll_high)
                row[f"{run.name} bits/base"] = res.bits_per_base
            except KeyError:
                row[f"{run.name} nll"] = math.nan
                row[f"{run.name} nll 95% CI"] = "n/a"
                row[f"{run.name} bits/base"] = math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def repeat_frame(runs: Sequence[RunData]) -> pd.DataFrame:
    """At training length: NLL on soft-masked (repeat) vs unmasked targets, per model."""
    import pandas as pd

    rows = []
    for run in runs:
        r = run.evaluated().at(run.train_length)
        rows.append(
            {
                "model": run.name,
                "context_length": r.context_length,
                "bases": r.bases,
                "repeat bases": r.repeat_bases,
                "repeat bits/base": r.repeat_bits_per_base,
                "non-repeat bases": r.nonrepeat_bases,
                "non-repeat bits/base": r.nonrepeat_bits_per_base,
            }
        )
    return pd.DataFrame(rows)


def recall_table(summaries: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Every model's recall summary (`recall.summarize_recall`) in one frame, a ``model`` column
    last (recall_summary.csv); the report shows its RECALL_COLUMNS."""
    import pandas as pd

    return pd.concat([f.assign(model=n) for n, f in summaries.items()], ignore_index=True)


def paper_pair(runs: Sequence[RunData]) -> tuple[str, str] | None:
    """The (GOAT, RoPE) run names the paper table compares: the first GOAT run and the first
    plain RoPE run (one with a ``rope_extension`` only when no plain one is there); None when
    the report has no GOAT or no RoPE run."""
    goat = [run.name for run in runs if run.positional == "goat"]
    ropes = [run for run in runs if run.positional == "rope"]
    plain = [run.name for run in ropes if run.rope_extension in ("", "none")]
    rope = plain or [run.name for run in ropes]
    if not goat or not rope:
        return None
    return goat[0], rope[0]


def interval_text(low: float, high: float, spec: str = ".4f") -> str:
    """An interval as the tables write it: ``1.2345-1.2456``, or ``-0.0120 to 0.0031`` when a
    bound is negative (a dash would read as a minus); n/a when undefined."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "n/a"
    sep = " to " if low < 0 or high < 0 else "-"
    return f"{fmt(low, spec)}{sep}{fmt(high, spec)}"


@dataclass(frozen=True)
class Difference:
    """``a - b`` of two NLLs with a 95% bootstrap interval, and whether the interval holds 0."""

    value: float
    low: float
    high: float
    paired: bool  # both scored on the same windows, resampled alike

    @property
    def within_noise(self) -> bool:
        """The interval holds zero (or is undefined): the difference is no result."""
        return not (self.low > 0 or self.high < 0)


def nll_difference(a: ContextResult, b: ContextResult) -> Difference:
    """``a.nll - b.nll`` with the percentile interval of the differences of their resampled NLLs
    (`evaluate.ContextResult.resampled_nll`): a paired bootstrap when both were scored on the
    same windows (same context length, windows and bases), else one of two separate ones."""
    from goatdna.metrics import percentile_interval

    paired = (a.context_length, a.windows, a.bases) == (b.context_length, b.windows, b.bases)
    if a.resampled_nll is None or b.resampled_nll is None:
        return Difference(a.nll - b.nll, math.nan, math.nan, paired)
    low, high = percentile_interval(a.resampled_nll - b.resampled_nll)
    return Difference(a.nll - b.nll, low, high, paired)


def difference_text(diff: Difference) -> str:
    """One phrase for a reader: the difference, its interval, and inside/outside the noise."""
    verdict = (
        "inside the noise (the interval holds 0): no difference shown"
        if diff.within_noise
        else "outside the noise"
    )
    how = "paired bootstrap over the same windows" if diff.paired else "bootstrap"
    return (
        f"{fmt(diff.value, '+.4f')} nats/base (95% interval "
        f"{interval_text(diff.low, diff.high, '+.4f')}, {how}), {verdict}"
    )


def validation_result(run: RunData) -> ContextResult:
    """The run's NLL at its training length on its validation windows (the summary's val_nll)."""
    return run.validation or run.evaluated().at(run.train_length)


def summary_differences(runs: Sequence[RunData]) -> list[str]:
    """For every run after the first: its val_nll minus the first run's, with the interval and
    whether it is inside the noise (`difference_text`), one Markdown-free sentence each."""
    if len(runs) < 2:
        return []
    first = runs[0]
    return [
        f"{run.name} - {first.name} val_nll: "
        + difference_text(nll_difference(validation_result(run), validation_result(first)))
        for run in runs[1:]
    ]


def _change(new: float, old: float) -> str:
    if not (old and math.isfinite(old) and math.isfinite(new)):
        return "n/a"
    return fmt(100 * (new - old) / old, "+.1f") + "%"


NOT_SIDE_BY_SIDE = " (separate runs, not measured side by side)"
INSIDE_NOISE = " (inside the noise)"


def paper_frame(
    summary: pd.DataFrame,
    goat_name: str,
    rope_name: str,
    nll_change: Difference | None = None,
    devices: Mapping[str, object] | None = None,
    recipes: tuple[str, str] | None = None,
) -> pd.DataFrame:
    """The paper's DNA numbers beside ours for one GOAT and one RoPE model of ``summary``.

    ``recipes`` (GOAT's, RoPE's: `RunData.recipe`) makes the first row say which recipe
    produced each column, the paper's included, so a tiny demo is not read as the paper's
    experiment and a paper-dna run is told from goatdna's own recipe.

    Our throughput comes from each run's own summary.json, measured while that run trained: two
    runs one after the other, on a machine whose load may have changed in between, so its change
    says so (a fair comparison runs both side by side: benchmarks/). Our NLL change is marked
    when ``nll_change`` (`nll_difference`, GOAT - RoPE) shows it inside the noise. The memory
    row's label says what each side measured (`memory_label`; ``devices``: run name -> its
    summary.json ``device``): the paper's is GPU memory, a CPU run's is the process's peak RSS,
    which also counts Python, torch and the data, so that change is marked as well.
    """
    import pandas as pd

    goat = summary[summary["model"] == goat_name].iloc[0]
    rope = summary[summary["model"] == rope_name].iloc[0]
    rows = []
    if recipes is not None:
        rows.append(
            {
                "metric": "recipe",
                "paper RoPE": PAPER_RECIPE,
                "paper GOAT": PAPER_RECIPE,
                "paper GOAT vs RoPE": "",
                "ours RoPE": recipes[1],
                "ours GOAT": recipes[0],
                "ours GOAT vs RoPE": "",
            }
        )
    for label, paper_key, our_key, spec in PAPER_METRICS:
        p_rope, p_goat = float(PAPER_DNA["rope"][paper_key]), float(PAPER_DNA["goat"][paper_key])
        o_rope, o_goat = float(rope[our_key]), float(goat[our_key])
        ours = _change(o_goat, o_rope)
        if ours != "n/a" and our_key == "tokens_per_s":
            ours += NOT_SIDE_BY_SIDE
        if ours != "n/a" and our_key in ("val_nll", "bits_per_base") and nll_change is not None:
            ours += INSIDE_NOISE if nll_change.within_noise else ""
        if our_key == "peak_memory_gb":
            label = memory_label(devices, goat_name, rope_name)
            if ours != "n/a" and RSS in label:
                ours += NOT_GPU_MEMORY
        rows.append(
            {
                "metric": label,
                "paper RoPE": fmt(p_rope, spec),
                "paper GOAT": fmt(p_goat, spec),
                "paper GOAT vs RoPE": _change(p_goat, p_rope),
                "ours RoPE": fmt(o_rope, spec),
                "ours GOAT": fmt(o_goat, spec),
                "ours GOAT vs RoPE": ours,
            }
        )
    return pd.DataFrame(rows)
