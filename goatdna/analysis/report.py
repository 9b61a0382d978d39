"""`goatdna report`: GOAT, RoPE and any other runs side by side, as tables, plots, markdown and HTML.

For every run directory: load the best checkpoint, evaluate it on the validation split at each
context length (training length and beyond), let it continue the same test-split prompts for the
GC study, probe its long-range recall on the same trials, and read training throughput and peak
memory from the run's summary.json. Everything the report shows is also written as CSV/JSON next
to it, so a number in report.md can be traced to a file.

This module is the pipeline: check everything, then work in a staging folder under the output
folder's lock and swap it in whole. The tables are computed in `report_frames`, the documents
rendered in `report_render` (report.md from templates, report.html converted from it).

Output directory:
``summary.csv`` (one row per model: model, positional, params, val_nll, bits_per_base,
next_base_accuracy, tokens_per_s, peak_memory_gb, gc_mae, gc_rmse, gc_pearson, base_accuracy; val_nll and the GC
numbers with their 95% bootstrap intervals as ``_low``/``_high`` columns), ``evaluation.csv`` /
``evaluation.json`` (every context length, repeat/non-repeat split), ``gc_continuations.csv``,
``gc_summary.csv``, ``recall_trials.csv``, ``recall_summary.csv``, ``*.png``, ``report.md`` and
``report.html`` (self-contained: plots embedded as base64 PNG).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goatdna.analysis.evaluate import Evaluation, default_context_lengths, evaluate_model
from goatdna.analysis.report_figures import draw_figures, draw_priors
from goatdna.analysis.report_frames import (
    SUMMARY_COLUMNS,
    evaluation_frame,
    recall_table,
    summary_differences,
    summary_frame,
)
from goatdna.analysis.report_options import ReportOptions
from goatdna.analysis.report_render import (
    ReportDocument,
    html_document,
    markdown_document,
    report_title,
)
from goatdna.analysis.report_runs import (
    RunData,
    load_run,
    manifest_warnings,
    prior_layer,
    unique_names,
    validation_nll,
)
from goatdna.atomic import atomic_dir, atomic_write_text, check_output_dir
from goatdna.errors import GoatDNAError
from goatdna.formats import json_text
from goatdna.locking import folder_lock
from goatdna.workdir import JSONValue, claim_output_folder, input_stamp

if TYPE_CHECKING:
    import pandas as pd

    from goatdna.data_prep import ShardedGenome

__all__ = [
    "SUMMARY_COLUMNS",
    "ReportOptions",
    "ReportResult",
    "build_report",
    "check_report_out",
    "default_recall_distances",
    "load_run",
    "report_inputs",
    "report_is_current",
    "validation_nll",
]

INPUTS_FILE = "inputs.json"
"""What the report was built from (`report_inputs`: checkpoint stamps, the dataset's manifest
hash, the options), written beside it, so a caller can tell whether a kept report is current
(``goatdna demo`` rebuilds only when it is not) and a reader can see what it shows."""

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
        INPUTS_FILE,
    }
)
REPORT_PATTERNS = ("prior_curves_*.png", "prior_heatmap_*.png")


def report_inputs(options: ReportOptions) -> dict[str, JSONValue]:
    """What a report built with ``options`` depends on (JSON values; `INPUTS_FILE` holds it).

    The best checkpoint of each run by `goatdna.workdir.input_stamp` (a retrained run has a new
    one), the dataset by its manifest's sha256, and every option but where the report goes.
    """
    from goatdna.checkpoint import best_checkpoint
    from goatdna.data_prep import ShardedGenome

    settings = {
        key: [str(v) for v in value] if key == "runs" else value
        for key, value in asdict(options).items()
        if key not in ("out_dir", "data_dir")
    }
    return {
        "checkpoints": [input_stamp(best_checkpoint(run)).as_json() for run in options.runs],
        "manifest_sha256": ShardedGenome(options.data_dir).manifest_sha256,
        "options": json.loads(json.dumps(settings, default=str)),
    }


def report_is_current(options: ReportOptions, say: Callable[[str], None]) -> bool:
    """Whether the report in ``options.out_dir`` was built from these very checkpoints, data and
    options (its `INPUTS_FILE` holds what `report_inputs` says now), so a caller may keep it
    (``goatdna demo`` does). A damaged `INPUTS_FILE` is said, and the report is not current."""
    if not (options.out_dir / "report.html").is_file():
        return False
    inputs = report_inputs(options)
    path = options.out_dir / INPUTS_FILE
    if not path.is_file():
        return False
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        say(f"  {path}: damaged; building the report again")
        return False
    return bool(saved == json.loads(json.dumps(inputs)))


@dataclass
class ReportResult:
    """What a report wrote. ``summary`` is the summary table as a DataFrame; for the strings
    report.md shows, `report_frames.formatted(summary, report_frames.SUMMARY_FORMATS)`."""

    out_dir: Path
    summary: pd.DataFrame  # SUMMARY_COLUMNS
    files: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # each run's val_nll against the first run's, inside or outside the noise (report_frames)
    differences: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- checks


def _is_report_file(path: Path) -> bool:
    return path.is_file() and (
        path.name in REPORT_FILES or any(path.match(p) for p in REPORT_PATTERNS)
    )


def check_report_out(out_dir: Path, inputs: Sequence[Path] = ()) -> None:
    """--out must be new, empty, or an earlier report (it is replaced as a whole), and neither
    the current folder nor one holding an input (`goatdna.workdir.claim_output_folder`)."""
    check_output_dir(out_dir, "--out")
    claim_output_folder(out_dir, True, owns=_is_report_file, what="report", inputs=inputs)


def _check_splits(options: ReportOptions, genome: ShardedGenome) -> None:
    for split, flag in ((options.split, "--split"), (options.gc_split, "GC study split")):
        if split not in genome.split_names():
            raise GoatDNAError(
                f"{flag} {split!r}: {options.data_dir} has no bases there; choose one of "
                f"{', '.join(genome.split_names())}"
            )


def _load_runs(options: ReportOptions) -> list[RunData]:
    runs = [load_run(Path(r), "", options.device) for r in options.runs]
    names = unique_names(options.runs, options.names, [run.positional for run in runs])
    for run, name in zip(runs, names, strict=True):
        run.name = name
    for run in runs:
        if run.positional == "goat":
            prior_layer(options.prior_layer, run)
    return runs


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


def plan_recall(
    options: ReportOptions, runs: Sequence[RunData], genome: ShardedGenome
) -> RecallPlan | None:
    """Draw the probe's trials up front, so a split too small for them fails before any work."""
    from goatdna.analysis.recall import draw_trials

    if options.recall_trials < 1:
        return None
    distances = options.recall_distances or default_recall_distances(
        min(run.train_length for run in runs), options.recall_segment
    )
    trials = draw_trials(
        genome, options.gc_split, options.recall_trials, options.recall_segment,
        max(distances), options.seed, distances_option="--recall-distances",
    )  # fmt: skip
    return RecallPlan(distances, trials)


# ----------------------------------------------------------------------------- the pipeline


def build_report(
    options: ReportOptions, log: Callable[[str], None] | None = None, progress: bool = False
) -> ReportResult:
    """Run the whole comparison and write the report directory.

    ``progress``: each stage (evaluation, GC study, recall probe) shows its progress with the
    time left, as a bar on a terminal or timed lines in a log (`goatdna.progress`).

    Every option, the runs and the output location are checked before any work; the report is
    written into a staging folder and swapped in whole, under the output folder's lock.
    """
    from goatdna.data_prep import ShardedGenome

    if not options.runs:
        raise GoatDNAError("give at least one --run directory (usually a GOAT and a RoPE run)")
    final_dir = Path(options.out_dir)
    read = [*options.runs, options.data_dir]
    check_report_out(final_dir, read)
    genome = ShardedGenome(options.data_dir)
    _check_splits(options, genome)
    runs = _load_runs(options)
    recall = plan_recall(options, runs, genome)
    result = ReportResult(out_dir=final_dir, summary=None)
    with folder_lock(final_dir, "--out"):
        check_report_out(final_dir, read)  # again, now that no other report can write there
        # built in a hidden sibling folder, swapped in whole only when every file is written
        with atomic_dir(final_dir.absolute(), then="rerun the same report command") as out_dir:
            writer = _Writer(out_dir, result)
            inputs = json_text(report_inputs(options), indent=1, sort_keys=True)
            writer.text(INPUTS_FILE, inputs)
            say = log or (lambda _msg: None)
            _write_report(options, genome, runs, writer, say, recall, progress)
    result.files = [final_dir / path.name for path in result.files]
    return result


def demo_report(
    options: ReportOptions, force: bool, say: Callable[[str], None]
) -> ReportResult | None:
    """`goatdna demo`'s third stage: the report in ``options.out_dir``, kept when it is current
    (`report_is_current`; None) unless ``force``, else built (`build_report`, its stages said)."""
    current = not force and report_is_current(options, say)
    say("[bold]3/3 report[/bold] evaluate, GC% study, plots -> " + str(options.out_dir))
    if current:
        say("  report is up to date with the checkpoints; kept")
        return None
    return build_report(options, log=lambda msg: say(f"  {msg}"), progress=True)


@dataclass
class _Writer:
    """Writes the report's files into the staging folder and lists them in the result."""

    out_dir: Path
    result: ReportResult

    def text(self, name: str, text: str) -> Path:
        return self.add(atomic_write_text(self.out_dir / name, text))

    def csv(self, name: str, frame: pd.DataFrame) -> Path:
        return self.text(name, frame.to_csv(index=False))

    def add(self, path: Path) -> Path:
        self.result.files.append(path)
        return path


def _write_report(
    options: ReportOptions,
    genome: ShardedGenome,
    runs: list[RunData],
    out: _Writer,
    say: Callable[[str], None],
    recall: RecallPlan | None,
    progress: bool = False,
) -> None:
    """Evaluate, run the GC study and the recall probe, draw and write everything into ``out``."""
    out.result.warnings.extend(manifest_warnings(runs, genome.manifest_sha256, options.data_dir))
    _evaluate(options, genome, runs, out, say, progress)
    gc_rows, gc_table, gc_summaries = _gc_study(options, genome, runs, out, say, progress)
    recall_summaries, recall_summary = _recall_probe(
        options, recall, runs, genome, out, say, progress
    )
    summary = summary_frame(runs, gc_summaries)
    out.result.summary = summary
    out.result.differences = summary_differences(runs)
    out.csv("summary.csv", summary)
    say("drawing plots")
    images = draw_figures(options, runs, gc_rows, recall_summaries, out.out_dir)
    priors = draw_priors(options, runs, out.out_dir)
    for path in [*images.values(), *(p for prior in priors for p in (prior.curves, prior.heatmap))]:
        out.add(path)
    doc = ReportDocument(
        options=options,
        runs=runs,
        manifest_sha256=genome.manifest_sha256,
        summary=summary,
        gc_table=gc_table,
        recall=recall_summary,
        images=images,
        priors=priors,
        warnings=out.result.warnings,
    )
    markdown = markdown_document(doc)
    out.text("report.md", markdown)
    out.text("report.html", html_document(markdown, report_title(runs), out.out_dir))


def _evaluate(
    options: ReportOptions,
    genome: ShardedGenome,
    runs: Sequence[RunData],
    out: _Writer,
    say: Callable[[str], None],
    progress: bool = False,
) -> None:
    """NLL per context length on the evaluation split; evaluation.csv / evaluation.json."""
    lengths = set(options.context_lengths or default_context_lengths(runs[0].train_length))
    lengths.update(run.train_length for run in runs)  # val_nll is read at the training length
    context_lengths = sorted(lengths)
    for run in runs:
        say(f"evaluating {run.name} ({run.scheme}) on {options.split} at {context_lengths}")
        results = evaluate_model(
            run.model,
            genome,
            options.split,
            context_lengths,
            run.train_length,
            options.max_eval_tokens,
            options.batch_tokens,
            show_progress=progress,
            label=run.name,
        )
        run.validation = validation_nll(run, genome, options.split, options.batch_tokens, progress)
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
    out.csv("evaluation.csv", evaluation_frame(runs))
    evaluations = {run.name: run.evaluated().to_json() for run in runs}
    out.text("evaluation.json", json_text(evaluations))


def _gc_study(
    options: ReportOptions,
    genome: ShardedGenome,
    runs: Sequence[RunData],
    out: _Writer,
    say: Callable[[str], None],
    progress: bool = False,
) -> tuple[Any, Any, dict[str, Any]]:
    """GC% continuation study on the same prompts for every model: (rows, table, summaries)."""
    from goatdna.analysis.gc_study import run_gc_study, summary_frame
    from goatdna.analysis.prompts import draw_prompts

    say(f"GC study: {options.n_prompts} prompts x {options.samples_per_prompt} samples")
    prompts = draw_prompts(
        genome,
        options.gc_split,
        options.n_prompts,
        options.prompt_length,
        options.continuation_length,
        options.seed,
    )
    rows, summaries = run_gc_study(
        {run.name: run.model for run in runs},
        prompts,
        options.samples_per_prompt,
        options.seed,
        options.temperature,
        options.top_k,
        progress,
    )
    out.csv("gc_continuations.csv", rows)
    table = summary_frame(summaries)
    out.csv("gc_summary.csv", table)
    return rows, table, summaries


def _recall_probe(
    options: ReportOptions,
    plan: RecallPlan | None,
    runs: Sequence[RunData],
    genome: ShardedGenome,
    out: _Writer,
    say: Callable[[str], None],
    progress: bool = False,
) -> tuple[dict[str, Any], Any | None]:
    """Score every run on the same recall trials; write recall_trials.csv / recall_summary.csv.

    Returns each model's summary (for the figure) and their table (None: the probe was skipped).
    """
    import pandas as pd

    from goatdna.analysis.recall import recall_frame, score_recall, summarize_recall
    from goatdna.progress import progress_bar

    if plan is None:
        return {}, None
    say(f"recall probe: {len(plan.trials)} trials at distances {plan.distances}")
    tokens = genome.tokens(options.gc_split)
    frames, summaries = [], {}
    total = len(plan.trials) * len(plan.distances)
    for run in runs:
        with progress_bar(f"recall {run.name}", total, "trials", progress) as bar:
            rows = score_recall(
                run.model, tokens, plan.trials, plan.distances, options.recall_segment,
                options.batch_tokens, progress=bar,
            )  # fmt: skip
        frame = recall_frame(rows)
        summaries[run.name] = summarize_recall(frame, run.train_length, options.recall_segment)
        frames.append(frame.assign(model=run.name))
    out.csv("recall_trials.csv", pd.concat(frames, ignore_index=True))
    table = recall_table(summaries)
    out.csv("recall_summary.csv", table)
    return summaries, table
