"""Linear probes on a frozen backbone: which layer and pooling, the feature cache, the sweep.

``goatdna finetune --mode probe`` reads pooled hidden states of one layer (``--layer``: a 1-based
block's output, or ``final``, the final norm's output the LM head reads) with one pooling
(``--pool mean|last``). Given several (``--layer all`` or ``1,3,final``; ``--pool mean,last``) it
sweeps them: one forward pass per batch gives every asked layer (`DNADecoder.hidden_at`), every
(layer, pooling) pair gets its own head fitted by the run's own loop (`loop.fit`, on one CPU
process in float32, keeping nothing on disk: the run's init, batches, optimizer, schedule,
dropout masks and per-epoch validation), and the pair with the best validation value of the
selection metric (MCC for classification, MSE for regression; the first in table order on a tie)
becomes the run's probe. The test split plays no part in the choice: the run then trains the
chosen probe through the same loop and evaluates the test split once, for it. The table lands
in ``RUN_DIR/probe_sweep.{tsv,json}``.

Memory: the sweep holds rows x d_model x pairs float32 features (twice with reverse strands).
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import math
import pickle
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from goatdna.atomic import atomic_path
from goatdna.checkpoint import read_torch_file
from goatdna.errors import GoatDNAError
from goatdna.formats import json_text
from goatdna.model.classifier import pool_hidden, reverse_complement_padded
from goatdna.progress import progress_bar
from goatdna.runtime import single_process_fabric
from goatdna.training.finetune_config import FINAL_LAYER, spec_items
from goatdna.training.finetune_data import Split, StepBatches, StepPlan, TaskData, eval_batches
from goatdna.training.heads import (
    NON_FINITE_HINT,
    SELECTION_METRIC,
    evaluate_predictions,
    head_optimizer,
)
from goatdna.training.loop import (
    Due,
    LoopSpec,
    NonFiniteLossError,
    Trainable,
    better,
    fit,
)
from goatdna.training.metrics import HIGHER_IS_BETTER
from goatdna.training.run import CACHE_DIR

if TYPE_CHECKING:
    from lightning_fabric import Fabric

    from goatdna.model import DNADecoder
    from goatdna.model.classifier import SequenceTaskModel
    from goatdna.training.finetune_config import FinetuneConfig

SWEEP_TSV = "probe_sweep.tsv"
SWEEP_JSON = "probe_sweep.json"
FEATURE_CACHE = Path(CACHE_DIR) / "probe_features.pt"

Features = tuple[Tensor, Tensor | None]
"""Pooled features of a split's rows (N, d_model) and of their reverse complements (or None)."""


@dataclass(frozen=True)
class ProbeChoice:
    """One probe input: the layer (1-based block output; None: the final norm's) and pooling."""

    layer: int | None
    pool: str

    @property
    def layer_name(self) -> str:
        return FINAL_LAYER if self.layer is None else str(self.layer)

    @property
    def key(self) -> str:
        return f"{self.layer_name}/{self.pool}"


def probe_choices(layer_spec: int | str, pool_spec: str, n_layers: int) -> list[ProbeChoice]:
    """Every (layer, pooling) pair the options name, in table order (layers, then poolings)."""
    layers: list[int | None] = []
    for item in spec_items(layer_spec):
        named: list[int | None] = (
            [*range(1, n_layers + 1), None] if item == "all"
            else [None] if item == FINAL_LAYER else [int(item)]
        )  # fmt: skip
        for layer in named:
            if layer is not None and not 1 <= layer <= n_layers:
                raise GoatDNAError(
                    f"--layer {layer}: the backbone has {n_layers} block(s); choose 1..{n_layers}, "
                    f"{FINAL_LAYER} (the final norm's output) or all"
                )
            if layer not in layers:
                layers.append(layer)
    pools = list(dict.fromkeys(spec_items(pool_spec)))
    return [ProbeChoice(layer, pool) for layer, pool in itertools.product(layers, pools)]


# ------------------------------------------------------------------------------ features
@torch.no_grad()
def pooled_features(
    backbone: DNADecoder,
    choices: Sequence[ProbeChoice],
    split: Split,
    batch_size: int,
    both_strands: bool,
    device: torch.device,
    advance: Callable[[int], None] = lambda rows: None,
) -> dict[ProbeChoice, Features]:
    """Pooled features of every row for every choice, float32 on the CPU: one trunk pass per
    batch (and strand) gives every asked layer at once. ``advance(rows)`` after each batch."""
    layers = list(dict.fromkeys(c.layer for c in choices))
    forward: dict[ProbeChoice, list[Tensor]] = {c: [] for c in choices}
    reverse: dict[ProbeChoice, list[Tensor]] = {c: [] for c in choices}
    for tokens, lengths in eval_batches(split.tokens, range(len(split)), batch_size):
        tokens, lengths = tokens.to(device), lengths.to(device)
        strands = [(tokens, forward)]
        if both_strands:
            strands.append((reverse_complement_padded(tokens, lengths), reverse))
        for strand, store in strands:
            states = dict(zip(layers, backbone.hidden_at(strand, layers), strict=True))
            for choice in choices:
                pooled = pool_hidden(states[choice.layer], lengths, choice.pool)
                store[choice].append(pooled.float().cpu())
        advance(len(lengths))
    return {c: (torch.cat(forward[c]), torch.cat(reverse[c]) if both_strands else None)
            for c in choices}  # fmt: skip


@dataclass
class ProbeFeatures:
    """Every split's features for every choice, and the cache key they belong to."""

    by_choice: dict[ProbeChoice, dict[str, Features]]
    key: str
    from_cache: bool

    def save(self, run_root: Path) -> None:
        """Write RUN_DIR/cache/probe_features.pt whole (temporary name + rename)."""
        if self.from_cache:
            return
        stored = {c.key: splits for c, splits in self.by_choice.items()}
        with atomic_path(run_root / FEATURE_CACHE) as tmp:
            torch.save({"key": self.key, "features": stored}, tmp)


def probe_features(
    run_root: Path,
    inputs: dict[str, Any],
    backbone: DNADecoder,
    task: TaskData,
    config: FinetuneConfig,
    choices: Sequence[ProbeChoice],
    device: torch.device,
    rank_zero: bool,
) -> ProbeFeatures:
    """Features of every split and choice, from RUN_DIR/cache when the key matches, else
    computed now (`ProbeFeatures.save` writes them; only the process that owns the run
    directory calls it). The key holds the input hashes, choices, length cap, strands and the
    split seed. ``rank_zero``: this process reports, a damaged cache and (with the run's
    progress option) the progress of computing them, which on a large task takes minutes of a
    run that shows nothing else meanwhile."""
    rc = needs_rc(config)
    key_source = json.dumps(
        {"inputs": inputs, "choices": [c.key for c in choices],
         "max_length": config.task.max_length, "rc": rc, "seed": config.seed,
         "val_fraction": config.task.val_fraction,
         "layout": "choice -> split -> (forward, reverse)"},
        sort_keys=True,
    )  # fmt: skip
    key = hashlib.sha256(key_source.encode()).hexdigest()
    path = run_root / FEATURE_CACHE
    if path.is_file():
        try:
            cached = read_torch_file(path)
            if isinstance(cached, dict) and cached.get("key") == key:
                stored = cached["features"]
                return ProbeFeatures({c: stored[c.key] for c in choices}, key, True)
        except (OSError, EOFError, RuntimeError, ValueError, KeyError,
                pickle.UnpicklingError) as err:  # fmt: skip
            # a damaged cache (a killed write cannot leave one: it is renamed in whole) is named
            # and computed again, not silently skipped
            if rank_zero:
                print(f"{path}: damaged probe-feature cache ({type(err).__name__}); "
                      "computing the features again", file=sys.stderr)  # fmt: skip
    backbone = backbone.to(device).eval()
    rows = sum(len(split) for split in task.splits.values())
    shown = rank_zero and config.trainer.progress_bar
    with progress_bar("probe features", rows, "sequences", shown) as advance:
        per_split = {
            name: pooled_features(
                backbone, choices, split, config.trainer.eval_batch_size, rc, device, advance
            )
            for name, split in task.splits.items()
        }
    backbone.cpu()
    by_choice = {c: {name: per_split[name][c] for name in task.splits} for c in choices}
    return ProbeFeatures(by_choice, key, False)


def feature_cache_bytes(
    run_root: Path, task: TaskData, config: FinetuneConfig, n_choices: int, d_model: int
) -> int:
    """About what `ProbeFeatures.save` will write: a float32 vector per row, strand and choice
    (0 when a cache is there already: its space is taken)."""
    if (run_root / FEATURE_CACHE).is_file():
        return 0
    rows = sum(len(split) for split in task.splits.values())
    return rows * (2 if needs_rc(config) else 1) * n_choices * d_model * 4


def needs_rc(config: FinetuneConfig) -> bool:
    return config.backbone.rc_augment or config.backbone.rc_average


# ------------------------------------------------------------------------------ the sweep
@dataclass(frozen=True)
class SweepRow:
    """One (layer, pooling) probe: its best validation step and that step's metrics."""

    choice: ProbeChoice
    best_step: int
    val: dict[str, float]
    note: str = ""


@dataclass(frozen=True)
class ProbeSweep:
    rows: list[SweepRow]
    chosen: ProbeChoice
    selection: str
    higher_is_better: bool


def head_predictions(
    model: SequenceTaskModel, features: Features, batch_size: int, rc_average: bool
) -> Tensor:
    """`SequenceTaskModel.to_predictions` of cached features, batch by batch (head only)."""
    forward, rc = features
    # the cache holds float32; the head is in the run's precision (bf16 under --precision
    # bf16-true), and a matmul takes one dtype
    weight = model.head.linear.weight
    device, dtype = weight.device, weight.dtype
    outs: list[Tensor] = []
    for start in range(0, forward.shape[0], batch_size):
        rows = slice(start, start + batch_size)
        out = model.head(forward[rows].to(device, dtype))
        out_rc = model.head(rc[rows].to(device, dtype)) if rc is not None and rc_average else None
        outs.append(model.to_predictions(out, out_rc))
    return torch.cat(outs) if outs else torch.zeros(0, model.task_config.n_outputs)


class HeadFit:
    """One sweep head as a `loop.Task`: the run's `finetune.FineTuning` on one process and on
    cached features. The same batches (`StepBatches` at rank 0 of 1), the dropout seed of each
    step, validation at every epoch's end; nothing logged or checkpointed (`loop.fit` without
    a run directory). ``validated``: the metrics of every validated step."""

    def __init__(self, model: SequenceTaskModel, features: dict[str, Features], task: TaskData,
                 config: FinetuneConfig, plan: StepPlan) -> None:  # fmt: skip
        self.model, self.features, self.task, self.config, self.plan = (
            model, features, task, config, plan)  # fmt: skip
        self.total_steps = plan.steps_per_epoch * config.trainer.epochs
        selection = SELECTION_METRIC[task.task]
        self.spec = LoopSpec(
            total_steps=self.total_steps,
            columns=(),
            selection=selection,
            higher_is_better=HIGHER_IS_BETTER[selection],
            grad_clip=config.optim.grad_clip,
            non_finite_hint=NON_FINITE_HINT,
            hyper_parameters={},
            progress_label="probe sweep",
            progress_bar=False,
            shown=(),
        )
        self.step = 0  # the step being trained
        self.validated: dict[int, dict[str, float]] = {}

    def steps(self, start: int) -> Iterator[list[dict[str, Tensor]]]:
        batches = StepBatches(self.task.splits["train"], self.plan, 0, 1, self.features["train"])
        self.model.head.train()
        for step in itertools.count(start + 1):
            self.step = step
            torch.manual_seed((self.config.seed * 1_000_003 + (step - 1) * 131) % 2**63)
            yield [batches[step - 1]]

    def loss(self, batch: dict[str, Tensor]) -> Tensor:
        return self.model.loss(self.model.head(batch["features"]), batch["labels"])

    def due(self, step: int) -> Due:
        epoch_end = step % self.plan.steps_per_epoch == 0 or step == self.total_steps
        return Due(log=False, validate=epoch_end, checkpoint=False)

    def validate(self) -> dict[str, float]:
        head = self.model.head
        head.eval()
        with torch.no_grad():
            preds = head_predictions(self.model, self.features["val"],
                                     self.config.trainer.eval_batch_size,
                                     self.model.task_config.rc_average)  # fmt: skip
        metrics = evaluate_predictions(self.task.task, self.task.splits["val"].labels,
                                       self.model.label_units(preds).numpy())  # fmt: skip
        head.train()
        self.validated[self.step] = metrics
        return metrics

    def row(self, step: int, lrs: list[float], grad_norm: Tensor) -> dict[str, float]:
        return {}


def fit_head(
    model: SequenceTaskModel,
    features: dict[str, Features],
    task: TaskData,
    config: FinetuneConfig,
    plan: StepPlan,
    fabric: Fabric,
) -> SweepRow:
    """Train ``model``'s head on cached features through the run's loop (`loop.fit`, on
    ``fabric``: one CPU process, float32) and return its best validation step. A head whose
    loss or gradients become non-finite keeps its best step before that, with a note."""
    model.head.set_standardization(features["train"][0])
    fitting = HeadFit(model, features, task, config, plan)
    trainable = Trainable.setup(
        fabric, model, lambda: head_optimizer(model.head, None, config.optim, fitting.total_steps)
    )
    note = ""
    try:
        fit(fabric, fitting, None, trainable, None, time.perf_counter())
    except NonFiniteLossError:  # the step was refused: the head keeps what it had before it
        note = f"non-finite loss or gradients at step {fitting.step}"
    best_step = best_validated(fitting.validated, fitting.spec)
    return SweepRow(model_choice(model), best_step, fitting.validated.get(best_step, {}), note)


def best_validated(validated: dict[int, dict[str, float]], spec: LoopSpec) -> int:
    """The step `loop.fit` keeps as best of these validations, by its rule (`loop.better`),
    also of a fit that stopped part-way (0: none is finite)."""
    best_value, best_step = math.nan, 0
    for step, metrics in validated.items():
        if better(metrics[spec.selection], best_value, spec.higher_is_better):
            best_value, best_step = metrics[spec.selection], step
    return best_step


def model_choice(model: SequenceTaskModel) -> ProbeChoice:
    return ProbeChoice(model.task_config.layer, model.task_config.pool)


def sweep_probes(
    features: dict[ProbeChoice, dict[str, Features]],
    task: TaskData,
    config: FinetuneConfig,
    plan: StepPlan,
    model_of: Callable[[ProbeChoice], SequenceTaskModel],
) -> ProbeSweep:
    """Fit one head per choice (``model_of`` builds it with the run's initialisation) and pick
    the best validation value of the selection metric; the test split is never read."""
    selection = SELECTION_METRIC[task.task]
    higher = HIGHER_IS_BETTER[selection]
    fabric = single_process_fabric()  # every rank fits every head alike, alone
    rows = [fit_head(model_of(c), features[c], task, config, plan, fabric) for c in features]
    best: SweepRow | None = None
    for row in rows:
        value = row.val.get(selection, math.nan)
        if better(value, math.nan if best is None else best.val[selection], higher):
            best = row
    if best is None:
        raise GoatDNAError(
            "probe sweep: no (layer, pooling) pair gave a finite validation "
            f"{selection}; lower --lr, or check the labels"
        )
    return ProbeSweep(rows, best.choice, selection, higher)


# ------------------------------------------------------------------------------ the table
def table_columns(sweep: ProbeSweep) -> list[str]:
    metrics = sorted({k for r in sweep.rows for k in r.val})
    ordered = [sweep.selection, *(m for m in metrics if m != sweep.selection)]
    return ["layer", "pool", "best_step", *(f"val_{m}" for m in ordered), "chosen", "note"]


def table_records(sweep: ProbeSweep) -> list[dict[str, Any]]:
    records = []
    for row in sweep.rows:
        record: dict[str, Any] = {"layer": row.choice.layer_name, "pool": row.choice.pool,
                                  "best_step": row.best_step}  # fmt: skip
        record.update({f"val_{k}": v for k, v in row.val.items()})
        record.update(chosen=row.choice == sweep.chosen, note=row.note)
        records.append(record)
    return records


def write_sweep(run_root: Path, sweep: ProbeSweep) -> None:
    """RUN_DIR/probe_sweep.tsv (one row per pair) and .json (rows, choice, selection rule)."""
    columns, records = table_columns(sweep), table_records(sweep)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, delimiter="\t", lineterminator="\n",
                            restval="")  # fmt: skip
    writer.writeheader()
    for record in records:
        writer.writerow({k: (int(v) if isinstance(v, bool) else v) for k, v in record.items()})
    with atomic_path(run_root / SWEEP_TSV) as tmp:
        tmp.write_text(buf.getvalue())
    document = {
        "selection_metric": f"val_{sweep.selection}",
        "higher_is_better": sweep.higher_is_better,
        "chosen": {"layer": sweep.chosen.layer_name, "pool": sweep.chosen.pool},
        "rows": records,
    }
    with atomic_path(run_root / SWEEP_JSON) as tmp:
        tmp.write_text(json_text(document))


def print_sweep(sweep: ProbeSweep) -> None:
    """The table on stderr (stdout keeps the run's one-line JSON summary)."""
    from rich.table import Table

    from goatdna.console import output_console

    columns = [c for c in table_columns(sweep) if c not in ("chosen", "note")]
    table = Table(title=f"probe sweep: validation only, best val_{sweep.selection} "
                        f"({'higher' if sweep.higher_is_better else 'lower'} is better)")  # fmt: skip
    for name in ["", *columns]:  # the title says validation: headers drop the val_ prefix
        shown = {"best_step": "step"}.get(name, name.removeprefix("val_"))
        table.add_column(shown, justify="left" if name in ("", "layer", "pool") else "right",
                         no_wrap=True)  # fmt: skip
    for record in table_records(sweep):
        cells = ["*" if record["chosen"] else ""]
        for name in columns:
            value = record.get(name, "")
            cells.append(f"{value:.4f}" if isinstance(value, float) else str(value))
        table.add_row(*cells)
    output_console(stderr=True).print(table)
