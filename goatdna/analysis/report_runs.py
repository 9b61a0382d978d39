"""The runs a report compares: loading them, naming them, checking them against the shards.

A run is a directory written by `goatdna train` (best checkpoint, summary.json, metrics.csv);
the report reads it through the checkpoint contract (`goatdna.checkpoint`), never through
`goatdna.training`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goatdna.analysis.evaluate import ContextResult, Evaluation, evaluate_context
from goatdna.analysis.generate import model_device
from goatdna.checkpoint import best_checkpoint, load_checkpoint, read_summary
from goatdna.errors import GoatDNAError

if TYPE_CHECKING:
    import pandas as pd

    from goatdna.data_prep import ShardedGenome
    from goatdna.model import DNADecoder

MANIFEST_KEY = "data_manifest_sha256"  # written by `goatdna train` to config.yaml and summary.json


@dataclass
class RunData:
    """One run as the report sees it."""

    name: str
    run_dir: Path
    checkpoint: Path
    model: DNADecoder
    config: Mapping[str, Any]  # the raw run config (`LoadedCheckpoint.run_config`)
    summary: dict[str, Any]
    metrics: pd.DataFrame | None
    train_length: int
    evaluation: Evaluation | None = None
    validation: ContextResult | None = None  # training length, the run's validation windows

    @property
    def positional(self) -> str:
        return str(self.config["model"].get("positional", ""))

    @property
    def rope_extension(self) -> str:
        """RoPE's stretch beyond the training length ('none', 'linear', 'ntk'); '' for others."""
        if self.positional != "rope":
            return ""
        return str(self.config["model"].get("rope_extension", "none"))

    @property
    def scheme(self) -> str:
        """The positional scheme as a reader names it: 'rope' or 'rope+ntk', 'goat', ..."""
        extension = self.rope_extension
        return f"rope+{extension}" if extension not in ("", "none") else self.positional

    @property
    def recipe(self) -> str:
        """Which recipe trained the run, as the paper table names it: `recipe_of` its config."""
        return recipe_of(self.config)

    def evaluated(self) -> Evaluation:
        if self.evaluation is None:
            raise RuntimeError(f"run {self.name} has not been evaluated yet")
        return self.evaluation


GENOME_PY_BETAS = (0.9, 0.999)


def recipe_of(config: Mapping[str, Any]) -> str:
    """The recipe a run config is, in a few words: genome.py's (configs/*-paper-dna.yaml: the
    GPT-2 block, AdamW with torch's default betas decaying every parameter) or goatdna's own,
    with the model's size and the run's length, so a table beside the paper's numbers says what
    produced each column (a tiny CPU demo is not the paper's experiment)."""
    model, optim = config.get("model", {}), config.get("optim", {})
    data, trainer = config.get("data", {}), config.get("trainer", {})
    genome_py = (
        model.get("block_style") == "gpt2"
        and bool(optim.get("decay_all", False))
        and tuple(optim.get("betas", ())) == GENOME_PY_BETAS
    )
    name = "genome.py's (paper-dna config)" if genome_py else "goatdna's"
    size = f"{model.get('n_layers', '?')} x {model.get('d_model', '?')}"
    length = f"{_count(trainer.get('max_steps'))} steps of {_count(data.get('micro_batch_size'))}"
    accumulate = trainer.get("accumulate", 1)
    if accumulate != 1:
        length += f" x {_count(accumulate)}"
    return f"{name}, {size}, {length} x {_count(data.get('seq_len'))} bases"


def _count(value: object) -> str:
    """An integer with thousands separators; anything else (an old config's gap) as '?'."""
    return f"{value:,}" if isinstance(value, int) else "?"


def load_run(run_dir: Path, name: str, device: str = "cpu") -> RunData:
    """Read a run directory: best checkpoint, config, summary.json, metrics.csv."""
    import pandas as pd

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise GoatDNAError(f"{run_dir}: run directory not found (train one with `goatdna train`)")
    checkpoint = best_checkpoint(run_dir)
    summary = read_summary(run_dir)
    loaded = load_checkpoint(checkpoint, device=device)
    if loaded.kind == "finetuned":  # its loss is a task's, not next-base prediction
        raise GoatDNAError(
            f"--run {run_dir}: a `goatdna finetune` run; report compares pretrained language "
            "models (give `goatdna train` runs; a fine-tuned run's metrics are in its "
            "summary.json)"
        )
    metrics_path = run_dir / "metrics.csv"
    metrics = pd.read_csv(metrics_path) if metrics_path.is_file() else None
    return RunData(
        name=name,
        run_dir=run_dir,
        checkpoint=checkpoint,
        model=loaded.model,
        config=loaded.run_config,
        summary=summary,
        metrics=metrics,
        train_length=loaded.train_length,
    )


def unique_names(
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


def file_safe(name: str) -> str:
    """A model name as a file-name piece: letters, digits, '.', '_' and '-' only."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    return safe or "model"


def manifest_warnings(runs: Sequence[RunData], manifest_sha256: str, data_dir: Path) -> list[str]:
    """One warning per run trained on other shards than the ones the report evaluates."""
    warnings = []
    for run in runs:
        recorded = {
            value
            for value in (run.config.get(MANIFEST_KEY), run.summary.get(MANIFEST_KEY))
            if isinstance(value, str) and value
        }
        if recorded and manifest_sha256 not in recorded:
            warnings.append(
                f"run {run.name} was trained on shards with manifest sha256 "
                f"{sorted(recorded)[0][:12]}..., but the report evaluates {data_dir} "
                f"({manifest_sha256[:12]}...)"
            )
    return warnings


def validation_nll(
    run: RunData,
    genome: ShardedGenome,
    split: str,
    batch_tokens: int,
    progress: bool = False,
) -> ContextResult:
    """NLL at the training length over the run's validation windows of ``split``.

    The held-out windows (`goatdna.data_prep.heldout`) at L = seq_len capped at the run's
    ``data.val_max_windows``: on the val split, the windows `goatdna train` validated on, so this
    is summary.json's ``best_val_loss`` recomputed from best.ckpt (same definition, same windows).
    """
    data = run.config.get("data") or {}
    cap = data.get("val_max_windows") if isinstance(data, dict) else None
    from goatdna.analysis.evaluate import window_starts
    from goatdna.progress import progress_bar

    length = run.train_length
    max_tokens = cap * length if isinstance(cap, int) else None
    records = genome.records(split)
    n = window_starts(
        records, length, None if max_tokens is None else max(1, max_tokens // length)
    ).size
    with progress_bar(f"{run.name} validation", n, "windows", progress) as bar:
        return evaluate_context(
            run.model,
            genome.tokens(split),
            records,
            length,
            length,
            max_tokens=max_tokens,
            batch_tokens=batch_tokens,
            device=model_device(run.model),
            progress=bar,
        )


def prior_layer(layer: int | None, run: RunData) -> int:
    """The GOAT layer whose prior is drawn for ``run`` (default: the last)."""
    n_layers = run.model.n_layers
    if layer is None:
        return n_layers - 1
    if not 0 <= layer < n_layers:
        raise GoatDNAError(
            f"--prior-layer {layer}: {run.name} has layers 0..{n_layers - 1}; choose one "
            "of those (default: the last)"
        )
    return layer
