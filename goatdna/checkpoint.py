"""Loading trained models from Lightning checkpoints without importing the training code.

A top-level module beside `configfile` and `runtime`: analysis, inference, fine-tuning (its
backbone) and export all load models through it, and none of them may import another (DESIGN.md).
Everyone reads checkpoints through a small contract (see the common design): ``torch.load(path,
map_location=..., weights_only=True)`` works because hyper-parameters are plain types;
``ckpt["hyper_parameters"]["config"]`` is the resolved run config as a dict whose ``"model"`` entry
is a `ModelConfig`, and ``ckpt["state_dict"]`` holds ``"model." + <DNADecoder key>``. Keeping to that
contract lets `evaluate`/`generate` run on a machine that has the model but not Lightning set up,
and keeps the import direction analysis -> model.

A folder written by `goatdna export` loads here too (``config.json`` with ``model_type`` goatdna
and every `ModelConfig` field, weights in ``model.safetensors`` under the same ``"model."``
prefix), so every command that takes ``--checkpoint`` takes an export folder.

Every file is read here, once: `read_checkpoint` returns a `CheckpointFile` (what was read and
what it holds: a language model, a fine-tuned head, adapters) that `load_checkpoint`,
`load_task_model`, `adapter_weights` and `checkpoint_provenance` all take in place of a path, so
a command that needs several of them (`goatdna export --no-merge`) reads each file one time.
`read_torch_file` is goatdna's one call of ``torch.load`` (always ``weights_only=True``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from goatdna.atomic import atomic_path
from goatdna.configfile import from_dict
from goatdna.errors import GoatDNAError

if TYPE_CHECKING:
    import torch

    from goatdna.adapters import AdapterSpec
    from goatdna.model import DNADecoder, ModelConfig
    from goatdna.model.classifier import SequenceTaskModel

MODEL_PREFIX = "model."
HEAD_PREFIX = "head."
EXPORT_CONFIG = "config.json"
EXPORT_WEIGHTS = "model.safetensors"
EXPORT_MODEL_TYPE = "goatdna"


ROPE_EXTENSIONS = ("none", "linear", "ntk")
"""`ModelConfig.rope_extension`'s values (also the choices of ``--rope-extension``)."""

CheckpointKind = Literal["pretrained", "finetuned", "export"]
"""What `load_checkpoint` read: a `goatdna train` .ckpt, a `goatdna finetune` .ckpt (its run
config has a ``head`` section, a `SequenceTaskConfig`) or a `goatdna export` folder."""


@dataclasses.dataclass(frozen=True)
class LoadedCheckpoint:
    """What `load_checkpoint` returns: the decoder, its typed config, what was read, and the run.

    ``model`` is the `DNADecoder` (for a fine-tuned checkpoint: its backbone; a fine-tuned
    model's export folder stores no next-base head, so that head is NaN there) in eval mode;
    ``model_config`` is its `ModelConfig` (with any ``rope_extension`` asked for applied).
    ``run_config`` is the raw run-config mapping the model was trained with (``"model"`` entry
    matching ``model_config``). It stays a mapping rather than a dataclass because its readers need
    sections that differ by kind and that no single dataclass describes: a fine-tuned model's
    ``head``/``schedule`` (parsed strictly by `goatdna predict` into `SequenceTaskConfig`),
    ``data.seq_len`` for the training length, the manifest hash the report compares, and
    `goatdna export`, which copies the whole of it into ``config.json``.
    """

    model: DNADecoder
    model_config: ModelConfig
    kind: CheckpointKind
    run_config: Mapping[str, Any]
    source: Path

    @property
    def train_length(self) -> int:
        """Training context length (the run's ``data.seq_len``, else ``model.train_length``)."""
        return train_length_of(self.run_config)


def unreadable_reason(err: BaseException) -> str:
    """Why ``torch.load(..., weights_only=True)`` refused a file, in goatdna's words.

    torch's own message for a file holding more than weights ends with advice to load it with
    ``weights_only=False``, which runs whatever code the file holds: never repeated here (a
    goatdna checkpoint never needs it). Others keep their first sentence only.
    """
    import pickle

    if isinstance(err, pickle.UnpicklingError):
        return (
            "it is not a torch checkpoint of weights and plain values: a foreign or damaged "
            "file, or one holding Python objects goatdna never loads"
        )
    text = str(err).splitlines()[0] if str(err) else ""
    first = text.split(". ")[0].rstrip(".")
    return f"{err.__class__.__name__}: {first}" if first else err.__class__.__name__


def read_torch_file(path: Path, *, mmap: bool = False) -> Any:
    """``torch.load(path, map_location="cpu", weights_only=True)``: goatdna's one call of it.

    Every checkpoint, training state and feature cache goatdna reads comes through here, so none
    is ever unpickled with ``weights_only=False`` (which runs whatever code a file holds).
    ``mmap`` maps the tensors instead of reading them (a resume check that reads the keys)."""
    import torch

    return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)


FileHolds = Literal["language-model", "fine-tuned", "adapters"]
"""What a checkpoint holds (`CheckpointFile.holds`): a pretrained language model, a fine-tuned
model (trunk and task head), or a LoRA/IA3 fine-tune's adapters and head (its backbone is another
file, `find_backbone`)."""


@dataclasses.dataclass(frozen=True)
class CheckpointFile:
    """One read of a checkpoint (`read_checkpoint`): a ``.ckpt`` or a `goatdna export` folder.

    ``record`` is what was read: a ``.ckpt``'s whole dictionary (checked to hold
    ``hyper_parameters.config.model`` and ``state_dict``), or an export folder's config.json.
    ``run_config`` is the run config as recorded (``hyper_parameters.config``, or an export's
    ``goatdna_run_config``). Pass the object, not the path, to every loader a command needs.
    """

    path: Path
    format: Literal["ckpt", "export"]
    record: Mapping[str, Any]

    @property
    def run_config(self) -> Mapping[str, Any]:
        if self.format == "ckpt":
            return self.record["hyper_parameters"]["config"]
        recorded = self.record.get("goatdna_run_config")
        return recorded if isinstance(recorded, Mapping) else {}

    @property
    def model_fields(self) -> dict[str, Any]:
        """The model's `ModelConfig` fields as recorded: a ``.ckpt``'s ``model`` section, or the
        model fields of an export's config.json (a field missing there is one line)."""
        if self.format == "ckpt":
            return dict(self.run_config["model"])
        from goatdna.model import ModelConfig

        names = [f.name for f in dataclasses.fields(ModelConfig)]
        missing = [name for name in names if name not in self.record]
        if missing:
            raise GoatDNAError(
                f"{self.path / EXPORT_CONFIG}: lacks model field(s) {', '.join(missing)}; "
                "re-run `goatdna export`"
            )
        return {name: self.record[name] for name in names}

    @property
    def head(self) -> Mapping[str, Any] | None:
        """The fine-tuned model's ``head`` section (`task_head`), else None."""
        return task_head(self.run_config)

    @functools.cached_property
    def adapters(self) -> AdapterSpec | None:
        """A LoRA/IA3 fine-tune ``.ckpt``'s `AdapterSpec` (an export folder has them merged)."""
        if self.format != "ckpt":
            return None
        from goatdna.adapters import adapter_spec

        return adapter_spec(self.run_config, self.path)

    @property
    def holds(self) -> FileHolds:
        if self.adapters is not None:
            return "adapters"
        return "fine-tuned" if self.head is not None else "language-model"

    @functools.cached_property
    def state(self) -> Mapping[str, Any]:
        """Every tensor, on the CPU: a ``.ckpt``'s ``state_dict``, or an export folder's
        model.safetensors (read when first asked for, so a folder refused for its config.json
        is never read further)."""
        if self.format == "ckpt":
            return self.record["state_dict"]
        weights_path = self.path / EXPORT_WEIGHTS
        if not weights_path.is_file():
            raise GoatDNAError(f"{self.path}: no {EXPORT_WEIGHTS}; re-run `goatdna export`")
        try:
            from safetensors import SafetensorError
            from safetensors.torch import load_file
        except ImportError:
            raise GoatDNAError(
                f"{weights_path}: reading export folders needs safetensors: pip install "
                "'goatdna[hf]'"
            ) from None
        try:
            return load_file(str(weights_path), device="cpu")
        except (SafetensorError, OSError) as err:
            raise GoatDNAError(f"{weights_path}: not a readable safetensors file ({err})") from None


def read_checkpoint(path: str | Path, *, mmap: bool = False) -> CheckpointFile:
    """Read a checkpoint once: a ``.ckpt`` (`goatdna train` or `goatdna finetune`) or a
    `goatdna export` folder (its config.json now, its weights when first needed). A missing,
    unreadable or foreign file is one line. ``mmap``: map a ``.ckpt``'s tensors instead of
    reading them (`goatdna model-info` reads only its config)."""
    path = Path(path)
    if path.is_dir():
        return CheckpointFile(path, "export", read_export_config(path))
    if not path.is_file():
        raise GoatDNAError(
            f"{path}: checkpoint not found; pass a .ckpt file such as runs/goat/checkpoints/best.ckpt"
            " or a folder written by `goatdna export`"
        )
    try:
        ckpt = read_torch_file(path, mmap=mmap)
    except Exception as err:  # a truncated or foreign file: say which one
        raise GoatDNAError(
            f"{path}: not a readable goatdna checkpoint ({unreadable_reason(err)})"
        ) from None
    try:
        _ = (ckpt["hyper_parameters"]["config"]["model"], ckpt["state_dict"])
    except (KeyError, TypeError):
        raise GoatDNAError(
            f"{path}: checkpoint lacks hyper_parameters.config.model or state_dict; "
            "was it written by `goatdna train`?"
        ) from None
    return CheckpointFile(path, "ckpt", ckpt)


def _as_file(source: str | Path | CheckpointFile) -> CheckpointFile:
    return source if isinstance(source, CheckpointFile) else read_checkpoint(source)


def load_checkpoint(
    path: str | Path | CheckpointFile,
    device: str = "cpu",
    rope_extension: str | None = None,
    *,
    lm_command: str | None = None,
    backbone: CheckpointFile | None = None,
) -> LoadedCheckpoint:
    """Load a DNADecoder model (eval mode, on ``device``), its config and the run config from a
    checkpoint (a ``.ckpt`` from `goatdna train` or `goatdna finetune`, or a folder from
    `goatdna export`), given by path or as the `CheckpointFile` `read_checkpoint` returned.

    ``rope_extension`` (``none``/``linear``/``ntk``) applies RoPE position interpolation or NTK
    scaling to a RoPE model at evaluation time, as the paper's RoPE-PI baseline does: it changes
    nothing within the training length and stretches the rotation beyond it. None keeps the
    checkpoint's own setting.

    A LoRA/IA3 fine-tune's checkpoint (`goatdna.adapters`: adapters and head only) gives the
    backbone it names (by path, checked by sha256) with its adapters merged in: the decoder the
    fine-tuned model runs, never the bare pretrained one. A missing or different backbone is
    refused in one line. ``backbone``: that backbone already read (found by `find_backbone`), so
    a caller that needs it bare too reads it once.

    ``lm_command`` names a command that scores with the next-base (language-model) head
    (``"score-variants"``, ``"evaluate"``, ...): a fine-tuned checkpoint or export is then
    refused in one line (`refuse_task_model`), before any backbone is read.
    """
    from goatdna.model import ModelConfig

    check_device(device)
    file = _as_file(path)
    if file.format == "export":
        return load_export(file, device, rope_extension, lm_command=lm_command)
    path = file.path
    config = file.run_config
    model_dict = with_rope_extension(dict(config["model"]), rope_extension, path)
    config = {**config, "model": model_dict}
    model_config = from_dict(ModelConfig, dict(model_dict), "model")
    if lm_command is not None:
        refuse_task_model(config, path, lm_command)
    state = file.state
    if not any(k.startswith(MODEL_PREFIX) for k in state):
        raise GoatDNAError(f"{path}: state_dict has no '{MODEL_PREFIX}*' weights")
    spec = file.adapters
    if spec is not None:  # adapters + head only: the backbone comes from where the config says
        if backbone is None:
            backbone = read_checkpoint(find_backbone(spec, path))
        model = _adapted_backbone(spec, state, path, device, rope_extension, backbone)
        return LoadedCheckpoint(model, model_config, "finetuned", dict(config), path)
    model = _build_model(model_config, state, device, path, "the model config in the checkpoint")
    kind: CheckpointKind = "finetuned" if task_head(config) is not None else "pretrained"
    return LoadedCheckpoint(model, model_config, kind, dict(config), path)


def _adapted_backbone(
    spec: AdapterSpec,
    state: Mapping[str, Any],
    source: Path,
    device: str,
    rope_extension: str | None,
    backbone: CheckpointFile,
) -> DNADecoder:
    """An adapter fine-tune's backbone: the pretrained checkpoint it names (`find_backbone`,
    read as ``backbone``), its peft adapters loaded from ``state`` and merged in."""
    from goatdna.adapters import attach, merged, require_peft

    require_peft()
    loaded = load_checkpoint(backbone, "cpu", rope_extension)
    model = attach(loaded.model, spec)
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    weights = {k[len(MODEL_PREFIX) :]: v for k, v in state.items() if k.startswith(MODEL_PREFIX)}
    result = model.load_state_dict(weights, strict=False)
    missing = sorted(trained & set(result.missing_keys))
    if missing or result.unexpected_keys:
        wrong = missing[:1] or list(result.unexpected_keys)[:1]
        raise GoatDNAError(
            f"{source}: adapter weights do not match its adapter config ({len(missing)} "
            f"missing, {len(result.unexpected_keys)} unexpected, e.g. {wrong[0]})"
        )
    model = merged(model).requires_grad_(True)  # as a pretrained checkpoint loads
    model.to(device)
    model.eval()
    return model


def find_backbone(spec: AdapterSpec, source: Path) -> Path:
    """The backbone checkpoint an adapter fine-tune ``source`` was trained on: the first of
    `AdapterSpec.backbone_paths` (relative to the run folder, then the recorded absolute path)
    whose sha256 is the recorded one. None there, or only other weights, is one line."""
    from goatdna.adapters import backbone_sha256

    tried = spec.backbone_paths(source)
    present = [path for path in tried if path.exists()]
    if not present:
        shown = " or ".join(str(path) for path in tried) or "(no path recorded)"
        raise GoatDNAError(
            f"{source}: its backbone {shown} is missing; these adapters need that checkpoint "
            f"(sha256 {spec.backbone_sha256[:12]}...) back at that path"
        )
    found = []
    for path in present:
        found.append(backbone_sha256(path))
        if found[-1] == spec.backbone_sha256:
            return path
    raise GoatDNAError(
        f"{source}: backbone {present[0]} is not the one these adapters were trained on (sha256 "
        f"{found[0][:12]}..., expected {spec.backbone_sha256[:12]}...); restore that checkpoint"
    )


@dataclasses.dataclass(frozen=True)
class LoadedTaskModel:
    """What `load_task_model` returns: a fine-tuned `SequenceTaskModel` in eval mode on the CPU.

    ``config`` is the run config it was fine-tuned with (its ``head`` section is the model's
    `SequenceTaskConfig`); ``source`` the checkpoint or export folder it was read from.
    """

    classifier: SequenceTaskModel
    config: dict[str, Any]
    source: Path

    @property
    def task(self) -> str:
        return self.classifier.task_config.task

    @property
    def classes(self) -> list[str]:
        return list(self.classifier.task_config.classes)


def load_task_model(
    path: str | Path | CheckpointFile,
    *,
    backbone: CheckpointFile | None = None,
    decoder: DNADecoder | None = None,
) -> LoadedTaskModel:
    """Read a fine-tuned model: `goatdna finetune`'s best.ckpt/last.ckpt or its `goatdna export`
    folder (a path, or the `CheckpointFile` already read). The one loader of fine-tuned models:
    predict, embed, export and attribution all read them here, so a new kind of fine-tune
    (adapters, say) is taught to one function.

    The backbone comes through `load_checkpoint` (``backbone``: as there), the ``head`` section
    strictly as a `SequenceTaskConfig`, the ``"head."`` weights strictly into its `SequenceHead`.
    ``decoder`` puts the head on that trunk instead (an unmerged export's bare backbone), once
    the fine-tuned model has loaded as a whole, so its checks are the same.
    """
    from goatdna.configfile import ConfigKeyError
    from goatdna.model.classifier import SequenceTaskConfig, SequenceTaskModel

    file = _as_file(path)
    path = file.path
    loaded = load_checkpoint(file, "cpu", backbone=backbone)
    config = dict(loaded.run_config)
    if task_head(config) is None:
        raise GoatDNAError(
            f"{path}: is a pretrained language model, not a fine-tuned classifier; train one "
            "with `goatdna finetune` and pass RUN_DIR/checkpoints/best.ckpt"
        )
    try:
        task_config = from_dict(SequenceTaskConfig, dict(config["head"]), "head")
    except ConfigKeyError as err:
        raise GoatDNAError(
            f"{path}: {err.detail}; fine-tune it again with this goatdna to predict with it"
        ) from None
    classifier = SequenceTaskModel(loaded.model, task_config)
    state = file.state
    head_state = {k[len(HEAD_PREFIX) :]: v for k, v in state.items() if k.startswith(HEAD_PREFIX)}
    try:
        classifier.head.load_state_dict(head_state, strict=True)
    except RuntimeError as err:
        raise GoatDNAError(
            f"{path}: head weights do not match its config ({str(err).splitlines()[0]})"
        ) from None
    if decoder is not None:
        head = classifier.head
        classifier = SequenceTaskModel(decoder, task_config)
        classifier.head.load_state_dict(head.state_dict())
    classifier.eval()
    return LoadedTaskModel(classifier=classifier, config=config, source=path)


def task_head(run_config: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A fine-tuned model's ``head`` section (a `SequenceTaskConfig` as a mapping), else None.

    The same test for a ``.ckpt`` and an export folder, so a command that reads the head's
    choices (its layer and pooling, say) reads them from either."""
    head = run_config.get("head")
    return head if isinstance(head, Mapping) and "task" in head else None


def refuse_task_model(run_config: Mapping[str, Any], source: Path, command: str) -> None:
    """Refuse a fine-tuned model where ``command`` needs the pretrained language model.

    The one check behind every command that scores with the next-base head (`load_checkpoint`'s
    ``lm_command``), the counterpart of `load_task_model`'s refusal of a language model. A
    fine-tune's checkpoint or export still holds a next-base head (its backbone's state-dict is a
    language model's), but fine-tuning never trains it: under a fully fine-tuned trunk, or a
    LoRA/IA3 backbone with its adapters merged in, that head scores something nobody trained
    (log-likelihood ratios off by over a nat), so it is refused in one line rather than read.
    """
    head = task_head(run_config)
    if head is None:
        return
    from goatdna.adapters import adapter_spec

    spec = adapter_spec(run_config, source)
    section = run_config.get("backbone")
    mode = section.get("mode") if isinstance(section, Mapping) else None
    if spec is not None:
        how = f"{spec.mode} adapters on the backbone {spec.backbone}"
    elif mode == "probe":
        how = "a probe on a frozen backbone"
    else:
        how = "its backbone fine-tuned too"
    raise GoatDNAError(
        f"{source}: is a fine-tuned {head['task']} model ({how}), not a pretrained language "
        f"model; {command} scores with the language model's next-base head, which fine-tuning "
        "does not train: pass the pretraining checkpoint (e.g. runs/goat/checkpoints/best.ckpt), "
        "or apply the fine-tuned model with `goatdna predict`"
    )


def adapter_weights(path: str | Path | CheckpointFile) -> dict[str, Any]:
    """A LoRA/IA3 fine-tune checkpoint's adapter tensors, under their names in the fine-tuned
    model (``"model." + <peft name>``), for an unmerged export."""
    state = _as_file(path).state
    return {k: v for k, v in state.items() if k.startswith(MODEL_PREFIX)}


def _without_lm_head(
    state: Mapping[str, torch.Tensor], model_config: ModelConfig
) -> Mapping[str, torch.Tensor]:
    """A classifier export's weights, its next-base head filled in with NaN when not stored.

    Fine-tuning never trains that head, so an export of a fine-tuned model leaves it out (older
    exports hold the pretrained one, loaded as it is). The decoder still has the parameter; NaN
    makes any next-base score from it visibly wrong instead of plausible (the commands that
    score with it refuse a fine-tuned model first: `refuse_task_model`)."""
    import torch

    key = MODEL_PREFIX + "head.weight"
    if model_config.tie_embeddings or key in state:
        return state
    shape = (model_config.vocab_size, model_config.d_model)
    return {**state, key: torch.full(shape, math.nan)}


def _build_model(
    model_config: ModelConfig, state: Mapping[str, Any], device: str, source: Path, describes: str
) -> DNADecoder:
    """DNADecoder with the ``"model."`` weights of ``state`` loaded strictly, eval mode, on ``device``;
    a mismatch names ``source`` and what the weights should match (``describes``)."""
    from goatdna.model import DNADecoder

    weights = {k[len(MODEL_PREFIX) :]: v for k, v in state.items() if k.startswith(MODEL_PREFIX)}
    model = DNADecoder(model_config)
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as err:
        first = str(err).splitlines()[0]
        raise GoatDNAError(f"{source}: weights do not match {describes} ({first})") from None
    model.to(device)
    model.eval()
    return model


def read_export_config(folder: str | Path) -> dict[str, Any]:
    """An export folder's config.json, checked to be a goatdna export (else a GoatDNAError)."""
    folder = Path(folder)
    config_path = folder / EXPORT_CONFIG
    if not config_path.is_file():
        if (folder / "base" / EXPORT_CONFIG).is_file() and (folder / "adapter").is_dir():
            # base/ alone is the backbone without the trained adapter: naming it would be wrong
            raise GoatDNAError(
                f"{folder}: an unmerged adapter export (base/ + adapter/), which peft loads (see "
                "its README.md); for goatdna commands pass the fine-tune's .ckpt or an export "
                "written without --no-merge"
            )
        raise GoatDNAError(
            f"{folder}: not a goatdna export folder (no {EXPORT_CONFIG}); pass a .ckpt file or a "
            "folder written by `goatdna export`"
        )
    try:
        data = json.loads(config_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise GoatDNAError(
            f"{config_path}: not valid JSON ({err}); re-run `goatdna export`"
        ) from None
    if not isinstance(data, dict):
        raise GoatDNAError(f"{config_path}: expected a JSON object; re-run `goatdna export`")
    model_type = data.get("model_type")
    if model_type != EXPORT_MODEL_TYPE:
        raise GoatDNAError(
            f"{config_path}: model_type is {model_type!r}, not {EXPORT_MODEL_TYPE!r}; this folder "
            "holds another kind of model (goatdna reads only folders written by `goatdna export`)"
        )
    return data


def with_rope_extension(
    model_dict: dict[str, Any], extension: str | None, source: Path
) -> dict[str, Any]:
    """``model_dict`` with ``rope_extension`` set (None: unchanged); only RoPE models take one."""
    if extension is None:
        return model_dict
    if extension not in ROPE_EXTENSIONS:
        raise GoatDNAError(
            f"--rope-extension {extension!r}: expected one of {', '.join(ROPE_EXTENSIONS)}"
        )
    positional = model_dict.get("positional")
    if positional != "rope":
        raise GoatDNAError(
            f"--rope-extension applies to RoPE models; {source} is {positional}: drop the option"
        )
    return {**model_dict, "rope_extension": extension}


def load_export(
    folder: str | Path | CheckpointFile,
    device: str = "cpu",
    rope_extension: str | None = None,
    *,
    lm_command: str | None = None,
) -> LoadedCheckpoint:
    """Load a `goatdna export` folder (kind ``"export"``; DNADecoder in eval mode on ``device``).

    The run config is the one the model was trained with (``goatdna_run_config``), its
    ``"model"`` entry rebuilt from the folder's own ModelConfig fields. ``lm_command``: as in
    `load_checkpoint` (a classifier's folder is refused).
    """
    from goatdna.model import ModelConfig

    file = _as_file(folder)
    folder, data = file.path, file.record
    config_path = folder / EXPORT_CONFIG
    fields = file.model_fields
    check_export_edits(data, config_path)
    recorded = data.get("goatdna_run_config")
    if lm_command is not None and isinstance(recorded, Mapping):
        refuse_task_model(recorded, folder, lm_command)
    model_dict = with_rope_extension(fields, rope_extension, folder)
    model_config = from_dict(ModelConfig, dict(model_dict), EXPORT_CONFIG)
    weights_path = folder / EXPORT_WEIGHTS
    state = file.state
    if isinstance(recorded, Mapping) and task_head(recorded) is not None:
        state = _without_lm_head(state, model_config)
    model = _build_model(
        model_config, state, device, weights_path, f"the model fields in {EXPORT_CONFIG}"
    )
    run_config = data.get("goatdna_run_config")
    config = dict(run_config) if isinstance(run_config, dict) else {}
    config["model"] = model_dict
    return LoadedCheckpoint(model, model_config, "export", config, folder)


EDITABLE_EXPORT_FIELDS = frozenset({"rope_extension", "attention"})
"""Model fields a user may change in an export's config.json: how the same weights are run
(position interpolation, the attention kernel), not what they are."""

CLASSIFIER_FIELDS = {
    "classifier_pool": "pool",
    "classifier_layer": "layer",
    "classifier_rc_average": "rc_average",
    "classifier_max_length": "max_length",
    "classifier_dropout": "dropout",
    "regression_label_mean": "label_mean",
    "regression_label_std": "label_std",
}
"""config.json's classifier fields and the ``head`` (`SequenceTaskConfig`) field each copies."""


def check_export_edits(data: Mapping[str, Any], config_path: Path) -> None:
    """Refuse a config.json edited after export, one line naming the first field that differs.

    The weights fix a model, and ``goatdna_run_config`` records the one they were trained as;
    the top-level fields are copies of it for transformers. An edit there that keeps every
    weight's shape (``n_heads``, ``goat_modes``' frequencies, a probe's ``classifier_layer``)
    would otherwise load silently and compute another model; one that changes a shape is
    caught by the strict weight load. Folders without a recorded config (none are written so)
    have nothing to compare against.
    """
    run_config = data.get("goatdna_run_config")
    if not isinstance(run_config, Mapping):
        return
    fix = "undo the edit or re-run `goatdna export`"
    recorded_model = run_config.get("model")
    if isinstance(recorded_model, Mapping):
        for name, value in recorded_model.items():
            if name in EDITABLE_EXPORT_FIELDS or name not in data:
                continue
            if data[name] != value:
                raise GoatDNAError(
                    f"{config_path}: {name} is {data[name]!r} but the model was trained with "
                    f"{value!r} (goatdna_run_config.model.{name}); {fix}"
                )
    head = task_head(run_config)
    if head is None:
        return
    for field, key in CLASSIFIER_FIELDS.items():
        if field in data and key in head and data[field] != head[key]:
            raise GoatDNAError(
                f"{config_path}: {field} is {data[field]!r} but the head was trained with "
                f"{head[key]!r} (goatdna_run_config.head.{key}); {fix}"
            )
    classes = list(head.get("classes") or ()) or ["value"]
    id2label = data.get("id2label")
    if (
        isinstance(id2label, Mapping)
        and [id2label[k] for k in sorted(id2label, key=int)] != classes
    ):
        raise GoatDNAError(
            f"{config_path}: id2label does not list the trained classes {classes} in order "
            f"(goatdna_run_config.head.classes); {fix}"
        )


def checkpoint_provenance(path: str | Path | CheckpointFile) -> dict[str, Any]:
    """What a model was trained on and for how long, for `goatdna export`'s config and card.

    From a ``.ckpt``: its ``global_step``, the data manifest hash the run recorded, the
    latest validation loss the run had computed when it saved this checkpoint, and tokens seen
    (steps x the global batch in tokens, from the run's summary.json when it is beside the
    checkpoints folder, else from the config with one device). From an export folder: the
    provenance it already carries.
    """
    file = _as_file(path)
    path, ckpt = file.path, file.record
    if file.format == "export":
        return dict(ckpt.get("goatdna_provenance") or {})
    hyper = ckpt.get("hyper_parameters") or {}
    config = hyper.get("config") or {}
    steps = int(ckpt.get("global_step", 0))
    # the training loop's bookkeeping, a `goatdna.training.checkpoints.TrainState` as plain
    # values (absent from checkpoints written by `save_checkpoint`)
    loop = ckpt.get("loop") or {}
    last_val = {str(k): float(v) for k, v in dict(loop.get("last_val") or {}).items()}
    val_loss = last_val.get("loss")
    val_step = steps if int(loop.get("best_step", -1)) == steps else None
    summary_path = path.parent.parent / "summary.json"
    batch_tokens = None
    if path.parent.name == "checkpoints" and summary_path.is_file():
        try:
            batch_tokens = json.loads(summary_path.read_text()).get("global_batch_tokens")
        except (OSError, json.JSONDecodeError):
            batch_tokens = None
    if not isinstance(batch_tokens, int):
        data, trainer = config.get("data") or {}, config.get("trainer") or {}
        try:
            batch_tokens = (
                int(data["micro_batch_size"])
                * int(data["seq_len"])
                * int(trainer.get("accumulate", 1))
            )
        except (KeyError, TypeError, ValueError):
            batch_tokens = None
    finite = val_loss is not None and math.isfinite(val_loss)
    return {
        "source_checkpoint": path.name,
        "steps": steps,
        "tokens_seen": steps * batch_tokens if batch_tokens else None,
        "global_batch_tokens": batch_tokens,
        "data_manifest_sha256": hyper.get("data_manifest_sha256")
        or config.get("data_manifest_sha256"),
        "trained_with_goatdna": hyper.get("goatdna_version") or None,
        "train_length": train_length_of(config) if config.get("model") else None,
        "val_loss": val_loss if finite else None,
        "val_bits_per_base": val_loss / math.log(2) if val_loss is not None and finite else None,
        "val_step": val_step if finite else None,
    }


def check_device(device: str) -> None:
    """``device`` must name a torch device that exists here (cuda without a GPU is one line).

    The CLI picks the device with `goatdna.runtime.single_device` (``--accelerator``/
    ``--devices``); this check keeps the library's own callers to the same one-line errors.
    """
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        raise GoatDNAError(
            f"device {device!r}: not a torch device; use cpu, cuda or cuda:N"
        ) from None
    if parsed.type == "cuda":
        available = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if available == 0 or (parsed.index or 0) >= available:
            raise GoatDNAError(
                f"device {device}: no such CUDA GPU here ({available} visible); use cpu"
            )


def save_checkpoint(path: str | Path, model: torch.nn.Module, config: dict[str, Any]) -> Path:
    """Write ``model`` in the checkpoint contract's shape (what `load_checkpoint` reads).

    For models built or trained outside `goatdna train` (conversions, tests): ``config`` is a
    run-config dict with at least a ``"model"`` entry (``configfile.to_dict(ModelConfig)``).
    Written to a temporary name and renamed.
    """
    import torch

    path = Path(path)
    state = {MODEL_PREFIX + k: v.detach().cpu() for k, v in model.state_dict().items()}
    with atomic_path(path) as tmp:
        torch.save({"state_dict": state, "hyper_parameters": {"config": config}}, tmp)
    return path


def train_length_of(config: Mapping[str, Any]) -> int:
    """Training context length recorded in a run config (data.seq_len, else model.train_length)."""
    data = config.get("data") or {}
    if isinstance(data, dict) and isinstance(data.get("seq_len"), int):
        return int(data["seq_len"])
    return int(config["model"]["train_length"])


def best_checkpoint(run_dir: str | Path) -> Path:
    """A run's best-by-validation checkpoint (falls back to last.ckpt for runs without one)."""
    run_dir = Path(run_dir)
    for name in ("best.ckpt", "last.ckpt"):
        candidate = run_dir / "checkpoints" / name
        if candidate.is_file():
            return candidate
    raise GoatDNAError(
        f"{run_dir}: no checkpoints/best.ckpt or checkpoints/last.ckpt; "
        "train the run first with `goatdna train --out ...`"
    )


def read_summary(run_dir: str | Path) -> dict[str, Any]:
    """A run's summary.json (written by `goatdna train` at the end of training)."""
    path = Path(run_dir) / "summary.json"
    if not path.is_file():
        raise GoatDNAError(
            f"{path}: not found; the run has not finished (resume it with `goatdna train --resume`)"
        )
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise GoatDNAError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(data, dict):
        raise GoatDNAError(f"{path}: expected a JSON object")
    return data
