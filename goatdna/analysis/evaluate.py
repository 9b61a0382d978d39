"""Held-out NLL per context length: nats/base, bits/base, perplexity, split by repeat flag.

For a context length L the split is tiled by the held-out windows of
`goatdna.data_prep.heldout` (L+1 bases starting every L bases inside each record, never across
a record boundary; an evenly spaced subset when capped): every base of a record except its first
and the last partial window is scored exactly once, with between 0 and L-1 bases of context.
That is the standard sliding-free ("non-overlapping windows") evaluation, and the same windows
`goatdna train` validates on, so at L = seq_len with the run's cap (``--max-eval-tokens`` =
``data.val_max_windows`` x seq_len) this NLL *is* the run's validation loss. Contexts longer than
the training length measure length extrapolation (the paper's Fig. 2 for DNA).

Per-position log-probabilities come from the one scoring primitive,
`goatdna.model.scoring.target_log_probs` (the full 5-class log-softmax; N targets excluded), as
in the training loss. bits/base = NLL / ln 2 and perplexity = exp(NLL). Sums are accumulated in
float64.

Each NLL carries a 95% percentile bootstrap interval over the held-out windows (`nll_low`,
`nll_high`; `goatdna.metrics.resampled_ratios`, seed 0): a window is resampled whole, so the
interval says how much the number would move on another draw of windows of the same split. Two
models scored on the same windows are resampled alike (`ContextResult.resampled_nll`), which is
how the report tells a difference from noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from goatdna.atomic import atomic_write_text
from goatdna.configfile import comma_list
from goatdna.data_prep.heldout import heldout_window_starts
from goatdna.errors import GoatDNAError
from goatdna.formats import json_text
from goatdna.io.tokens import REPEAT_FLAG, TOKEN_MASK, N
from goatdna.metrics import percentile_interval, resampled_ratios

if TYPE_CHECKING:
    import pandas as pd
    import torch

    from goatdna.data_prep import ShardedGenome
    from goatdna.model import DNADecoder


LN2 = math.log(2.0)
DEFAULT_BATCH_TOKENS = 16384


def bits_per_base(nll_nats: float) -> float:
    """Convert a mean NLL in nats per base to bits per base."""
    return nll_nats / LN2


@dataclass(frozen=True)
class ContextResult:
    """Scores of one context length on one split."""

    context_length: int
    extrapolation: bool  # context_length > training length
    windows: int
    bases: int
    nll: float  # nats per predicted base
    bits_per_base: float
    perplexity: float
    repeat_bases: int
    repeat_nll: float
    repeat_bits_per_base: float
    nonrepeat_bases: int
    nonrepeat_nll: float
    nonrepeat_bits_per_base: float
    nll_low: float = math.nan  # 95% bootstrap interval over the windows (nats/base)
    nll_high: float = math.nan
    # next-base accuracy: the fraction of scored (non-N) targets that are the model's most
    # likely base of A C G T (the paper's DNA script reports it beside the NLL)
    accuracy: float = math.nan
    # the NLL of each bootstrap resample of the windows (not written to files): the same draws
    # for every model scored on the same windows, so their differences are paired
    resampled_nll: np.ndarray | None = field(default=None, repr=False, compare=False)

    def public(self) -> dict[str, Any]:
        """The fields written to evaluation.json/.csv (every one but ``resampled_nll``)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "resampled_nll"}


def window_starts(
    records: Iterable[Any], context_length: int, max_windows: int | None = None
) -> np.ndarray:
    """Absolute offsets (in the split's .bin) of the held-out windows (`heldout_window_starts`).

    ``max_windows`` keeps an evenly spaced subset, exactly as training's ``data.val_max_windows``.
    """
    return heldout_window_starts(
        [(rec.offset, rec.length) for rec in records], context_length, max_windows
    )


def _mean(total: float, count: int) -> float:
    return total / count if count else math.nan


def score_windows(
    model: DNADecoder,
    tokens: np.ndarray,
    starts: np.ndarray,
    context_length: int,
    batch_size: int,
    device: torch.device | str = "cpu",
    progress: Callable[[int], object] | None = None,
) -> dict[str, Any]:
    """Sum NLL (float64) over the windows, separately for repeat and non-repeat targets.

    ``model(idx)`` maps (B, L) token ids to (B, L, V) logits. Returns sums and counts, and per
    window (in ``starts`` order) its NLL sum (``window_sums``) and scored bases
    (``window_counts``) for the bootstrap interval; ``correct``: scored targets that are the
    argmax of the A C G T logits (next-base accuracy's numerator).
    """
    import torch

    from goatdna.model.scoring import target_log_probs

    sums = {"repeat": 0.0, "nonrepeat": 0.0}
    counts = {"repeat": 0, "nonrepeat": 0}
    correct = 0
    window_sums = np.zeros(starts.size, dtype=np.float64)
    window_counts = np.zeros(starts.size, dtype=np.int64)
    offsets = np.arange(context_length + 1, dtype=np.int64)
    with torch.inference_mode():
        for b in range(0, starts.size, batch_size):
            batch_starts = starts[b : b + batch_size]
            raw = np.asarray(tokens[batch_starts[:, None] + offsets[None, :]])  # (B, L+1) uint8
            plain = torch.from_numpy((raw & TOKEN_MASK).astype(np.int64)).to(device)  # (B, L+1)
            repeat = torch.from_numpy((raw[:, 1:] & REPEAT_FLAG) != 0).to(device)  # (B, L)
            targets = plain[:, 1:]  # (B, L)
            logits = model(plain[:, :-1])  # (B, L, V)
            nll = -target_log_probs(logits, targets)  # (B, L); 0 where N
            scored = targets != N
            guess = logits[..., :N].argmax(-1)  # (B, L): the most likely base, N never
            correct += int((scored & (guess == targets)).sum())
            for name, mask in (("repeat", scored & repeat), ("nonrepeat", scored & ~repeat)):
                sums[name] += float(nll[mask].double().sum())
                counts[name] += int(mask.sum())
            end = b + len(batch_starts)
            window_sums[b:end] = (nll.double() * scored).sum(-1).cpu().numpy()
            window_counts[b:end] = scored.sum(-1).cpu().numpy()
            if progress is not None:
                progress(len(batch_starts))
    return {
        "repeat_sum": sums["repeat"],
        "repeat_count": counts["repeat"],
        "nonrepeat_sum": sums["nonrepeat"],
        "nonrepeat_count": counts["nonrepeat"],
        "window_sums": window_sums,
        "window_counts": window_counts,
        "correct": correct,
    }


def evaluate_context(
    model: DNADecoder,
    tokens: np.ndarray,
    records: Sequence[Any],
    context_length: int,
    train_length: int,
    max_tokens: int | None = None,
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
    device: torch.device | str = "cpu",
    progress: Callable[[int], object] | None = None,
) -> ContextResult:
    """Score one context length over the records of one split (tokens = the split's bytes)."""
    if context_length < 1:
        raise GoatDNAError(f"context length must be >= 1, got {context_length}")
    max_windows = None if max_tokens is None else max(1, max_tokens // context_length)
    starts = window_starts(records, context_length, max_windows)
    if starts.size == 0:
        longest = max((r.length for r in records), default=0)
        raise GoatDNAError(
            f"context length {context_length} does not fit in any record of the split "
            f"(longest has {longest} bases, a window needs {context_length + 1}); "
            "use shorter --context-lengths"
        )
    batch_size = max(1, batch_tokens // context_length)
    s = score_windows(model, tokens, starts, context_length, batch_size, device, progress)
    rep_n, non_n = int(s["repeat_count"]), int(s["nonrepeat_count"])
    total_n = rep_n + non_n
    nll = _mean(s["repeat_sum"] + s["nonrepeat_sum"], total_n)
    rep = _mean(s["repeat_sum"], rep_n)
    non = _mean(s["nonrepeat_sum"], non_n)
    resampled = resampled_ratios(s["window_sums"], s["window_counts"])
    low, high = percentile_interval(resampled)
    return ContextResult(
        context_length=context_length,
        extrapolation=context_length > train_length,
        windows=int(starts.size),
        bases=total_n,
        nll=nll,
        bits_per_base=bits_per_base(nll),
        perplexity=math.exp(nll) if math.isfinite(nll) else math.nan,
        repeat_bases=rep_n,
        repeat_nll=rep,
        repeat_bits_per_base=bits_per_base(rep),
        nonrepeat_bases=non_n,
        nonrepeat_nll=non,
        nonrepeat_bits_per_base=bits_per_base(non),
        nll_low=low,
        nll_high=high,
        accuracy=_mean(float(s["correct"]), total_n),
        resampled_nll=resampled,
    )


@dataclass
class Evaluation:
    """All context lengths of one model on one split, with where they came from."""

    checkpoint: str
    data: str
    manifest_sha256: str
    split: str
    positional: str
    train_length: int
    max_tokens: int | None
    results: list[ContextResult]

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "results"}
        # undefined means (no repeat bases, say) are written null by `goatdna.formats.json_text`
        out["results"] = [r.public() for r in self.results]
        return out

    def frame(self) -> pd.DataFrame:
        """One row per context length (pandas DataFrame)."""
        import pandas as pd

        rows = [
            {"positional": self.positional, "split": self.split, **r.public()} for r in self.results
        ]
        return pd.DataFrame(rows)

    def at(self, context_length: int) -> ContextResult:
        for r in self.results:
            if r.context_length == context_length:
                return r
        raise KeyError(context_length)


def parse_context_lengths(text: str) -> list[int]:
    """``"1024,2048"`` -> [1024, 2048] (sorted, unique); bad items are a GoatDNAError."""
    values: list[int] = []
    for item in comma_list(text):
        try:
            value = int(item)
        except ValueError:
            raise GoatDNAError(
                f"--context-lengths: {item!r} is not an integer (e.g. 1024,2048,4096)"
            ) from None
        if value < 1:
            raise GoatDNAError(f"--context-lengths: {value} must be >= 1")
        values.append(value)
    if not values:
        raise GoatDNAError("--context-lengths is empty; give e.g. 1024,2048,4096,8192")
    return sorted(set(values))


def default_context_lengths(train_length: int) -> list[int]:
    """Training length and 2x, 4x, 8x beyond it (extrapolation), as in the paper's Fig. 2."""
    return [train_length * m for m in (1, 2, 4, 8)]


def evaluate_model(
    model: DNADecoder,
    genome: ShardedGenome,
    split: str,
    context_lengths: Sequence[int],
    train_length: int,
    max_tokens: int | None = None,
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
    show_progress: bool = False,
    label: str = "",
) -> list[ContextResult]:
    """Evaluate a loaded model on a ShardedGenome split at each context length."""
    from goatdna.analysis.generate import model_device

    if split not in genome.split_names():
        raise GoatDNAError(
            f"{genome.root}: split '{split}' is empty or missing (splits: "
            f"{', '.join(genome.split_names())})"
        )
    if max_tokens is not None and max_tokens < 1:
        raise GoatDNAError(f"--max-eval-tokens must be >= 1, got {max_tokens}")
    tokens = genome.tokens(split)
    records = genome.records(split)
    device = model_device(model)
    if hasattr(model, "eval"):
        model.eval()
    from goatdna.progress import progress_bar

    results = []
    for L in context_lengths:
        n = window_starts(records, L, None if max_tokens is None else max(1, max_tokens // L)).size
        with progress_bar(f"{label} {split} L={L}".strip(), n, "windows", show_progress) as bar:
            results.append(
                evaluate_context(
                    model,
                    tokens,
                    records,
                    L,
                    train_length,
                    max_tokens,
                    batch_tokens,
                    device,
                    progress=bar,
                )  # fmt: skip
            )
    return results


def evaluate_checkpoint(
    checkpoint: str | Path,
    data_dir: str | Path,
    split: str = "val",
    context_lengths: Sequence[int] | None = None,
    max_tokens: int | None = None,
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
    device: str = "cpu",
    show_progress: bool = False,
    rope_extension: str | None = None,
) -> Evaluation:
    """Load a checkpoint and evaluate it on ``split`` of the shards in ``data_dir``
    (``rope_extension``: see `goatdna.checkpoint.load_checkpoint`)."""
    from goatdna.checkpoint import load_checkpoint
    from goatdna.data_prep import ShardedGenome

    genome = ShardedGenome(data_dir)
    loaded = load_checkpoint(
        checkpoint, device=device, rope_extension=rope_extension, lm_command="evaluate"
    )
    model, train_length = loaded.model, loaded.train_length
    lengths = list(context_lengths) if context_lengths else default_context_lengths(train_length)
    results = evaluate_model(
        model,
        genome,
        split,
        lengths,
        train_length,
        max_tokens,
        batch_tokens,
        show_progress,
        label=str(loaded.model_config.positional),
    )
    return Evaluation(
        checkpoint=str(checkpoint),
        data=str(data_dir),
        manifest_sha256=genome.manifest_sha256,
        split=split,
        positional=str(loaded.model_config.positional),
        train_length=train_length,
        max_tokens=max_tokens,
        results=results,
    )


def write_evaluation(evaluation: Evaluation, json_path: Path | None, csv_path: Path | None) -> None:
    """Write the evaluation as JSON and/or CSV (atomically)."""
    if json_path is not None:
        atomic_write_text(json_path, json_text(evaluation.to_json()))
    if csv_path is not None:
        atomic_write_text(csv_path, evaluation.frame().to_csv(index=False))
