"""What `goatdna report` compares and how much work it spends on it (one dataclass)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from goatdna.analysis.evaluate import DEFAULT_BATCH_TOKENS
from goatdna.configfile import COUNT, COUNT_OR_ZERO, NON_NEGATIVE, SEED, TOP_K, bounded

DEFAULT_MAX_EVAL_TOKENS = 1_048_576  # predicted bases per context length and model


@dataclass
class ReportOptions:
    """What `goatdna report` compares and how much work it spends on it.

    Any number of runs: the paper table compares one GOAT and one RoPE run, every other table and
    figure shows every run.
    """

    runs: list[Path]
    data_dir: Path
    out_dir: Path
    names: list[str] | None = None  # default: the run directories' names
    split: str = "val"
    context_lengths: list[int] | None = None  # default: training length x 1, 2, 4, 8
    max_eval_tokens: int | None = DEFAULT_MAX_EVAL_TOKENS  # None: the whole split
    batch_tokens: int = bounded(DEFAULT_BATCH_TOKENS, COUNT)
    gc_split: str = "test"
    n_prompts: int = bounded(100, COUNT)
    samples_per_prompt: int = bounded(1, COUNT)
    prompt_length: int = 200
    continuation_length: int = 200
    temperature: float = bounded(1.0, NON_NEGATIVE)  # 0 = greedy
    top_k: int | None = bounded(None, TOP_K)
    seed: int = bounded(0, SEED)
    prior_layer: int | None = bounded(None, COUNT_OR_ZERO)  # 0-based; default: the last layer
    recall_trials: int = bounded(16, COUNT_OR_ZERO)  # long-range recall probe (0: skip it)
    recall_segment: int = 50
    recall_distances: list[int] | None = None  # default: report.default_recall_distances()
    heatmap_length: int = 128
    trajectory_prompts: int = 3
    device: str = "cpu"
