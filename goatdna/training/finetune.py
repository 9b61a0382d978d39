"""`finetune()`: a pretrained GOAT/RoPE backbone + a sequence head, trained on a labelled task.

Same run-directory contract as `goatdna train` (`training.run.RunDir`): ``config.yaml``,
``metrics.csv``, ``checkpoints/{last,best}.ckpt`` (best by the validation metric: MCC for
classification, MSE for regression), ``summary.json``; ``--resume`` continues from last.ckpt
with the same batches (see `finetune_data`), ``--force`` starts over. The loop is the same
Fabric loop as pretraining's (`training.loop`): validation runs at the end of every epoch,
at the optimizer-step boundary, so a checkpoint already holds its epoch's validation and
best-checkpoint bookkeeping.

Checkpoints keep the training contract: ``state_dict`` holds ``"model." + <DNADecoder key>`` (the
backbone, so `load_checkpoint` still reads it as a language model) and ``"head." + <head key>``;
``hyper_parameters["config"]`` is the resolved fine-tuning config with its ``model`` section (the
backbone's `ModelConfig`), ``head`` (the `SequenceTaskConfig` that `goatdna predict` rebuilds the
model from) and ``schedule`` (steps per epoch, total steps). ``mode: probe`` freezes the backbone and trains the head on embeddings computed once
and cached in ``RUN_DIR/cache/`` (keyed by backbone, inputs, layers, poolings and length cap);
several layers or poolings are swept and the best on validation kept (`training.probe`).

``mode: lora`` / ``ia3`` freeze the backbone and train peft adapters on its projections with the
head (`goatdna.adapters`). Their checkpoints hold only what was trained: ``state_dict`` has the
adapter weights (``"model." + <peft name>``) and ``"head."``, and the config an ``adapter``
section naming the backbone by path (relative to the run folder, and absolute) and sha256;
`load_checkpoint` rebuilds base + adapters from it (merged), so a task costs megabytes, not a
copy of the backbone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from goatdna import __version__
from goatdna.adapters import (
    ADAPTER_SECTION,
    AdapterSpec,
    adapter_spec,
    attach,
    backbone_sha256,
    check_adapters,
    require_peft,
    split_targets,
)
from goatdna.checkpoint import load_checkpoint, read_checkpoint, read_torch_file
from goatdna.configfile import from_dict, load_yaml, to_dict
from goatdna.errors import GoatDNAError
from goatdna.model import DNADecoder, ModelConfig
from goatdna.model.classifier import SequenceTaskConfig, SequenceTaskModel
from goatdna.runtime import Runtime, gather_blocks, rank_block
from goatdna.training import preflight
from goatdna.training.checkpoints import training_checkpoint_bytes
from goatdna.training.finetune_config import FINETUNE_SECTIONS, FinetuneConfig, finetune_runtime
from goatdna.training.finetune_data import (
    Split,
    StepBatches,
    StepPlan,
    TaskData,
    load_task,
    print_warnings,
)
from goatdna.training.heads import (
    NON_FINITE_HINT,
    SELECTION_METRIC,
    evaluate_predictions,
    head_optimizer,
)
from goatdna.training.loop import (
    Due,
    LoopSpec,
    Trainable,
    claimed_run_dir,
    fit,
    run_dir_lock,
)
from goatdna.training.metrics import (
    CLASSIFICATION_METRICS,
    HIGHER_IS_BETTER,
    REGRESSION_METRICS,
    class_balance,
)
from goatdna.training.probe import (
    FEATURE_CACHE,
    Features,
    ProbeChoice,
    ProbeFeatures,
    ProbeSweep,
    feature_cache_bytes,
    head_predictions,
    model_choice,
    pooled_features,
    print_sweep,
    probe_choices,
    probe_features,
    sweep_probes,
    write_sweep,
)
from goatdna.training.run import RunDir

if TYPE_CHECKING:
    from lightning_fabric import Fabric
    from lightning_fabric.wrappers import _FabricModule


def metric_columns(task: str) -> tuple[str, ...]:
    names = CLASSIFICATION_METRICS if task == "classification" else REGRESSION_METRICS
    return ("step", "epoch", "train_loss", "val_loss", *(f"val_{m}" for m in names),
            "lr_head", "lr_backbone", "elapsed_s")  # fmt: skip


# ------------------------------------------------------------------------------ module
class SequenceTaskModule(SequenceTaskModel):
    """The sequence-task model (`SequenceTaskModel`) with what training adds: the batch-dict
    forward Fabric calls, a probe's frozen backbone, the optimizer and split predictions.

    Built from the resolved run config (config.yaml, a checkpoint's ``hyper_parameters.config``)
    read strictly: ``model`` as a `ModelConfig`, ``head`` as the `SequenceTaskConfig` that
    `goatdna predict` rebuilds the same model from.
    """

    def __init__(self, config: dict[str, Any]) -> None:
        backbone = DNADecoder(from_dict(ModelConfig, dict(config["model"]), "model"))
        super().__init__(backbone, from_dict(SequenceTaskConfig, dict(config["head"]), "head"))
        self.config = config
        self.ft = from_dict(FinetuneConfig, {k: config[k] for k in FINETUNE_SECTIONS}, "")
        self.probe = self.ft.backbone.mode == "probe"
        self.adapter: AdapterSpec | None = adapter_spec(config, Path("config.yaml"))
        if self.probe:
            self.model.requires_grad_(False)
        elif self.model.head is not None:
            # the next-base head plays no part in the task (and DDP rejects unused parameters)
            self.model.head.requires_grad_(False)

    def attach_adapters(self) -> None:
        """Inject the run's peft adapters into the backbone (after its pretrained weights are
        loaded: peft renames the wrapped layers' weights), freezing the rest of it."""
        if self.adapter is not None:
            attach(self.model, self.adapter)

    def trained_keys(self) -> set[str]:
        """State-dict keys of what an adapter fine-tune trains: the adapters and the head."""
        adapters = {f"model.{n}" for n, p in self.model.named_parameters() if p.requires_grad}
        return adapters | {f"head.{k}" for k in self.head.state_dict()}

    def state_dict(  # type: ignore[override]
        self, *, destination: Any = None, prefix: str = "", keep_vars: bool = False
    ) -> dict[str, Any]:
        """Everything, or (adapter modes) only the adapters and the head: the frozen backbone is
        referenced by the config's ``adapter`` section, not copied into every checkpoint."""
        out = super().state_dict(destination=destination, prefix=prefix, keep_vars=keep_vars)
        if self.adapter is not None:
            kept = self.trained_keys()
            for key in [k for k in out if k.startswith(prefix) and k[len(prefix) :] not in kept]:
                del out[key]
        return out

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        """`state_dict`'s inverse: with adapters, exactly the trained keys are required."""
        if self.adapter is None:
            return super().load_state_dict(state_dict, strict=strict, assign=assign)
        result = super().load_state_dict(state_dict, strict=False, assign=assign)
        missing = sorted(set(result.missing_keys) & self.trained_keys())
        if strict and (missing or result.unexpected_keys):
            raise RuntimeError(
                f"adapter checkpoint does not match the run: missing {missing[:3]}, "
                f"unexpected {list(result.unexpected_keys)[:3]}"
            )
        return result

    def forward(self, batch: dict[str, Tensor]) -> Tensor:  # type: ignore[override]
        """Head outputs of a batch of tokens (``tokens``, ``lengths``) or cached ``features``.

        Fabric (and DDP) call the module with the loader's batch dict, so the training forward
        takes one; on tokens it runs `SequenceTaskModel.outputs`.
        """
        if "features" in batch:
            return self.head(batch["features"])
        return self.outputs(batch["tokens"], batch["lengths"])

    def train_mode(self) -> None:
        """Training mode; a probe's frozen backbone stays in eval mode (no dropout)."""
        self.train()
        if self.probe:
            self.model.eval()

    def optimizer(self, total_steps: int) -> tuple[torch.optim.Optimizer, Any]:
        """AdamW with head and backbone learning rates; linear warmup, then cosine to zero."""
        backbone = None if self.probe else self.model
        return head_optimizer(self.head, backbone, self.ft.optim, total_steps)

    @torch.no_grad()
    def predict_rows(
        self, fabric: Fabric, split: Split, features: tuple[Tensor, Tensor | None] | None
    ) -> np.ndarray:
        """Predictions for every row of ``split`` in order (each rank computes its block)."""
        self.eval()
        batch_size, rc_average = self.ft.trainer.eval_batch_size, self.task_config.rc_average
        block = rank_block(len(split), fabric.global_rank, fabric.world_size)
        device, rows = fabric.device, slice(block.start, block.stop)
        with fabric.autocast():
            if features is None:  # this block's pooled features, both strands when averaged
                part = Split(split.tokens[rows], split.labels[rows])
                features = embed_split(self.model, model_choice(self), part, batch_size,
                                       rc_average, device)  # fmt: skip
            else:
                features = (features[0][rows], None if features[1] is None else features[1][rows])
            local = head_predictions(self, features, batch_size, rc_average).to(device)
        self.train_mode()
        return self.label_units(gather_blocks(fabric, local, len(split))).numpy()


# ------------------------------------------------------------------------------ features
def embed_split(
    backbone: DNADecoder,
    choice: ProbeChoice,
    split: Split,
    batch_size: int,
    both_strands: bool,
    device: torch.device,
) -> tuple[Tensor, Tensor | None]:
    """Pooled features of every row (and of its reverse complement), float32 on the CPU."""
    return pooled_features(backbone, [choice], split, batch_size, both_strands, device)[choice]


# ------------------------------------------------------------------------------ the loop
def load_backbone(path: str) -> tuple[DNADecoder, dict[str, Any]]:
    """The pretrained backbone; a fine-tuned classifier is refused (its head would be dropped)."""
    file = read_checkpoint(path)
    head = file.head
    if head is not None:  # a fine-tuned .ckpt or its export folder, refused before it is built
        raise GoatDNAError(
            f"{path}: is a fine-tuned classifier (task {head['task']}); finetune "
            "starts from a pretrained backbone: pass "
            "the pretraining run's checkpoint (e.g. runs/goat/checkpoints/best.ckpt)"
        )
    loaded = load_checkpoint(file, "cpu")
    return loaded.model, dict(loaded.run_config)


def task_config(config: FinetuneConfig, task: TaskData, choice: ProbeChoice) -> SequenceTaskConfig:
    """The trained model's own config: the task resolved from the data, and the options that
    shape its outputs (the layer and pooling, resolved by a sweep when several were given;
    dropout, strand averaging, the length cap)."""
    return SequenceTaskConfig(
        task="classification" if task.task == "classification" else "regression",
        classes=tuple(task.classes), label_mean=task.label_mean, label_std=task.label_std,
        pool="last" if choice.pool == "last" else "mean", layer=choice.layer,
        dropout=config.backbone.dropout,
        rc_average=config.backbone.rc_average, max_length=config.task.max_length,
    )  # fmt: skip


def input_hashes(backbone_sha: str, task: TaskData) -> dict[str, str]:
    """config.yaml's ``inputs``: sha256 of the backbone and of every task file."""
    return {"backbone_sha256": backbone_sha, **{f"{k}_sha256": v for k, v in task.sha256.items()}}


def resolve(config: FinetuneConfig, task: TaskData, model_config: dict[str, Any],
            inputs: dict[str, str], total_steps: int, steps_per_epoch: int,
            choice: ProbeChoice, run_root: Path) -> dict[str, Any]:  # fmt: skip
    """config.yaml: the sections, the backbone's model config, the task model's config
    (``head``, with the probe's layer and pooling), the step schedule and input hashes; an
    adapter run's backbone by absolute path and relative to ``run_root``."""
    out = to_dict(config)
    out["model"] = dict(model_config)
    out["head"] = to_dict(task_config(config, task, choice))
    out["schedule"] = {"steps_per_epoch": steps_per_epoch, "total_steps": total_steps}
    out["inputs"] = dict(inputs)
    if config.backbone.adapters:
        backbone = Path(config.backbone.checkpoint)
        b = config.backbone
        out[ADAPTER_SECTION] = AdapterSpec(
            mode=b.mode, targets=split_targets(b.lora_targets), rank=b.lora_rank,
            alpha=b.lora_alpha, dropout=b.lora_dropout, backbone=str(backbone.resolve()),
            backbone_sha256=inputs["backbone_sha256"],
            backbone_relative=os.path.relpath(backbone.resolve(), run_root.resolve()),
        ).to_dict()  # fmt: skip
    out["goatdna_version"] = __version__
    return out


def finetune(
    config: FinetuneConfig,
    run_dir: str | Path,
    *,
    resume: bool = False,
    force: bool = False,
    runtime: Runtime | None = None,
) -> dict[str, Any]:
    """Fine-tune ``config.backbone.checkpoint`` on ``config.task`` into ``run_dir``; returns
    the summary (also written to summary.json). Raises GoatDNAError for user errors, and
    `Interrupted` after Ctrl-C/SIGTERM (last.ckpt then holds the step it stopped at).

    ``runtime``: the run's one `Runtime` where the caller built it (`finetune_runtime`: the
    command, before any work); None builds it here, so the devices are parsed once either way."""
    wall_start = time.perf_counter()
    run = RunDir(Path(run_dir))
    config = _check_backbone_options(config, run, resume)
    run.refuse_foreign(_input_paths(config), own=(FEATURE_CACHE.parts[0],))  # before any work
    backbone, backbone_config = load_backbone(config.backbone.checkpoint)
    _check_adapter_options(config, backbone)
    task = load_task(config.task, config.seed)
    plan = StepPlan(len(task.splits["train"]), config.trainer.batch_size, config.seed,
                    config.backbone.rc_augment)  # fmt: skip
    total_steps = plan.steps_per_epoch * config.trainer.epochs
    ckpt = Path(config.backbone.checkpoint)
    inputs = input_hashes(backbone_sha256(ckpt), task)  # a .ckpt's or an export folder's
    choices = (probe_choices(config.backbone.layer, config.backbone.pool, backbone.n_layers)
               if config.backbone.mode == "probe" else [ProbeChoice(None, config.backbone.pool)])  # fmt: skip

    def resolved_for(choice: ProbeChoice) -> dict[str, Any]:
        return resolve(config, task, backbone_config["model"], inputs, total_steps,
                       plan.steps_per_epoch, choice, run.root)  # fmt: skip

    # every rank, read only (a sweep's choice is checked again once made: an occupied folder
    # is refused before its work, a resumed one is compared with the choice)
    start_plan = None
    if len(choices) == 1 or resume is False:
        start_plan = run.check(resolved_for(stored_choice(run, choices, resolved_for)),
                               resume=resume, force=force)  # fmt: skip
    _before_work(run, config, task, backbone, len(choices), resume)
    print_warnings(task)
    tr = config.trainer
    runtime = runtime if runtime is not None else finetune_runtime(config)
    with (
        preflight.reported_stops(run.root, f"goatdna finetune --out {run.root} --resume"),
        contextlib.ExitStack() as locks,
    ):
        fabric = runtime.fabric(tr.strategy)
        locks.enter_context(run_dir_lock(fabric, run))  # at once: before features and sweep
        sweep: ProbeSweep | None = None
        features: ProbeFeatures | None = None
        if config.backbone.mode == "probe":  # every rank, as the features were computed before
            features = probe_features(run.root, inputs, backbone, task, config, choices,
                                      fabric.device, fabric.is_global_zero)  # fmt: skip
        chosen = choices[0]
        if len(choices) > 1:
            assert features is not None
            sweep = sweep_probes(features.by_choice, task, config, plan,
                                 lambda c: _task_module(resolved_for(c), config.seed))  # fmt: skip
            chosen = sweep.chosen
            start_plan = run.check(resolved_for(chosen), resume=resume, force=force)
        resolved = resolved_for(chosen)
        assert start_plan is not None
        with claimed_run_dir(fabric, run, resolved, start_plan, locked=True):
            if fabric.is_global_zero and features is not None:
                features.save(run.root)
                if sweep is not None:
                    write_sweep(run.root, sweep)
                    print_sweep(sweep)
            chosen_features = features.by_choice[chosen] if features is not None else None
            summary = _fit(fabric, config, resolved, backbone, task, plan, run,
                           start_plan.checkpoint, wall_start, chosen_features)  # fmt: skip
            summary.update(positional=backbone.config.positional, precision=runtime.precision)
            if config.backbone.mode == "probe":
                summary["probe"] = {"layer": chosen.layer_name, "pool": chosen.pool,
                                    "pairs_swept": len(choices)}  # fmt: skip
            if fabric.is_global_zero:
                run.write_summary(summary)
            return summary


def resumed_backbone(config: FinetuneConfig, run: RunDir) -> FinetuneConfig:
    """``config`` with the backbone a ``--resume`` should load, when the one config.yaml names
    is gone (the run folder was moved or renamed): an adapter run's backbone relative to the
    run folder (``adapter.backbone_relative``, so a run moved together with its backbone goes
    on), else one line naming the missing backbone and ``--checkpoint``. A ``--checkpoint``
    given on resume is taken as given; which backbone it is stays pinned either way, by
    ``inputs.backbone_sha256`` (`RunDir.check` compares it with the stored one)."""
    named = config.backbone.checkpoint
    if not named or Path(named).exists() or not run.config_yaml.is_file():
        return config
    stored = load_yaml(run.config_yaml)
    if (stored.get("backbone") or {}).get("checkpoint") != named:
        return config  # a --checkpoint given now: its own "not found" line names it
    relative = (stored.get(ADAPTER_SECTION) or {}).get("backbone_relative")
    if relative and (run.root / relative).exists():
        moved = str(run.root / relative)
        return dataclasses.replace(
            config, backbone=dataclasses.replace(config.backbone, checkpoint=moved)
        )
    where = f" nor at {run.root / relative}" if relative else ""
    raise GoatDNAError(
        f"--resume: the backbone {named} named in {run.config_yaml} is missing{where} (was "
        "it or the run moved?); pass --checkpoint with where that backbone is now"
    )


def _before_work(run: RunDir, config: FinetuneConfig, task: TaskData, backbone: DNADecoder,
                 n_choices: int, resume: bool) -> None:  # fmt: skip
    """Room on the disk for the checkpoints (full fine-tuning stores every weight; a probe or
    adapters only a few) and a probe's feature cache; a resumed run's CPU thread count."""
    probing = config.backbone.mode == "probe"
    trained = 0 if probing or config.backbone.adapters else backbone.num_params()
    cache = (feature_cache_bytes(run.root, task, config, n_choices, backbone.config.d_model)
             if probing else 0)  # fmt: skip
    run.check_room(training_checkpoint_bytes(trained), fresh=not resume, extra=cache)
    if resume:
        run.resume_cpu_threads()


def _check_backbone_options(config: FinetuneConfig, run: RunDir, resume: bool) -> FinetuneConfig:
    """A backbone checkpoint is given, and peft is importable when adapters are asked for;
    returns ``config`` with the backbone to load (`resumed_backbone` on ``--resume``)."""
    if not config.backbone.checkpoint:
        raise GoatDNAError("--checkpoint is required (a pretrained .ckpt)")
    if config.backbone.adapters:
        require_peft()
    return resumed_backbone(config, run) if resume else config


def _check_adapter_options(config: FinetuneConfig, backbone: DNADecoder) -> None:
    """--lora-targets and --lora-rank against this backbone's layers, before anything is
    written to the run folder (peft would refuse them only after config.yaml is there)."""
    b = config.backbone
    if b.adapters:
        check_adapters(backbone, AdapterSpec(b.mode, split_targets(b.lora_targets), b.lora_rank))


def stored_choice(
    run: RunDir, choices: list[ProbeChoice], resolved_for: Callable[[ProbeChoice], dict[str, Any]]
) -> ProbeChoice:
    """The choice to compare with a stored run before a sweep: the stored run's own when it is
    one of ``choices`` (a sweep decides head.layer and head.pool, so the same command must not
    read as "a different config: head.layer is 2 there, 1 now"), else the first."""
    if len(choices) > 1 and run.config_yaml.is_file():
        stored = load_yaml(run.config_yaml).get("head") or {}
        for choice in choices:
            head = resolved_for(choice)["head"]
            if (head["layer"], head["pool"]) == (stored.get("layer"), stored.get("pool")):
                return choice
    return choices[0]


def _task_module(resolved: dict[str, Any], seed: int) -> SequenceTaskModule:
    """The task module as `_fit` builds it: the same seed, so the head starts the same."""
    from lightning_fabric.utilities.seed import seed_everything

    seed_everything(seed, workers=True, verbose=False)
    return SequenceTaskModule(resolved)


def _input_paths(config: FinetuneConfig) -> dict[str, str | None]:
    task = config.task
    return {"--checkpoint": config.backbone.checkpoint, "--train": task.train, "--val": task.val,
            "--test": task.test, "--fasta": task.fasta}  # fmt: skip


def _standardized_head(
    fabric: Fabric,
    module: SequenceTaskModule,
    task: TaskData,
    config: FinetuneConfig,
    features: dict[str, Features] | None,
) -> None:
    """Set the head's input standardization from the pretrained backbone's train features:
    a probe's cached features, or (full fine-tuning) the first 512 train rows'."""
    if features is not None:
        module.head.set_standardization(features["train"][0])
        return
    sample = Split(task.splits["train"].tokens[:512], task.splits["train"].labels[:512])
    first, _ = embed_split(module.model, model_choice(module), sample,
                           config.trainer.eval_batch_size, False, fabric.device)  # fmt: skip
    module.model.cpu()
    module.head.set_standardization(first)
    return None


class FineTuning:
    """A sequence task as a `loop.Task`: one batch per optimizer step (`StepBatches`), the
    validation metrics at every epoch's end (where rows always land and last.ckpt is written),
    best.ckpt by the task's selection metric."""

    def __init__(
        self,
        fabric: Fabric,
        config: FinetuneConfig,
        resolved: dict[str, Any],
        module: SequenceTaskModule,
        task: TaskData,
        plan: StepPlan,
        features: dict[str, tuple[Tensor, Tensor | None]] | None,
    ) -> None:
        self.fabric, self.config, self.module, self.task = fabric, config, module, task
        self.plan, self.features = plan, features
        self.total_steps = int(resolved["schedule"]["total_steps"])
        self.head_and_backbone: _FabricModule | None = None  # set once Fabric has wrapped it
        selection = SELECTION_METRIC[task.task]
        self.spec = LoopSpec(
            total_steps=self.total_steps,
            columns=metric_columns(task.task),
            selection=selection,
            higher_is_better=HIGHER_IS_BETTER[selection],
            grad_clip=config.optim.grad_clip,
            non_finite_hint=NON_FINITE_HINT,
            hyper_parameters={"config": resolved},
            progress_label="finetune",
            progress_bar=config.trainer.progress_bar,
            shown=("train_loss", f"val_{selection}"),
            mean_train_loss=True,
        )

    def steps(self, start: int) -> Iterator[list[dict[str, Tensor]]]:
        fabric, seed = self.fabric, self.config.seed
        batches = StepBatches(self.task.splits["train"], self.plan, fabric.global_rank,
                              fabric.world_size, self.features.get("train") if self.features
                              else None)  # fmt: skip
        self.module.train_mode()
        for step in itertools.count(start + 1):
            # dropout masks are a function of (seed, step, rank): a resumed run draws the same
            torch.manual_seed((seed * 1_000_003 + (step - 1) * 131 + fabric.global_rank) % 2**63)
            yield [batches[step - 1]]

    def loss(self, batch: dict[str, Tensor]) -> Tensor:
        assert self.head_and_backbone is not None
        batch = self.fabric.to_device(batch)
        return self.module.loss(self.head_and_backbone(batch), batch["labels"])

    def due(self, step: int) -> Due:
        epoch_end = step % self.plan.steps_per_epoch == 0 or step == self.total_steps
        log = step % self.config.trainer.log_every == 0 or epoch_end
        return Due(log=log, validate=epoch_end, checkpoint=epoch_end)

    def validate(self, split: str = "val") -> dict[str, float]:
        found = self.features.get(split) if self.features else None
        preds = self.module.predict_rows(self.fabric, self.task.splits[split], found)
        return evaluate_predictions(self.task.task, self.task.splits[split].labels, preds)

    def row(self, step: int, lrs: list[float], grad_norm: Tensor) -> dict[str, float]:
        return {"lr_head": lrs[0], "lr_backbone": 0.0 if self.module.probe else lrs[-1],
                "epoch": round(step / self.plan.steps_per_epoch, 4)}  # fmt: skip


def _fit(
    fabric: Fabric,
    config: FinetuneConfig,
    resolved: dict[str, Any],
    backbone: DNADecoder,
    task: TaskData,
    plan: StepPlan,
    run: RunDir,
    checkpoint: Path | None,
    started: float,
    features: dict[str, Features] | None,
) -> dict[str, Any]:
    """Build the task module, run `loop.fit`, evaluate the best checkpoint, return the summary.
    ``features``: a probe's cached features of every split (None: full fine-tuning)."""
    module = _task_module(resolved, config.seed)
    module.model.load_state_dict(backbone.state_dict())
    module.attach_adapters()
    _standardized_head(fabric, module, task, config, features)
    fine_tuning = FineTuning(fabric, config, resolved, module, task, plan, features)
    trainable = Trainable.setup(fabric, module, lambda: module.optimizer(fine_tuning.total_steps))
    fine_tuning.head_and_backbone = trainable.module
    finished = fit(fabric, fine_tuning, run, trainable, checkpoint, started)

    # the best checkpoint's weights, evaluated on val and test
    best = run.best_ckpt if run.best_ckpt.is_file() else run.last_ckpt
    fabric.barrier()
    module.load_state_dict(read_torch_file(best)["state_dict"])
    results = {split: fine_tuning.validate(split) for split in task.splits if split != "train"}
    tr = config.trainer
    summary: dict[str, Any] = {
        "task": task.task,
        "classes": task.classes,
        "mode": config.backbone.mode,
        "params": sum(p.numel() for p in module.parameters()),
        "trainable_params": sum(p.numel() for p in module.parameters() if p.requires_grad),
        "steps": fine_tuning.total_steps,
        "epochs": tr.epochs,
        "best_step": finished.state.best_step,
        "selection_metric": fine_tuning.spec.selection,
        "train_loss": finished.state.last_train_loss,
        "val": results["val"],
        "test": results.get("test"),
        "rows": {s: len(v) for s, v in task.splits.items()},
        "truncated_rows": {s: v.truncated for s, v in task.splits.items()},
        "device": fabric.device.type,
        "world_size": fabric.world_size,
        "wall_seconds": finished.elapsed,
        "goatdna_version": __version__,
    }
    if task.task == "classification":
        summary["class_balance"] = {
            s: class_balance(v.labels, task.classes) for s, v in task.splits.items()
        }
    return summary
