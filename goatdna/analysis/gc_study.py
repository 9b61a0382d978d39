"""The GC% continuation study: every model continues the same test-split prompts.

Rows of ``gc_continuations.csv`` (exactly these columns, GC as fractions in [0, 1]):
``model, sample, region, prompt, reference, continuation, gc_reference, gc_continuation,
gc_traj_pearson, base_accuracy``. ``sample`` numbers a model's samples 0..n_prompts*k-1 in prompt
order (prompt index = sample // k); ``gc_traj_pearson`` is empty where undefined (a constant
trajectory), and such samples are excluded from the mean and counted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from goatdna.analysis.gc import KMER_SIZES, ModelGCSummary, sample_stats, summarize_samples
from goatdna.analysis.generate import SamplingOptions, generate_continuations
from goatdna.analysis.prompts import Prompt

if TYPE_CHECKING:
    import pandas as pd

    from goatdna.model import DNADecoder

GC_COLUMNS = [
    "model",
    "sample",
    "region",
    "prompt",
    "reference",
    "continuation",
    "gc_reference",
    "gc_continuation",
    "gc_traj_pearson",
    "base_accuracy",
]


def continue_prompts(
    model: DNADecoder,
    name: str,
    prompts: Sequence[Prompt],
    samples_per_prompt: int = 1,
    seed: int = 0,
    temperature: float = 1.0,
    top_k: int | None = None,
    on_step: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Generate ``samples_per_prompt`` continuations per prompt and score each one (``on_step``:
    `generate.generate_continuations`'s, for a progress bar)."""
    length = len(prompts[0].reference)
    if any(len(p.reference) != length for p in prompts):
        raise ValueError("all reference continuations must have the same length")
    options = SamplingOptions(
        max_new_tokens=length,
        temperature=temperature,
        top_k=top_k,
        num_samples=samples_per_prompt,
        seed=seed,
    )
    generated = generate_continuations(model, [p.prompt for p in prompts], options, on_step)
    rows = []
    for i, (prompt, samples) in enumerate(zip(prompts, generated, strict=True)):
        for s, continuation in enumerate(samples):
            stats = sample_stats(continuation, prompt.reference)
            rows.append(
                {
                    "model": name,
                    "sample": i * samples_per_prompt + s,
                    "region": prompt.region,
                    "prompt": prompt.prompt,
                    "reference": prompt.reference,
                    "continuation": continuation,
                    **asdict(stats),
                }
            )
    return rows


def summarize_rows(rows: pd.DataFrame, ks: Sequence[int] = KMER_SIZES) -> dict[str, ModelGCSummary]:
    """Per-model summaries of a gc_continuations table (DataFrame)."""
    from goatdna.analysis.gc import SampleStats

    out: dict[str, ModelGCSummary] = {}
    for name in dict.fromkeys(rows["model"]):
        part = rows[rows["model"] == name]
        stats = [
            SampleStats(
                float(r.gc_reference),
                float(r.gc_continuation),
                float(r.gc_traj_pearson),
                float(r.base_accuracy),
            )
            for r in part.itertuples()
        ]
        out[name] = summarize_samples(
            stats, list(part["continuation"]), list(part["reference"]), ks
        )
    return out


def run_gc_study(
    models: Mapping[str, Any],
    prompts: Sequence[Prompt],
    samples_per_prompt: int = 1,
    seed: int = 0,
    temperature: float = 1.0,
    top_k: int | None = None,
    progress: bool = False,
) -> tuple[Any, dict[str, ModelGCSummary]]:
    """Run every model on the same prompts: (gc_continuations DataFrame, per-model summaries).

    ``progress``: a bar (or, in a log, timed lines) over each model's decoding steps."""
    import pandas as pd

    from goatdna.progress import progress_bar

    rows: list[dict[str, Any]] = []
    batches = math.ceil(len(prompts) * samples_per_prompt / SamplingOptions.batch_size)
    steps = batches * (len(prompts[0].reference) if prompts else 0)
    for name, model in models.items():
        with progress_bar(f"GC study {name}", steps, "decoding steps", progress) as bar:
            rows.extend(
                continue_prompts(
                    model, name, prompts, samples_per_prompt, seed, temperature, top_k, bar
                )
            )
    frame = pd.DataFrame(rows, columns=GC_COLUMNS)
    return frame, summarize_rows(frame)


def summary_frame(summaries: Mapping[str, ModelGCSummary]) -> pd.DataFrame:
    """One row per model: MAE, RMSE, mean Pearson r (+ defined/undefined counts), accuracy, JS_k."""
    import pandas as pd

    rows = []
    for name, s in summaries.items():
        row = {k: v for k, v in asdict(s).items() if k != "kmer_js"}
        row = {"model": name, **row}
        row.update({f"kmer_js_k{k}": v for k, v in s.kmer_js.items()})
        rows.append(row)
    return pd.DataFrame(rows)
