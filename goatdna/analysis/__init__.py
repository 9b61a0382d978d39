"""Numbers and pictures from checkpoints: evaluation, generation, GC% statistics, the report.

Import direction: analysis imports `goatdna.model` and `goatdna.data_prep`, never
`goatdna.training`; checkpoints are read through the checkpoint contract (see `checkpoint`).
Modules import torch, pandas and matplotlib inside functions, so importing this package is cheap.
"""

from goatdna.analysis.evaluate import (
    ContextResult,
    Evaluation,
    bits_per_base,
    evaluate_checkpoint,
    evaluate_model,
)
from goatdna.analysis.gc import (
    ModelGCSummary,
    SampleStats,
    base_accuracy,
    gc_fraction,
    gc_trajectory,
    kmer_js_divergences,
    pearson_or_nan,
    sample_stats,
    summarize_samples,
)
from goatdna.analysis.gc_study import GC_COLUMNS, run_gc_study
from goatdna.analysis.generate import SamplingOptions, generate, generate_continuations
from goatdna.analysis.prompts import Prompt, draw_prompts
from goatdna.checkpoint import best_checkpoint, load_checkpoint, read_summary

__all__ = [
    "GC_COLUMNS",
    "ContextResult",
    "Evaluation",
    "ModelGCSummary",
    "Prompt",
    "SampleStats",
    "SamplingOptions",
    "base_accuracy",
    "best_checkpoint",
    "bits_per_base",
    "draw_prompts",
    "evaluate_checkpoint",
    "evaluate_model",
    "gc_fraction",
    "gc_trajectory",
    "generate",
    "generate_continuations",
    "kmer_js_divergences",
    "load_checkpoint",
    "pearson_or_nan",
    "read_summary",
    "run_gc_study",
    "sample_stats",
    "summarize_samples",
]
