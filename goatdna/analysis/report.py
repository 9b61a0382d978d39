"""`goatdna report`: GOAT against RoPE, side by side, as tables, plots, markdown and one HTML file.

For every run directory: load the best checkpoint, evaluate it on the validation split at each
context length (training length and beyond), let it continue the same test-split prompts for the
GC study, and read training throughput and peak memory from the run's summary.json. Everything
the report shows is also written as CSV/JSON next to it, so a number in report.md can be traced to
a file.

Output directory:
``summary.csv`` (one row per model: model, positional, params, val_nll, bits_per_base,
tokens_per_s, peak_memory_gb, gc_mae, gc_rmse, gc_pearson, base_accuracy), ``evaluation.csv`` /
``evaluation.json`` (every context length, repeat/non-repeat split), ``gc_continuations.csv``,
``gc_summary.csv``, ``*.png``, ``report.md`` and ``report.html`` (self-contained: plots embedded
as base64 PNG).
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import math
import os
import re
import secrets
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from goatdna.analysis.evaluate import (
    DEFAULT_BATCH_TOKENS,
    ContextResult,
    Evaluation,
    default_context_lengths,
    evaluate_context,
    evaluate_model,
)
from goatdna.analysis.generate import model_device
from goatdna.analysis.output import atomic_write_text
from goatdna.atomic import check_output_dir
from goatdna.checkpoint import (
    best_checkpoint,
    load_checkpoint,
    read_summary,
    train_length_of,
)
from goatdna.errors import GoatDNAError
from goatdna.locking import folder_lock

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
BYTES_PER_GB = 1e9


@dataclass
class ReportOptions:
    """What `goatdna report` compares and how much work it spends on it."""

    runs: list[Path]
    data_dir: Path
    out_dir: Path
    names: list[str] | None = None  # default: the run directories' names
    split: str = "val"
    context_lengths: list[int] | None = None  # default: training length x 1, 2, 4, 8
    max_eval_tokens: int | None = 1_048_576  # predicted bases per context length and model
    batch_tokens: int = DEFAULT_BATCH_TOKENS
    gc_split: str = "test"
    n_prompts: int = 100
    samples_per_prompt: int = 1
    prompt_length: int = 200
    continuation_length: int = 200
    temperature: float = 1.0
    top_k: int | None = None
    seed: int = 0
    prior_layer: int | None = None  # default: the last layer
    recall_trials: int = 16  # long-range recall probe (0: skip it)
    recall_segment: int = 50
    recall_distances: list[int] | None = None  # default: default_recall_distances()
    heatmap_length: int = 128
    trajectory_prompts: int = 3
    device: str = "cpu"


@dataclass
class RunData:
    """One run as the report sees it."""

    name: str
    run_dir: Path
    checkpoint: Path
    model: Any
    config: dict[str, Any]
    summary: dict[str, Any]
    metrics: Any  # DataFrame or None
    train_length: int
    evaluation: Evaluation | None = None
    validation: ContextResult | None = None  # training length, the run's validation windows

    @property
    def positional(self) -> str:
        return str(self.config["model"].get("positional", ""))


@dataclass
class ReportResult:
    out_dir: Path
    summary: Any  # DataFrame with SUMMARY_COLUMNS
    files: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _unique_names(
    runs: Sequence[Path], names: Sequence[str] | None, positionals: Sequence[str]
) -> list[str]:
    """Model names: given ones, else run directory names, else the positional schemes
    (runs/x/goat and runs/y/goat-like layouts), else directory names with a counter."""
    if names is not None:
        if len(names) != len(runs):
            raise GoatDNAError(f"--name given {len(names)} times for {len(runs)} runs")
        if len(set(names)) != len(names):
            raise GoatDNAError("model names must be distinct")
        return list(names)
    dir_names = [Path(run).resolve().name or "run" for run in runs]
    if len(set(dir_names)) == len(dir_names):
        return dir_names
    if len(set(positionals)) == len(positionals):
        return list(positionals)
    out: list[str] = []
    for base in dir_names:
        name, i = base, 2
        while name in out:
            name, i = f"{base}-{i}", i + 1
        out.append(name)
    return out


def _find_values(obj: Any, key: str) -> list[Any]:
    """All values stored under ``key`` anywhere in nested dicts/lists."""
    found: list[Any] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == key:
                found.append(v)
            found.extend(_find_values(v, key))
    elif isinstance(obj, list):
        for v in obj:
            found.extend(_find_values(v, key))
    return found


def load_run(run_dir: Path, name: str, device: str = "cpu") -> RunData:
    """Read a run directory: best checkpoint, config, summary.json, metrics.csv."""
    import pandas as pd

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise GoatDNAError(f"{run_dir}: run directory not found (train one with `goatdna train`)")
    checkpoint = best_checkpoint(run_dir)
    summary = read_summary(run_dir)
    model, config = load_checkpoint(checkpoint, device=device)
    metrics_path = run_dir / "metrics.csv"
    metrics = pd.read_csv(metrics_path) if metrics_path.is_file() else None
    return RunData(
        name=name,
        run_dir=run_dir,
        checkpoint=checkpoint,
        model=model,
        config=config,
        summary=summary,
        metrics=metrics,
        train_length=train_length_of(config),
    )


def validation_nll(run: RunData, genome: Any, split: str, batch_tokens: int) -> ContextResult:
    """NLL at the training length over the run's validation windows of ``split``.

    The held-out windows (`goatdna.data_prep.heldout`) at L = seq_len capped at the run's
    ``data.val_max_windows``: on the val split, the windows `goatdna train` validated on, so this
    is summary.json's ``best_val_loss`` recomputed from best.ckpt (same definition, same windows).
    """
    data = run.config.get("data") or {}
    cap = data.get("val_max_windows") if isinstance(data, dict) else None
    length = run.train_length
    return evaluate_context(
        run.model,
        genome.tokens(split),
        genome.records(split),
        length,
        length,
        max_tokens=cap * length if isinstance(cap, int) else None,
        batch_tokens=batch_tokens,
        device=model_device(run.model),
    )


def _num(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def build_summary(runs: Sequence[RunData], gc_summaries: dict[str, Any]) -> Any:
    """The summary table: one row per model (SUMMARY_COLUMNS)."""
    import pandas as pd

    rows = []
    for run in runs:
        assert run.evaluation is not None
        at_train = run.validation or run.evaluation.at(run.train_length)
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


# ----------------------------------------------------------------------------- formatting


def _fmt(value: Any, spec: str) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "n/a"
    if isinstance(value, str):
        return value
    try:
        return format(value, spec)
    except (TypeError, ValueError):
        return str(value)


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


def formatted(frame: Any, formats: dict[str, str], default: str = ".4g") -> list[list[str]]:
    """Rows of strings (header first) with per-column number formats."""
    header = [str(c) for c in frame.columns]
    body = []
    for row in frame.itertuples(index=False):
        cells = []
        for column, value in zip(frame.columns, row, strict=True):
            if isinstance(value, bool):
                cells.append("yes" if value else "no")
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                cells.append(_fmt(value, formats.get(column, default)))
            else:
                cells.append(str(value))
        body.append(cells)
    return [header, *body]


def markdown_table(rows: list[list[str]]) -> str:
    header, *body = rows

    def row(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    lines = [row(header), "|" + "|".join("---" for _ in header) + "|"]
    lines += [row(r) for r in body]
    return "\n".join(lines)


def html_table(rows: list[list[str]]) -> str:
    header, *body = rows
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    trs = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{trs}</tbody></table>"


def extrapolation_frame(runs: Sequence[RunData]) -> Any:
    """Context length x model: NLL (nats/base) and bits/base, with the extrapolation factor."""
    import pandas as pd

    lengths = sorted({r.context_length for run in runs for r in run.evaluation.results})
    base = min(run.train_length for run in runs)
    rows = []
    for length in lengths:
        row: dict[str, Any] = {
            "context_length": length,
            "x_train_length": f"{length / base:g}x",
        }
        for run in runs:
            try:
                res = run.evaluation.at(length)
                row[f"{run.name} nll"] = res.nll
                row[f"{run.name} bits/base"] = res.bits_per_base
            except KeyError:
                row[f"{run.name} nll"] = math.nan
                row[f"{run.name} bits/base"] = math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def repeat_frame(runs: Sequence[RunData]) -> Any:
    """At training length: NLL on soft-masked (repeat) vs unmasked targets, per model."""
    import pandas as pd

    rows = []
    for run in runs:
        r = run.evaluation.at(run.train_length)
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


def paper_frame(summary: Any) -> Any | None:
    """The paper's DNA numbers beside ours, when the report holds one GOAT and one RoPE model."""
    import pandas as pd

    by_pos = {p: summary[summary["positional"] == p] for p in ("goat", "rope")}
    if any(len(part) != 1 for part in by_pos.values()):
        return None
    goat, rope = by_pos["goat"].iloc[0], by_pos["rope"].iloc[0]
    metrics = [
        ("validation NLL (nats/base)", "nll", "val_nll", ".4f"),
        ("bits/base", "bits_per_base", "bits_per_base", ".3f"),
        ("training tokens/s", "tokens_per_s", "tokens_per_s", ",.0f"),
        ("peak memory (GB)", "peak_memory_gb", "peak_memory_gb", ".2f"),
    ]
    rows = []
    for label, paper_key, our_key, spec in metrics:
        p_rope, p_goat = PAPER_DNA["rope"][paper_key], PAPER_DNA["goat"][paper_key]
        o_rope, o_goat = float(rope[our_key]), float(goat[our_key])
        rows.append(
            {
                "metric": label,
                "paper RoPE": _fmt(float(p_rope), spec),
                "paper GOAT": _fmt(float(p_goat), spec),
                "paper GOAT vs RoPE": _fmt(100 * (p_goat - p_rope) / p_rope, "+.1f") + "%",
                "ours RoPE": _fmt(o_rope, spec),
                "ours GOAT": _fmt(o_goat, spec),
                "ours GOAT vs RoPE": (
                    _fmt(100 * (o_goat - o_rope) / o_rope, "+.1f") + "%"
                    if o_rope and math.isfinite(o_rope) and math.isfinite(o_goat)
                    else "n/a"
                ),
            }
        )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- documents


@dataclass
class _Section:
    title: str
    text: str = ""
    table: list[list[str]] | None = None
    image: Path | None = None


def markdown_escape(text: str) -> str:
    """Backslash-escape the characters that would end or nest a Markdown link text or cell."""
    return re.sub(r"([\\`*_\[\]()<>|#!])", r"\\\1", text)


def _render_markdown(title: str, intro: str, sections: Sequence[_Section]) -> str:
    parts = [f"# {title}", "", intro, ""]
    for s in sections:
        parts += [f"## {s.title}", ""]
        if s.text:
            parts += [s.text, ""]
        if s.table is not None:
            parts += [markdown_table(s.table), ""]
        if s.image is not None:
            parts += [f"![{markdown_escape(s.title)}](<{s.image.name}>)", ""]
    return "\n".join(parts)


_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.92em}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right}
th{background:#f3f3f3} td:first-child,th:first-child{text-align:left}
img{max-width:100%;border:1px solid #eee;margin:.4em 0 1.2em}
code{background:#f6f6f6;padding:0 .2em} .note{color:#555;font-size:.92em}
"""


def _inline_markdown(text: str) -> str:
    """Escape text for HTML, keeping `code` spans and paragraphs from the markdown source."""
    out = []
    for para in text.split("\n\n"):
        escaped = html.escape(para)
        pieces = escaped.split("`")
        escaped = "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(pieces))
        out.append(f"<p>{escaped}</p>")
    return "\n".join(out)


def _render_html(title: str, intro: str, sections: Sequence[_Section]) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        _inline_markdown(intro),
    ]
    for s in sections:
        parts.append(f"<h2>{html.escape(s.title)}</h2>")
        if s.text:
            parts.append(_inline_markdown(s.text))
        if s.table is not None:
            parts.append(html_table(s.table))
        if s.image is not None:
            data = base64.b64encode(s.image.read_bytes()).decode("ascii")
            parts.append(f'<img alt="{html.escape(s.title)}" src="data:image/png;base64,{data}">')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# ----------------------------------------------------------------------------- the pipeline


def build_report(options: ReportOptions, log: Callable[[str], None] | None = None) -> ReportResult:
    """Run the whole comparison and write the report directory.

    Every option, the runs and the output location are checked before any work; the report is
    written into a staging folder and swapped in whole, under the output folder's lock.
    """
    from goatdna.data_prep import ShardedGenome

    say = log or (lambda _msg: None)
    if not options.runs:
        raise GoatDNAError("give at least one --run directory (usually a GOAT and a RoPE run)")
    final_dir = Path(options.out_dir)
    check_report_out(final_dir)
    genome = ShardedGenome(options.data_dir)
    for split, flag in ((options.split, "--split"), (options.gc_split, "GC study split")):
        if split not in genome.split_names():
            raise GoatDNAError(
                f"{flag} {split!r}: {options.data_dir} has no bases there; choose one of "
                f"{', '.join(genome.split_names())}"
            )
    result = ReportResult(out_dir=final_dir, summary=None)

    runs = [load_run(Path(r), "", options.device) for r in options.runs]
    names = _unique_names(options.runs, options.names, [run.positional for run in runs])
    for run, name in zip(runs, names, strict=True):
        run.name = name
    _check_prior_layer(options.prior_layer, runs)
    recall = plan_recall(options, runs, genome)
    with folder_lock(final_dir, "--out"):
        check_report_out(final_dir)  # again, now that no other report can write there
        with staging_folder(final_dir) as out_dir:
            _write_report(options, genome, runs, out_dir, result, say, recall)
    result.files = [final_dir / path.name for path in result.files]
    return result


REPORT_FILES = frozenset(
    {
        "summary.csv",
        "evaluation.csv",
        "evaluation.json",
        "gc_continuations.csv",
        "gc_summary.csv",
        "nll_vs_context.png",
        "training_curves.png",
        "gc_trajectories.png",
        "recall_trials.csv",
        "recall_summary.csv",
        "recall.png",
        "report.md",
        "report.html",
        ".demo_report.json",  # `goatdna demo`'s record of what its report was built from
    }
)
REPORT_PATTERNS = ("prior_curves_*.png", "prior_heatmap_*.png")


def _is_report_file(path: Path) -> bool:
    return path.is_file() and (
        path.name in REPORT_FILES or any(path.match(p) for p in REPORT_PATTERNS)
    )


def check_report_out(out_dir: Path) -> None:
    """--out must be new, empty, or an earlier report (it is replaced as a whole)."""
    check_output_dir(out_dir, "--out")
    if out_dir.is_dir():
        foreign = sorted(p.name for p in out_dir.iterdir() if not _is_report_file(p))
        if foreign:
            raise GoatDNAError(
                f"--out {out_dir} holds files a report did not write ({', '.join(foreign[:3])}"
                f"{', ...' if len(foreign) > 3 else ''}); the report replaces its folder as a "
                "whole, so choose an empty or new folder"
            )


def _check_prior_layer(layer: int | None, runs: Sequence[RunData]) -> None:
    if layer is None:
        return
    for run in runs:
        if run.positional != "goat":
            continue
        n_layers = len(run.model.blocks)
        if not 0 <= layer < n_layers:
            raise GoatDNAError(
                f"--prior-layer {layer}: {run.name} has layers 0..{n_layers - 1}; choose one "
                "of those (default: the last)"
            )


@contextmanager
def staging_folder(final_dir: Path) -> Iterator[Path]:
    """Build the report in a hidden sibling folder; swap it in only when every file is written.

    An earlier report is replaced as a whole (never mixed with the new one); on any error the
    staging folder is removed and the earlier report stays as it was.
    """
    final_dir = final_dir.absolute()
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = final_dir.with_name(f".{final_dir.name}.staging-{os.getpid()}-{secrets.token_hex(4)}")
    staging.mkdir()  # the umask's usual mode (mkdtemp's 0700 would hide the report from others)
    try:
        yield staging
        old = None
        if final_dir.exists():
            old = final_dir.with_name(f".{final_dir.name}.old-{os.getpid()}")
            os.rename(final_dir, old)
        os.rename(staging, final_dir)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _write_report(
    options: ReportOptions,
    genome: Any,
    runs: list[RunData],
    out_dir: Path,
    result: ReportResult,
    say: Callable[[str], None],
    recall: RecallPlan | None = None,
) -> None:
    """Evaluate, run the GC study, draw and write everything into ``out_dir``."""
    import pandas as pd

    from goatdna.analysis import plots
    from goatdna.analysis.gc_study import run_gc_study, summary_frame
    from goatdna.analysis.prompts import draw_prompts

    for run in runs:
        shas = {
            v
            for key in ("manifest_sha256", "data_manifest_sha256")
            for v in _find_values([run.config, run.summary], key)
            if isinstance(v, str)
        }
        if shas and genome.manifest_sha256 not in shas:
            result.warnings.append(
                f"run {run.name} was trained on shards with manifest sha256 "
                f"{sorted(shas)[0][:12]}..., but the report evaluates {options.data_dir} "
                f"({genome.manifest_sha256[:12]}...)"
            )

    # 1. NLL per context length on the validation split.
    lengths = set(options.context_lengths or default_context_lengths(runs[0].train_length))
    lengths.update(run.train_length for run in runs)  # val_nll is read at the training length
    context_lengths = sorted(lengths)
    for run in runs:
        say(f"evaluating {run.name} ({run.positional}) on {options.split} at {context_lengths}")
        results = evaluate_model(
            run.model,
            genome,
            options.split,
            context_lengths,
            run.train_length,
            options.max_eval_tokens,
            options.batch_tokens,
        )
        run.validation = validation_nll(run, genome, options.split, options.batch_tokens)
        run.evaluation = Evaluation(
            checkpoint=str(run.checkpoint),
            data=str(options.data_dir),
            manifest_sha256=genome.manifest_sha256,
            split=options.split,
            positional=run.positional,
            train_length=run.train_length,
            max_tokens=options.max_eval_tokens,
            results=results,
        )
    eval_frame = pd.concat(
        [run.evaluation.frame().assign(model=run.name) for run in runs], ignore_index=True
    )
    eval_frame = eval_frame[["model", *[c for c in eval_frame.columns if c != "model"]]]
    result.files.append(
        atomic_write_text(out_dir / "evaluation.csv", eval_frame.to_csv(index=False))
    )
    result.files.append(
        atomic_write_text(
            out_dir / "evaluation.json",
            json.dumps({run.name: run.evaluation.to_json() for run in runs}, indent=2) + "\n",
        )
    )

    # 2. GC% continuation study on the same prompts for every model.
    say(f"GC study: {options.n_prompts} prompts x {options.samples_per_prompt} samples")
    prompts = draw_prompts(
        genome,
        options.gc_split,
        options.n_prompts,
        options.prompt_length,
        options.continuation_length,
        options.seed,
    )
    gc_rows, gc_summaries = run_gc_study(
        {run.name: run.model for run in runs},
        prompts,
        options.samples_per_prompt,
        options.seed,
        options.temperature,
        options.top_k,
    )
    result.files.append(
        atomic_write_text(out_dir / "gc_continuations.csv", gc_rows.to_csv(index=False))
    )
    gc_table = summary_frame(gc_summaries)
    result.files.append(atomic_write_text(out_dir / "gc_summary.csv", gc_table.to_csv(index=False)))

    # 2b. Long-range recall probe on the same trials for every model.
    recall_summaries = _recall_probe(options, recall, runs, genome, out_dir, say, result)

    # 3. The summary table.
    summary = build_summary(runs, gc_summaries)
    result.summary = summary
    result.files.append(atomic_write_text(out_dir / "summary.csv", summary.to_csv(index=False)))

    # 4. Plots.
    say("drawing plots")
    images: dict[str, Path] = {}
    images["nll"] = plots.plot_nll_vs_context(
        {run.name: run.evaluation.frame() for run in runs},
        {run.name: run.train_length for run in runs},
        out_dir / "nll_vs_context.png",
    )
    with_metrics = {run.name: run.metrics for run in runs if run.metrics is not None}
    if with_metrics:
        images["training"] = plots.plot_training_curves(
            with_metrics, out_dir / "training_curves.png"
        )
    images["gc"] = plots.plot_gc_trajectories(
        gc_rows, out_dir / "gc_trajectories.png", options.trajectory_prompts
    )
    if recall_summaries:
        images["recall"] = plots.plot_recall(
            recall_summaries,
            {run.name: run.train_length for run in runs},
            options.recall_segment,
            out_dir / "recall.png",
        )
    prior_images: list[tuple[str, int, Path, Path]] = []
    used_stems: set[str] = set()
    for run in runs:
        if run.positional != "goat":
            continue
        n_layers = len(run.model.blocks)
        layer = n_layers - 1 if options.prior_layer is None else options.prior_layer
        prior = run.model.blocks[layer].attn.prior
        stem = file_safe(run.name)
        while stem in used_stems:  # two names that differ only in unsafe characters
            stem += "_"
        used_stems.add(stem)
        curves = plots.plot_prior_curves(
            prior, run.train_length, layer, out_dir / f"prior_curves_{stem}_layer{layer}.png"
        )
        heat = plots.plot_prior_heatmap(
            prior,
            layer,
            out_dir / f"prior_heatmap_{stem}_layer{layer}.png",
            min(options.heatmap_length, run.train_length),
        )
        prior_images.append((run.name, layer, curves, heat))
    result.files.extend(images.values())
    result.files.extend(p for _, _, c, h in prior_images for p in (c, h))

    # 5. report.md and report.html from the same sections.
    sections = _sections(options, runs, summary, gc_table, images, prior_images, result.warnings)
    if recall_summaries:  # after the GC section, before the priors
        sections.insert(
            len(sections) - 2 * len(prior_images),
            _recall_section(options, recall_summaries, images),
        )
    title = "goatdna report: " + " vs ".join(run.name for run in runs)
    intro = _intro(options, runs, genome)
    result.files.append(
        atomic_write_text(out_dir / "report.md", _render_markdown(title, intro, sections))
    )
    result.files.append(
        atomic_write_text(out_dir / "report.html", _render_html(title, intro, sections))
    )


def file_safe(name: str) -> str:
    """A model name as a file-name piece: letters, digits, '.', '_' and '-' only."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    return safe or "model"


def default_recall_distances(train_length: int, segment_length: int) -> list[int]:
    """Filler lengths for the report's recall probe: two inside the training window (the longest
    that fits, ``L + 1 - 2S``, and a quarter of it) and one at four training lengths."""
    fits = max(1, train_length + 1 - 2 * segment_length)
    return sorted({max(1, fits // 4), fits, 4 * train_length})


@dataclass(frozen=True)
class RecallPlan:
    """The recall probe's distances and trials, drawn before any work (same for every model)."""

    distances: list[int]
    trials: list[Any]


def plan_recall(options: ReportOptions, runs: Sequence[RunData], genome: Any) -> RecallPlan | None:
    """Draw the probe's trials up front, so a split too small for them fails before any work."""
    from goatdna.analysis.recall import draw_trials

    if options.recall_trials < 1:
        return None
    distances = options.recall_distances or default_recall_distances(
        min(run.train_length for run in runs), options.recall_segment
    )
    trials = draw_trials(
        genome, options.gc_split, options.recall_trials, options.recall_segment,
        max(distances), options.seed,
    )  # fmt: skip
    return RecallPlan(distances, trials)


def _recall_probe(
    options: ReportOptions,
    plan: RecallPlan | None,
    runs: Sequence[RunData],
    genome: Any,
    out_dir: Path,
    say: Callable[[str], None],
    result: ReportResult,
) -> dict[str, Any]:
    """Score every run on the same recall trials; write recall_trials.csv / recall_summary.csv."""
    import pandas as pd

    from goatdna.analysis.recall import recall_frame, score_recall, summarize_recall

    if plan is None:
        return {}
    say(f"recall probe: {len(plan.trials)} trials at distances {plan.distances}")
    tokens = genome.tokens(options.gc_split)
    frames, summaries = [], {}
    for run in runs:
        rows = score_recall(
            run.model, tokens, plan.trials, plan.distances, options.recall_segment,
            options.batch_tokens,
        )  # fmt: skip
        frame = recall_frame(rows)
        summaries[run.name] = summarize_recall(frame, run.train_length, options.recall_segment)
        frames.append(frame.assign(model=run.name))
    per_trial = pd.concat(frames, ignore_index=True)
    table = pd.concat([f.assign(model=n) for n, f in summaries.items()], ignore_index=True)
    result.files.append(
        atomic_write_text(out_dir / "recall_trials.csv", per_trial.to_csv(index=False))
    )
    result.files.append(
        atomic_write_text(out_dir / "recall_summary.csv", table.to_csv(index=False))
    )
    return summaries


def _recall_section(
    options: ReportOptions, summaries: dict[str, Any], images: dict[str, Path]
) -> _Section:
    import pandas as pd

    table = pd.concat([f.assign(model=n) for n, f in summaries.items()], ignore_index=True)
    table = table[["model", "distance", "nll_first", "nll_second", "recall_gain",
                   "recall_gain_se", "copy_accuracy", "extrapolation"]]  # fmt: skip
    return _Section(
        "Long-range recall (DNA passkey probe)",
        f"{options.recall_trials} trials: a {options.recall_segment}-base segment from the "
        f"`{options.gc_split}` split, then `distance` bases of real filler DNA, then the same "
        "segment again (the same trials for every model). `recall_gain` = NLL of the first copy "
        "- NLL of the second (nats/base; ln 4 = 1.386 for a perfect copier), `copy_accuracy`: "
        "greedy predictions right on the second copy. `extrapolation`: the probe is longer than "
        "the training length. Per-trial rows: recall_trials.csv.",
        formatted(table, {"distance": ",d"}, ".4f"),
        images["recall"],
    )


def _intro(options: ReportOptions, runs: Sequence[RunData], genome: Any) -> str:
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"Generated {when} from shards `{options.data_dir}` (manifest sha256 "
        f"`{genome.manifest_sha256[:16]}...`).",
        "",
        "Runs: "
        + "; ".join(
            f"`{run.name}` = {run.positional}, checkpoint `{run.checkpoint}`, "
            f"{run.summary.get('steps', '?')} steps on {run.summary.get('device', '?')} "
            f"({run.summary.get('precision', '?')}), training length {run.train_length}"
            for run in runs
        )
        + ".",
    ]
    return "\n".join(lines)


def _sections(
    options: ReportOptions,
    runs: Sequence[RunData],
    summary: Any,
    gc_table: Any,
    images: dict[str, Path],
    prior_images: Sequence[tuple[str, int, Path, Path]],
    warnings: Sequence[str],
) -> list[_Section]:
    sections: list[_Section] = []
    if warnings:
        sections.append(_Section("Warnings", "\n\n".join(warnings)))
    sections.append(
        _Section(
            "Summary",
            f"`val_nll`: mean NLL in nats per predicted base of the best checkpoint on the "
            f"`{options.split}` split at the training context length over the run's validation "
            "windows (`data.val_max_windows` held-out windows; N targets excluded): on the val "
            "split the same windows `goatdna train` validates on, so it equals summary.json's "
            "`best_val_loss`; `bits_per_base` = val_nll / ln 2. "
            "`tokens_per_s` and `peak_memory_gb` (10^9 bytes; CUDA max allocated on GPU, peak RSS "
            "on CPU) come from each run's summary.json. GC columns: the GC study below "
            "(GC as fractions).",
            formatted(summary, SUMMARY_FORMATS),
        )
    )
    paper = paper_frame(summary)
    if paper is not None:
        sections.append(
            _Section(
                "The paper's DNA numbers beside ours",
                "Paper: ~125M decoders trained on hg38 on one GPU in bf16 (RoPE -> GOAT). Ours: "
                "whatever these runs are (the demo trains tiny models on a synthetic genome on "
                "CPU), so compare the direction and size of the change, not absolute values.",
                formatted(paper, {}),
            )
        )
    sections.append(
        _Section(
            "NLL vs context length (extrapolation)",
            f"Non-overlapping windows over the `{options.split}` split; at most "
            f"{options.max_eval_tokens if options.max_eval_tokens else 'all'} predicted bases per "
            "context length. Rows beyond 1x are longer than the training length.",
            formatted(extrapolation_frame(runs), {"context_length": "d"}, ".4f"),
            images["nll"],
        )
    )
    sections.append(
        _Section(
            "Repeats vs unique sequence",
            "Targets split by the soft-mask (repeat) flag, at the training length.",
            formatted(
                repeat_frame(runs),
                {
                    "context_length": "d",
                    "bases": ",d",
                    "repeat bases": ",d",
                    "non-repeat bases": ",d",
                },
                ".4f",
            ),
        )
    )
    if "training" in images:
        sections.append(
            _Section("Training curves", "From each run's metrics.csv.", None, images["training"])
        )
    k = options.samples_per_prompt
    sections.append(
        _Section(
            "GC% of continuations",
            f"{options.n_prompts} prompts of {options.prompt_length} nt from the `{options.gc_split}` "
            f"split (seed {options.seed}, no N in prompt or reference), {k} sample(s) of "
            f"{options.continuation_length} nt per prompt and model (temperature "
            f"{options.temperature:g}, top-k {options.top_k or 'off'}; every model draws the same "
            "random numbers). `gc_pearson`: mean Pearson r between 25-nt sliding-window GC "
            "trajectories of continuation and reference, over samples where r is defined "
            "(`pearson_undefined` counts constant trajectories, excluded). `kmer_js_k*`: "
            "Jensen-Shannon divergence (bits) of k-mer spectra, generated vs reference set. "
            "Per-sample rows: gc_continuations.csv.",
            formatted(
                gc_table,
                {"n_samples": "d", "pearson_defined": "d", "pearson_undefined": "d"},
                ".4f",
            ),
            images["gc"],
        )
    )
    for name, layer, curves, heat in prior_images:
        sections.append(
            _Section(
                f"GOAT prior of {name}, layer {layer}",
                "Left: the key-only term u_h(j) = slope_h j + g_h(phi(j)) + sink_h 1{j=0}; right: "
                "the relative term K_rel(d) = sum_r a_r cos(w_r d) + b_r sin(w_r d). Both are "
                "added to the attention logits (nats). Shaded: positions beyond the training "
                "length.",
                None,
                curves,
            )
        )
        sections.append(
            _Section(
                f"Masked, normalised prior of {name}, layer {layer}",
                "exp(K_ij) normalised over keys j <= i for each query i: the attention each head "
                "would pay with content switched off (log colour scale).",
                None,
                heat,
            )
        )
    return sections
