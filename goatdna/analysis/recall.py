"""A long-range recall probe for DNA: the passkey/needle test of the paper, built from real sequence.

Each trial draws a segment of ``S`` bases and a filler stretch from a held-out split and builds,
for every distance ``d``, the sequence ``segment + filler[:d] + segment``. The filler is real DNA,
so the only thing that helps the model on the second copy of the segment is recalling the first,
``d`` bases back. Per trial and distance it records

* ``nll_first``: mean NLL (nats/base) of the first copy's bases 1..S-1 (base 0 has no prediction);
* ``nll_second``: mean NLL of the second copy's S bases;
* ``copy_accuracy``: the fraction of second-copy bases that the greedy prediction (argmax over
  A/C/G/T) gets right.

The recall gain is ``nll_first - nll_second``: near zero for a model that cannot see or use the
first copy, and at most ``nll_first`` for one that copies perfectly (the second copy then costs
nothing). That ceiling is the model's own NLL of the first copy, below ``ln 4 = 1.386`` nats/base
for any model that predicts DNA better than uniformly. Distances for which the probe's
``2S + d - 1`` inputs exceed the training length measure length extrapolation. Every mean in the
summary carries a 95% percentile bootstrap interval over the trials
(`goatdna.metrics.resampled_ratios`, seed 0).

Trials are a pure function of (shards, split, seed, segment length, longest distance, number of
trials), never of the model, so every model is probed on the same sequences; a trial's
``segment_start`` and ``filler_start`` are offsets into the split's ``.bin``, enough to rebuild it.
The segment is N-free and the filler lies inside one record (it may hold N, as real DNA does) and
never overlaps the segment. All log-probabilities come from `goatdna.model.scoring`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from goatdna.configfile import comma_list
from goatdna.data_prep.window_search import window_is_n_free
from goatdna.errors import GoatDNAError
from goatdna.io.tokens import TOKEN_MASK, N

if TYPE_CHECKING:
    import pandas as pd

    from goatdna.data_prep import ShardedGenome
    from goatdna.model import DNADecoder

DEFAULT_DISTANCES = (64, 256, 1024, 4096, 16384)
MAX_ATTEMPTS_PER_TRIAL = 1000


@dataclass(frozen=True)
class RecallTrial:
    """Where one trial's segment and filler come from (offsets into the split's .bin)."""

    trial: int
    segment_start: int
    filler_start: int


@dataclass(frozen=True)
class RecallRow:
    """One trial scored at one distance."""

    trial: int
    distance: int
    segment_start: int
    filler_start: int
    nll_first: float
    nll_second: float
    copy_accuracy: float


def parse_distances(text: str, *, option: str) -> list[int]:
    """``"64,256,1024"`` -> [64, 256, 1024] (sorted, unique); every distance >= 0.

    ``option`` is the flag the caller's command reads the text from (probe-recall's
    ``--distances``, report's ``--recall-distances``): the error names that one, so a user is
    never told about a flag their command does not have.
    """
    try:
        values = sorted({int(part) for part in comma_list(text)})
    except ValueError:
        raise GoatDNAError(
            f"{option} {text!r}: expected comma-separated integers such as 64,256,1024"
        ) from None
    if not values or values[0] < 0:
        raise GoatDNAError(f"{option} {text!r}: give at least one distance, all >= 0")
    return values


def draw_trials(
    genome: ShardedGenome,
    split: str = "test",
    n_trials: int = 64,
    segment_length: int = 50,
    max_distance: int = 16384,
    seed: int = 0,
    distances_option: str = "--distances",
) -> list[RecallTrial]:
    """Draw ``n_trials`` (segment, filler) pairs from ``split``, deterministically for ``seed``.

    A segment start is uniform over the starts that keep ``segment_length`` bases inside one
    record (redrawn while it holds N); a filler start is uniform over the starts that keep
    ``max_distance`` bases inside one record and off the segment. Raises GoatDNAError when the
    split is too small for those lengths; it names ``distances_option``, the caller's flag for
    the distances (report's is ``--recall-distances``).
    """
    if n_trials < 1 or segment_length < 2:
        raise GoatDNAError("recall probe: --trials must be >= 1 and --segment >= 2")
    tokens = genome.tokens(split)
    records = genome.records(split)
    rng = np.random.default_rng(seed)

    def sampler(length: int) -> Callable[[], int]:
        usable = [r for r in records if r.length >= length]
        if not usable:
            raise GoatDNAError(
                f"split '{split}' of {genome.root} has no record of at least {length} bases; "
                f"probe shorter distances ({distances_option}) or prepare a larger genome"
            )
        counts = np.array([r.length - length + 1 for r in usable], dtype=np.int64)
        cumulative = np.cumsum(counts)

        def draw() -> int:
            flat = int(rng.integers(int(cumulative[-1])))
            i = int(np.searchsorted(cumulative, flat, side="right"))
            return usable[i].offset + flat - (int(cumulative[i - 1]) if i else 0)

        return draw

    draw_segment, draw_filler = sampler(segment_length), sampler(max(max_distance, 1))
    trials: list[RecallTrial] = []
    for trial in range(n_trials):
        for _ in range(MAX_ATTEMPTS_PER_TRIAL):
            segment = draw_segment()
            if window_is_n_free(tokens, segment, segment_length):
                break
        else:
            raise GoatDNAError(
                f"split '{split}' of {genome.root}: no N-free {segment_length}-base segment "
                f"found in {MAX_ATTEMPTS_PER_TRIAL} draws; use a shorter --segment"
            )
        for _ in range(MAX_ATTEMPTS_PER_TRIAL):
            filler = draw_filler()
            if filler + max_distance <= segment or segment + segment_length <= filler:
                break
        else:
            raise GoatDNAError(
                f"split '{split}' of {genome.root}: no filler of {max_distance} bases avoids "
                "the segment; probe shorter distances"
            )
        trials.append(RecallTrial(trial, segment, filler))
    return trials


def trial_tokens(
    split_tokens: np.ndarray, trial: RecallTrial, segment_length: int, distance: int
) -> np.ndarray:
    """The probe sequence ``segment + filler[:distance] + segment`` as token ids (int64)."""
    segment = np.asarray(split_tokens[trial.segment_start : trial.segment_start + segment_length])
    filler = np.asarray(split_tokens[trial.filler_start : trial.filler_start + distance])
    return (np.concatenate([segment, filler, segment]) & TOKEN_MASK).astype(np.int64)


def score_recall(
    model: DNADecoder,
    split_tokens: np.ndarray,
    trials: Sequence[RecallTrial],
    distances: Sequence[int],
    segment_length: int,
    batch_tokens: int = 65536,
    progress: Callable[[int], None] | None = None,
) -> list[RecallRow]:
    """Score every trial at every distance; rows ordered by distance, then trial."""
    import torch

    from goatdna.model.scoring import target_log_probs

    device = next(model.parameters()).device
    S = segment_length
    rows: list[RecallRow] = []
    for distance in distances:
        length = 2 * S + distance
        batch = max(1, batch_tokens // length)
        for first in range(0, len(trials), batch):
            chunk = trials[first : first + batch]
            ids = np.stack([trial_tokens(split_tokens, t, S, distance) for t in chunk])
            tokens = torch.from_numpy(ids).to(device)  # (B, 2S + d)
            with torch.no_grad():
                logits = model(tokens[:, :-1])  # (B, 2S + d - 1, V)
            logp = target_log_probs(logits, tokens[:, 1:]).double().cpu()  # (B, 2S + d - 1)
            second = slice(S + distance - 1, 2 * S + distance - 1)  # predictions of copy 2
            greedy = logits[:, second, :N].argmax(-1).cpu()  # (B, S) over A/C/G/T
            correct = (greedy == tokens[:, S + distance :].cpu()).double().mean(-1)
            nll_first = -logp[:, : S - 1].mean(-1)
            nll_second = -logp[:, second].mean(-1)
            for row, trial in enumerate(chunk):
                rows.append(
                    RecallRow(
                        trial=trial.trial,
                        distance=distance,
                        segment_start=trial.segment_start,
                        filler_start=trial.filler_start,
                        nll_first=float(nll_first[row]),
                        nll_second=float(nll_second[row]),
                        copy_accuracy=float(correct[row]),
                    )
                )
            if progress is not None:
                progress(len(chunk))
    return rows


def recall_frame(rows: Sequence[RecallRow]) -> pd.DataFrame:
    """Rows as a DataFrame (one row per trial and distance) with the per-trial ``recall_gain``."""
    import pandas as pd

    frame = pd.DataFrame([asdict(r) for r in rows])
    frame["recall_gain"] = frame["nll_first"] - frame["nll_second"]
    return frame


def summarize_recall(frame: pd.DataFrame, train_length: int, segment_length: int) -> pd.DataFrame:
    """Per distance: trials, mean NLLs, recall gain (mean, standard error and 95% bootstrap
    interval over the trials), copy accuracy (mean and interval), and whether the probe's
    ``2S + d - 1`` inputs outgrow the training length (``extrapolation``)."""
    from goatdna.metrics import percentile_interval, resampled_ratios

    grouped = frame.groupby("distance", sort=True)
    summary = grouped.agg(
        trials=("trial", "size"),
        nll_first=("nll_first", "mean"),
        nll_second=("nll_second", "mean"),
        recall_gain=("recall_gain", "mean"),
        recall_gain_se=("recall_gain", lambda g: float(g.std(ddof=1) / math.sqrt(len(g)))),
        copy_accuracy=("copy_accuracy", "mean"),
    ).reset_index()
    for column in ("recall_gain", "copy_accuracy"):
        bounds = [
            percentile_interval(resampled_ratios(group.to_numpy(), np.ones(len(group))))
            for _, group in grouped[column]
        ]
        summary[f"{column}_low"] = [low for low, _ in bounds]
        summary[f"{column}_high"] = [high for _, high in bounds]
    summary["extrapolation"] = (2 * segment_length + summary["distance"] - 1) > train_length
    return summary


def probe_recall(
    checkpoint: str | Path,
    data_dir: str | Path,
    out_dir: str | Path,
    distances: Sequence[int] = DEFAULT_DISTANCES,
    segment_length: int = 50,
    n_trials: int = 64,
    split: str = "test",
    seed: int = 0,
    batch_tokens: int = 65536,
    device: str = "cpu",
    show_progress: bool = False,
    force: bool = False,
) -> pd.DataFrame:
    """Run the probe on one checkpoint and write ``recall_trials.csv``, ``recall_summary.csv``
    and ``recall.png`` into ``out_dir``; returns the summary DataFrame.

    Earlier outputs there are replaced only with ``force``; one probe at a time writes into
    ``out_dir`` (`goatdna.workdir.output_lock`)."""
    from goatdna.atomic import check_output_dir
    from goatdna.workdir import claim_output, output_lock

    out_dir = check_output_dir(out_dir, "--out")  # before any work: a folder we can write
    if batch_tokens < 1:
        raise GoatDNAError(f"--batch-tokens must be >= 1, got {batch_tokens}")
    if seed < 0:
        raise GoatDNAError(f"--seed must be >= 0, got {seed}")
    claim_output([out_dir / name for name in RECALL_OUTPUTS], force, inputs=[checkpoint])
    with output_lock(out_dir, True):
        return _probe_recall(checkpoint, data_dir, out_dir, distances, segment_length,
                             n_trials, split, seed, batch_tokens, device, show_progress)  # fmt: skip


RECALL_OUTPUTS = ("recall_trials.csv", "recall_summary.csv", "recall.png")


def _probe_recall(
    checkpoint: str | Path,
    data_dir: str | Path,
    out_dir: Path,
    distances: Sequence[int],
    segment_length: int,
    n_trials: int,
    split: str,
    seed: int,
    batch_tokens: int,
    device: str,
    show_progress: bool,
) -> pd.DataFrame:
    from goatdna.analysis.plots import plot_recall
    from goatdna.atomic import atomic_write_text
    from goatdna.checkpoint import load_checkpoint
    from goatdna.data_prep import ShardedGenome

    genome = ShardedGenome(data_dir)
    if split not in genome.split_names():
        raise GoatDNAError(
            f"--split {split!r}: {data_dir} has splits {', '.join(genome.split_names())}"
        )
    trials = draw_trials(genome, split, n_trials, segment_length, max(distances), seed)
    loaded = load_checkpoint(checkpoint, device, lm_command="probe-recall")
    model, train_length = loaded.model, loaded.train_length
    tokens = genome.tokens(split)

    from goatdna.progress import progress_bar

    total = len(trials) * len(distances)
    with progress_bar("recall probe", total, "trials", show_progress) as bar:
        rows = score_recall(
            model, tokens, trials, distances, segment_length, batch_tokens, progress=bar
        )
    frame = recall_frame(rows)
    summary = summarize_recall(frame, train_length, segment_length)
    name = str(loaded.model_config.positional)
    atomic_write_text(out_dir / "recall_trials.csv", frame.to_csv(index=False))
    atomic_write_text(out_dir / "recall_summary.csv", summary.to_csv(index=False))
    plot_recall({name: summary}, {name: train_length}, segment_length, out_dir / "recall.png")
    return summary
