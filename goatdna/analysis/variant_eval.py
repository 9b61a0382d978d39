"""`goatdna eval-variants`: variant scores joined with labels -> benchmark numbers and plots.

The definitions of the metrics and intervals are in `goatdna.analysis.variant_metrics`; this
module decides which rows count. Every row of the scores table ends up in exactly one of:

- ``unscored``: ``status`` is not ``ok`` (or the score is missing), counted by status;
- ``unlabelled``: no label (no row in the label table, an empty cell, or with
  ``--positive``/``--negative`` a value named in neither);
- ``evaluated``: the rows the metrics use.

The score is a column of the scores table with an optional sign: ``llr`` (higher = the model
prefers ALT), ``-llr`` (higher = more damaging: the usual orientation for pathogenic or causal
positives, and the default), ``|llr|`` (any change); any numeric column works the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from goatdna.analysis import variant_metrics as vm
from goatdna.configfile import OPEN_FRACTION, SEED, Bounds, bounded, check_bounds
from goatdna.errors import GoatDNAError
from goatdna.formats import json_text

if TYPE_CHECKING:
    import pandas as pd

KEY_COLUMNS = ("chrom", "pos", "ref", "alt")
KINDS = ("auto", "binary", "continuous")
BINARY_METRICS = ("auroc", "auprc")
CONTINUOUS_METRICS = ("spearman", "pearson")
PAIRWISE_METRIC = "pairwise_accuracy"


@dataclass(frozen=True)
class EvalOptions:
    """What to evaluate: the label, the signed score, subsets, match groups, the bootstrap."""

    label: str = "label"
    score: str = "-llr"
    kind: str = (
        "auto"  # binary | continuous | auto (0/1 or bool -> binary, other numbers -> continuous)
    )
    positive: tuple[str, ...] = ()  # label values counted as 1 (then the rest of negative as 0)
    negative: tuple[str, ...] = ()  # label values counted as 0 (default: every other value)
    subsets: tuple[str, ...] = ()
    match_group: str | None = None
    resamples: int = bounded(1000, Bounds(0, 100_000))  # 0: no intervals (and see min_resamples)
    seed: int = bounded(0, SEED)
    level: float = bounded(0.95, OPEN_FRACTION)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise GoatDNAError(f"--kind {self.kind!r}: choose auto, binary or continuous")
        check_bounds(self, GoatDNAError)
        fewest = min_resamples(self.level)
        if 0 < self.resamples < fewest:
            raise GoatDNAError(
                f"--bootstrap {self.resamples}: too few resamples for a {self.level:.0%} "
                f"interval; use 0 (no intervals) or at least {fewest} (each tail of the "
                "percentile interval needs a resample of its own)"
            )


def min_resamples(level: float) -> int:
    """The fewest resamples whose percentile interval at ``level`` has a resample beyond each
    end: (1 - level) / 2 of them in each tail, at least one. With fewer (e.g. --bootstrap 1)
    both ends are the same resample and the interval need not contain the estimate."""
    return math.ceil(round(2 / (1 - level), 9))


# The longest bootstrap run without asking: refused beyond this estimate, before any resample.
MAX_BOOTSTRAP_SECONDS = 600.0


@dataclass(frozen=True)
class MetricRow:
    """One metric on one subset (``subset_column`` ``all`` for every evaluated row)."""

    subset_column: str
    subset: str
    metric: str
    value: float
    low: float
    high: float
    n: int
    n_positive: int | None  # binary labels only


@dataclass
class VariantEvaluation:
    """The whole result: what was scored and labelled, and the metric rows."""

    score: str
    label: str
    kind: str
    level: float
    resamples: int
    rows: int
    unscored: dict[str, int]
    unlabelled: int
    evaluated: int
    metrics: list[MetricRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # how an ambiguous input was read
    # the evaluated rows themselves, for the plots (not written to JSON)
    labels: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    scores: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    subset_values: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def as_json(self) -> dict:
        head = {k: v for k, v in asdict(self).items() if k not in ("metrics", "labels", "scores",
                                                                  "subset_values", "notes")}  # fmt: skip
        head["metrics"] = [asdict(m) for m in self.metrics]  # NaN: null (json_text)
        return head


def parse_score(expression: str, columns: Sequence[str]) -> tuple[str, str]:
    """``llr`` / ``-llr`` / ``|llr|`` (any column) -> (column, sign: '+', '-' or 'abs')."""
    text = expression.strip()
    if len(text) > 2 and text.startswith("|") and text.endswith("|"):
        column, sign = text[1:-1], "abs"
    elif text.startswith("abs(") and text.endswith(")"):
        column, sign = text[4:-1], "abs"
    elif text.startswith("-"):
        column, sign = text[1:], "-"
    else:
        column, sign = text.lstrip("+"), "+"
    if column not in columns:
        raise GoatDNAError(
            f"--score {expression!r}: the scores have no column {column!r} (use llr, -llr or "
            f"|llr|, or another numeric column: {', '.join(map(str, columns))})"
        )
    return column, sign


def signed_score(frame: pd.DataFrame, expression: str) -> np.ndarray:
    import pandas as pd

    column, sign = parse_score(expression, list(frame.columns))
    cells = frame[column]
    numbers = pd.to_numeric(cells, errors="coerce")
    text = cells.notna() & numbers.isna() & (cells.astype(str).str.strip() != "")
    if text.any():
        row = int(np.flatnonzero(text.to_numpy())[0])
        raise GoatDNAError(
            f"--score {expression!r}: column {column!r} holds text ({cells.iloc[row]!r} in row "
            f"{row + 1}); choose a numeric column such as llr"
        )
    values = numbers.to_numpy(dtype=np.float64)
    return -values if sign == "-" else np.abs(values) if sign == "abs" else values


def join_labels(
    scores: pd.DataFrame, labels: pd.DataFrame, label: str, source: str, extra: Sequence[str] = ()
) -> pd.DataFrame:
    """``scores`` with the ``label`` column of ``labels`` (and those of ``extra`` that the scores
    lack) joined on chrom/pos/ref/alt: a left join, so a scored allele without a label row gets
    an empty label and is counted as unlabelled."""
    import pandas as pd

    for name, frame in (("--scores", scores), (source, labels)):
        missing = [c for c in KEY_COLUMNS if c not in frame.columns]
        if missing:
            raise GoatDNAError(
                f"{name}: no column {missing[0]!r} to join on (needs chrom, pos, ref, alt)"
            )
    if label not in labels.columns:
        raise GoatDNAError(
            f"--label {label!r}: {source} has no such column (it has "
            f"{', '.join(map(str, labels.columns[:10]))})"
        )
    columns = [label] + [c for c in extra if c in labels.columns and c not in scores.columns]

    def keyed(frame: pd.DataFrame) -> pd.DataFrame:
        keys = frame[list(KEY_COLUMNS)].astype({"chrom": str, "ref": str, "alt": str})
        keys["pos"] = pd.to_numeric(keys["pos"], errors="coerce").astype("Int64")
        return keys

    right = keyed(labels)
    duplicated = right.duplicated()
    if duplicated.any():
        row = int(np.flatnonzero(duplicated.to_numpy())[0])
        raise GoatDNAError(
            f"{source}: row {row + 1} repeats the allele {tuple(right.iloc[row])}; give one label "
            "per chrom/pos/ref/alt"
        )
    for column in columns:
        right["__" + column] = labels[column].to_numpy()
    merged = keyed(scores).merge(right, on=list(KEY_COLUMNS), how="left", validate="many_to_one")
    joined = scores.drop(columns=[label], errors="ignore").copy()
    for column in columns:
        joined[column] = merged["__" + column].to_numpy()
    return joined


def _named(text: np.ndarray, named: tuple[str, ...]) -> np.ndarray:
    """Cells equal to a named value as written, or as a number: a 0/1 column with an empty
    cell is read as floats, and ``--positive 1`` means its 1.0."""
    import pandas as pd

    hits = np.isin(text, list(named))
    wanted = pd.to_numeric(pd.Series(list(named), dtype=object), errors="coerce").dropna()
    if len(wanted):
        numbers = pd.to_numeric(pd.Series(text, dtype=object), errors="coerce").to_numpy()
        hits |= np.isin(numbers, wanted.to_numpy(dtype=np.float64))
    return hits


def _binary_labels(values: pd.Series, options: EvalOptions) -> tuple[np.ndarray, np.ndarray]:
    """(is labelled, is positive) from the label column."""
    import pandas as pd

    present = values.notna().to_numpy()
    if options.positive or options.negative:
        text = values.astype(str).str.strip().to_numpy()
        pos = _named(text, options.positive) & present
        neg = (_named(text, options.negative) if options.negative else ~pos) & present
        for flag, named, hits in (("--positive", options.positive, pos),
                                  ("--negative", options.negative, neg)):  # fmt: skip
            if named and not hits.any():  # a typo: every metric would be n/a, with exit 0
                found = sorted(set(text[present].tolist()))
                shown = ", ".join(found[:8]) + (f", ... ({len(found)} values)" if len(found) > 8
                                                else "")  # fmt: skip
                raise GoatDNAError(
                    f"{flag} {','.join(named)}: no row's --label {options.label!r} is one of "
                    f"these; its values are {shown or 'none (every cell is empty)'}"
                )
        if options.positive and options.negative and (pos & neg).any():
            raise GoatDNAError("--positive and --negative name the same label value")
        return pos | neg, pos
    numbers = pd.to_numeric(values, errors="coerce")
    bad = present & numbers.isna().to_numpy()
    if bad.any():
        raise GoatDNAError(
            f"--label {options.label!r}: value {values.iloc[int(np.flatnonzero(bad)[0])]!r} is not "
            "0/1; name the positive values with --positive (e.g. --positive Pathogenic)"
        )
    numeric = numbers.to_numpy(dtype=np.float64)
    if not np.isin(numeric[present], (0.0, 1.0)).all():
        raise GoatDNAError(
            f"--label {options.label!r}: binary labels must be 0/1 or true/false; use --kind "
            "continuous for a continuous label, or --positive to name the positive values"
        )
    return present, numeric == 1.0


def _kind(values: pd.Series, options: EvalOptions, notes: list[str]) -> str:
    """The label's kind. With ``--kind auto`` a label is binary only when its values are exactly
    0 and 1 (or true/false); two other values (-1/1, 1/2) are refused, since which one is
    positive is the user's to say; more values are continuous, with a note when they are a few
    integers beside 0 and 1 (a stray 2 in a 0/1 column is then visible, not silent)."""
    import pandas as pd

    if options.kind != "auto":
        return options.kind
    if options.positive or options.negative:
        return "binary"
    if pd.api.types.is_bool_dtype(values):
        return "binary"
    numbers = pd.to_numeric(values, errors="coerce")
    if values.notna().any() and numbers[values.notna()].isna().any():
        raise GoatDNAError(
            f"--label {options.label!r} holds text; name the positive values with --positive "
            "(e.g. --positive Pathogenic,Likely_pathogenic)"
        )
    distinct = sorted(set(numbers.dropna().tolist()))
    if set(distinct) <= {0.0, 1.0}:
        return "binary"
    shown = ", ".join(f"{v:g}" for v in distinct[:6]) + (", ..." if len(distinct) > 6 else "")
    if len(distinct) == 2:
        raise GoatDNAError(
            f"--label {options.label!r} has two values ({shown}): a binary label is 0/1; name "
            f"the positive value (--positive {distinct[1]:g}) or pass --kind continuous"
        )
    if (
        len(distinct) <= 10
        and {0.0, 1.0} <= set(distinct)
        and all(float(v).is_integer() for v in distinct)
    ):
        notes.append(
            f"--label {options.label!r} takes {len(distinct)} values ({shown}), not just 0 and "
            "1: evaluated as continuous (--positive names the positive values of a binary label)"
        )
    return "continuous"


def _cells(frame: pd.DataFrame, column: str) -> np.ndarray:
    """A subset or match-group column as text, None where the cell is empty (such a row is in
    no subset and no group: it still counts in "all")."""
    cells = frame[column]
    text = cells.astype(str).str.strip()
    present = (cells.notna() & (text != "")).to_numpy()
    out = text.to_numpy(dtype=object)
    out[~present] = None
    return out


Metric = Callable[[np.ndarray, np.ndarray], float]


def _metrics_of(labels, scores, groups, kind: str, options: EvalOptions, column: str,
                subset: str, tick: Callable[[], None] | None = None) -> list[MetricRow]:  # fmt: skip
    rows = []
    binary: tuple[tuple[str, Metric], ...] = (("auroc", vm.auroc), ("auprc", vm.average_precision))
    continuous: tuple[tuple[str, Metric], ...] = (
        ("spearman", vm.spearman),
        ("pearson", vm.pearson),
    )
    n = int(labels.size)
    if kind == "binary":
        n_pos = int(labels.sum())
        for name, metric in binary:
            e = vm.bootstrap_binary(
                metric, labels, scores, options.resamples, options.seed, options.level, tick
            )
            rows.append(MetricRow(column, subset, name, e.value, e.low, e.high, n, n_pos))
        if groups is not None:
            grouped = np.asarray([g is not None for g in groups], dtype=bool)
            e = vm.bootstrap_grouped(
                labels[grouped], scores[grouped], groups[grouped].astype(str),
                options.resamples, options.seed, options.level, tick,
            )  # fmt: skip
            rows.append(
                MetricRow(
                    column,
                    subset,
                    PAIRWISE_METRIC,
                    e.value,
                    e.low,
                    e.high,
                    int(grouped.sum()),
                    int(labels[grouped].sum()),
                )  # fmt: skip
            )
    else:
        for name, metric in continuous:
            e = vm.bootstrap_paired(
                metric, scores, labels, options.resamples, options.seed, options.level, tick
            )
            rows.append(MetricRow(column, subset, name, e.value, e.low, e.high, n, None))
    return rows


def evaluate_variants(
    frame: pd.DataFrame, options: EvalOptions, progress: Callable[[int, int], None] | None = None
) -> VariantEvaluation:
    """Metrics of ``frame`` (scores with the label, subset and match-group columns joined);
    ``progress(done, total)`` after each bootstrap resample, for a progress line."""
    import pandas as pd

    for column in (
        options.label,
        *options.subsets,
        *([options.match_group] if options.match_group else []),
    ):
        if column not in frame.columns:
            raise GoatDNAError(
                f"no column {column!r} in the scores (or the labels joined to them); it has "
                f"{', '.join(map(str, frame.columns))}"
            )
    score = signed_score(frame, options.score)
    status = (
        frame["status"].astype(str).to_numpy()
        if "status" in frame.columns
        else np.full(len(frame), "ok")
    )
    scored = (status == "ok") & np.isfinite(score)
    unscored_status = np.where(status == "ok", "no_score", status)[~scored]
    unscored = {
        str(k): int(v) for k, v in zip(*np.unique(unscored_status, return_counts=True), strict=True)
    }
    values = frame[options.label]
    notes: list[str] = []
    kind = _kind(values[scored], options, notes)
    if kind == "continuous" and options.match_group:
        raise GoatDNAError(
            f"--match-group {options.match_group!r}: pairwise accuracy compares positives with "
            f"negatives, and --label {options.label!r} is continuous; drop --match-group, or "
            "make the label binary (--positive, or --kind binary for a 0/1 label)"
        )
    if kind == "binary":
        labelled, positive = _binary_labels(values, options)
        target = positive.astype(np.float64)
    else:
        numbers = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
        labelled, target = np.isfinite(numbers), numbers
    use = scored & labelled
    result = VariantEvaluation(
        score=options.score, label=options.label, kind=kind, level=options.level,
        resamples=options.resamples, rows=len(frame), unscored=unscored,
        unlabelled=int((scored & ~labelled).sum()), evaluated=int(use.sum()), notes=notes,
    )  # fmt: skip
    labels = target[use] if kind == "continuous" else target[use].astype(bool)
    scores = score[use]
    groups = _cells(frame, options.match_group)[use] if options.match_group else None
    subset_keys = {column: _cells(frame, column)[use] for column in options.subsets}
    check_bootstrap_cost(options, int(use.sum()), subset_keys, kind, groups is not None)
    result.labels, result.scores = labels, scores
    sets = 1 + sum(len({k for k in keys if k is not None}) for keys in subset_keys.values())
    total = options.resamples * sets * (2 + (kind == "binary" and groups is not None))
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    result.metrics += _metrics_of(labels, scores, groups, kind, options, "all", "all", tick)
    for column, keys in subset_keys.items():
        result.subset_values[column] = keys
        for value in sorted({k for k in keys if k is not None}):
            member = keys == value
            result.metrics += _metrics_of(labels[member], scores[member],
                                          None if groups is None else groups[member], kind,
                                          options, column, value, tick)  # fmt: skip
    return result


def check_bootstrap_cost(
    options: EvalOptions, rows: int, subsets: dict[str, np.ndarray], kind: str, grouped: bool
) -> None:
    """Refuse, before any resample, a bootstrap estimated to run longer than
    MAX_BOOTSTRAP_SECONDS: each resample evaluates every metric on the whole set and again on
    each subset column's rows (about 30 us per call plus 0.1 us per row, measured on one core)."""
    metrics = 2 + (kind == "binary" and grouped)
    calls = options.resamples * metrics * (1 + len(subsets))
    seconds = calls * (30e-6 + rows * 1e-7)
    if seconds > MAX_BOOTSTRAP_SECONDS:
        fit = int(options.resamples * MAX_BOOTSTRAP_SECONDS / seconds)
        raise GoatDNAError(
            f"--bootstrap {options.resamples}: {rows:,} rows x {metrics} metrics x "
            f"{1 + len(subsets)} row set(s) would take about {seconds / 60:,.0f} minutes; use "
            f"at most {fit:,} resamples here (1000 is the default)"
        )


METRIC_COLUMNS = ("subset_column", "subset", "metric", "value", "low", "high", "n", "n_positive")


def write_metrics(evaluation: VariantEvaluation, out: Path) -> None:
    """``.tsv`` (one row per metric and subset, 6 decimals) or ``.json`` (with the counts)."""
    import pandas as pd

    from goatdna.atomic import atomic_path, atomic_write_text

    if out.name.lower().endswith(".json"):
        atomic_write_text(out, json_text(evaluation.as_json()))
        return
    frame = pd.DataFrame([asdict(m) for m in evaluation.metrics], columns=list(METRIC_COLUMNS))
    frame["n_positive"] = frame["n_positive"].astype("Int64")
    with atomic_path(out) as tmp:
        frame.to_csv(tmp, sep="\t", index=False, float_format="%.6f", na_rep="")


def plot_paths(evaluation_kind: str, folder: Path) -> list[Path]:
    return (
        [folder / "roc.png", folder / "pr.png"]
        if evaluation_kind == "binary"
        else [folder / "scatter.png"]
    )
