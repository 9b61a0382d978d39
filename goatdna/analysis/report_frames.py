"""The report's tables as pandas DataFrames, and their numbers as the strings report.md shows.

Every table here is computed from the runs' evaluations and study results only; rendering
(`report_render`) and the CLI's printed summary format them with the same `formatted`, so a number
reads the same in report.md, report.html and the terminal.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, SupportsFloat

from goatdna.analysis.report_runs import RunData

if TYPE_CHECKING:
    import pandas as pd


SUMMARY_COLUMNS = [
    "model",
    "positional",
    "params",
    "val_nll",
    "bits_per_base",
    "tokens_per_s",
    "peak_memory_gb",
    "gc_mae",
    "gc_rmse",
    "gc_pearson",
    "base_accuracy",
]
SUMMARY_FORMATS = {
    "params": ",d",
    "val_nll": ".4f",
    "bits_per_base": ".4f",
    "tokens_per_s": ",.0f",
    "peak_memory_gb": ".3f",
    "gc_mae": ".4f",
    "gc_rmse": ".4f",
    "gc_pearson": ".3f",
    "base_accuracy": ".3f",
}
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
    "recall_gain_se",
    "copy_accuracy",
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
BYTES_PER_GB = 1e9


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


def summary_frame(runs: Sequence[RunData], gc_summaries: Mapping[str, Any]) -> pd.DataFrame:
    """The summary table: one row per model (SUMMARY_COLUMNS)."""
    import pandas as pd

    rows = []
    for run in runs:
        at_train = run.validation or run.evaluated().at(run.train_length)
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
                "bits_per_base": at_train.bits_per_base,
                "tokens_per_s": _num(run.summary.get("tokens_per_s")),
                "peak_memory_gb": _num(run.summary.get("peak_memory_bytes")) / BYTES_PER_GB,
                "gc_mae": gc.gc_mae,
                "gc_rmse": gc.gc_rmse,
                "gc_pearson": gc.gc_pearson,
                "base_accuracy": gc.base_accuracy,
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
                row[f"{run.name} bits/base"] = res.bits_per_base
            except KeyError:
                row[f"{run.name} nll"] = math.nan
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


def _change(new: float, old: float) -> str:
    if not (old and math.isfinite(old) and math.isfinite(new)):
        return "n/a"
    return fmt(100 * (new - old) / old, "+.1f") + "%"


def paper_frame(summary: pd.DataFrame, goat_name: str, rope_name: str) -> pd.DataFrame:
    """The paper's DNA numbers beside ours for one GOAT and one RoPE model of ``summary``."""
    import pandas as pd

    goat = summary[summary["model"] == goat_name].iloc[0]
    rope = summary[summary["model"] == rope_name].iloc[0]
    rows = []
    for label, paper_key, our_key, spec in PAPER_METRICS:
        p_rope, p_goat = float(PAPER_DNA["rope"][paper_key]), float(PAPER_DNA["goat"][paper_key])
        o_rope, o_goat = float(rope[our_key]), float(goat[our_key])
        rows.append(
            {
                "metric": label,
                "paper RoPE": fmt(p_rope, spec),
                "paper GOAT": fmt(p_goat, spec),
                "paper GOAT vs RoPE": _change(p_goat, p_rope),
                "ours RoPE": fmt(o_rope, spec),
                "ours GOAT": fmt(o_goat, spec),
                "ours GOAT vs RoPE": _change(o_goat, o_rope),
            }
        )
    return pd.DataFrame(rows)
