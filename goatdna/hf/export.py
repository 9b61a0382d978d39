"""`goatdna export`: a trained model as a self-contained Hugging Face folder.

::

    DIR/
      config.json              every ModelConfig field, model_type goatdna, auto_map, goatdna
                               version, provenance (data manifest sha256, steps, tokens seen,
                               validation loss) and the run config it was trained with
      model.safetensors        weights only ("model." + DNADecoder key; a fine-tuned model's head
                               as "head." + SequenceHead key, and not the next-base head, which
                               fine-tuning never trains), float32 as trained
      generation_config.json   suppress_tokens [4]: N is never generated
      tokenizer_config.json    GoatDNATokenizer (A C G T N = 0..4, the shards' ids) + auto_map
      vocab.json
      configuration_goatdna.py, modeling_goatdna.py, tokenization_goatdna.py
      config.py cache.py ...   goatdna/model's files (`MODEL_SOURCES`), verbatim:
                               trust_remote_code needs torch and transformers only
      README.md                the model card

A LoRA/IA3 fine-tune exports merged (adapters folded into the weights: the layout above) or,
unmerged, as ``DIR/base/`` (that layout: the pretrained backbone with the fine-tuned head) and
``DIR/adapter/`` (peft's ``adapter_config.json`` + ``adapter_model.safetensors``), which
``PeftModel.from_pretrained(AutoModelForSequenceClassification.from_pretrained(DIR/base), DIR/adapter)``
loads. The adapter config names its base as ``base`` (relative: from ``DIR``) through
transformers' ``AutoModelForSequenceClassification``, so peft's ``AutoPeftModel`` builds it from
``base/``'s own code (``trust_remote_code``), never from an installed goatdna.

The folder is written under a temporary name beside ``DIR`` and swapped in when complete
(`goatdna.atomic.atomic_dir`).
`goatdna.checkpoint.load_checkpoint` reads it back, so every command that takes
``--checkpoint`` takes the folder too.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goatdna import __version__
from goatdna.atomic import atomic_dir, check_free_space, check_output_dir
from goatdna.errors import GoatDNAError
from goatdna.formats import json_text

from .model_card import model_card

if TYPE_CHECKING:  # torch loads when a model is exported, not when this module loads
    from torch import Tensor

    from goatdna.model import DNADecoder, ModelConfig
    from goatdna.model.classifier import SequenceTaskModel

MODEL_TYPE = "goatdna"
PAD_ID = 5
"""``<pad>``'s id in `GoatDNATokenizer` (the id after the bases A C G T N)."""
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHT_PREFIX = "model."  # the transformers wrapper holds DNADecoder as ``.model``
MODEL_SOURCES = (
    "config.py",
    "cache.py",
    "goat.py",
    "alibi.py",
    "rope.py",
    "norm.py",
    "attention.py",
    "attention_maps.py",
    "transformer.py",
    "scoring.py",
    "vocab.py",
    "classifier.py",
)
"""goatdna/model files the transformers wrapper imports (directly or through each other)."""
HF_SOURCES = ("configuration_goatdna.py", "modeling_goatdna.py", "tokenization_goatdna.py")
AUTO_MAP = {
    "AutoConfig": "configuration_goatdna.GoatDNAConfig",
    "AutoModel": "modeling_goatdna.GoatDNAModel",
    "AutoModelForCausalLM": "modeling_goatdna.GoatDNAForCausalLM",
    "AutoModelForSequenceClassification": "modeling_goatdna.GoatDNAForSequenceClassification",
}
NO_MERGE_DIRS = ("base", "adapter")
"""An unmerged adapter export's two folders (`AdapterExport`)."""
ADAPTER_AUTO_MAPPING = {
    "base_model_class": "AutoModelForSequenceClassification",
    "parent_library": "transformers",
}
"""adapter_config.json's ``auto_mapping``: the class peft's ``AutoPeftModel`` builds the base
with. peft would record the class the adapters were attached to, an installed goatdna's
(``goatdna.hf.modeling_goatdna``: outside peft's import allowlist, and another copy of the code
than the folder's); transformers' Auto class reads ``base/config.json``'s ``auto_map`` instead."""
LM_HEAD_KEY = WEIGHT_PREFIX + "head.weight"
"""The next-base head's weight in model.safetensors (absent when the head is tied)."""
TOKENIZER_AUTO_MAP = {"AutoTokenizer": ["tokenization_goatdna.GoatDNATokenizer", None]}
_GOATDNA_IMPORT = re.compile(r"^\s*(from|import)\s+goatdna\b", re.MULTILINE)


def remote_code(text: str) -> str:
    """A goatdna/hf source as folder code: ``from goatdna.model.x`` becomes ``from .x``.

    The model package already uses relative imports, so its files ship unchanged; anything else
    that still imports goatdna would break ``trust_remote_code`` and is a bug here.
    """
    text = text.replace("from goatdna.model.", "from .")
    if _GOATDNA_IMPORT.search(text):
        raise RuntimeError("exported code still imports goatdna; keep hf/ on goatdna.model only")
    return text


def _string_keys(value: object) -> object:
    """Every mapping key as a string, at any depth (a run config may key by number); its
    non-finite floats are left to `goatdna.formats.json_text`, which writes them null."""
    if isinstance(value, dict):
        return {str(k): _string_keys(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_string_keys(v) for v in value]
    return value


def classifier_fields(task: SequenceTaskModel) -> dict[str, Any]:
    """config.json fields of `GoatDNAForSequenceClassification` for a fine-tuned model: its
    `SequenceTaskConfig`, every field of it (classes as id2label, the layer and pooling a
    probe sweep chose, strand averaging, the length kept, label scaling): a choice left out
    would make the folder compute something else than `goatdna predict`."""
    head = task.task_config
    classes = list(head.classes) if head.classification else ["value"]
    return {
        "architectures": ["GoatDNAForSequenceClassification"],
        "problem_type": "single_label_classification" if head.classification else "regression",
        "id2label": dict(enumerate(classes)),
        "label2id": {name: i for i, name in enumerate(classes)},
        "classifier_pool": head.pool,
        "classifier_dropout": head.dropout,
        "classifier_rc_average": head.rc_average,
        "classifier_layer": head.layer,
        "classifier_max_length": head.max_length,
        "regression_label_mean": head.label_mean,
        "regression_label_std": head.label_std,
    }


def config_json(
    model_config: ModelConfig,
    run_config: dict[str, Any],
    provenance: dict[str, Any],
    task: SequenceTaskModel | None = None,
) -> dict:
    """The config.json mapping: model fields first, then what transformers and goatdna need
    (with ``task``, a fine-tuned model's: `classifier_fields`)."""
    fields = dataclasses.asdict(model_config)
    return {
        "model_type": MODEL_TYPE,
        "architectures": ["GoatDNAForCausalLM"],
        "auto_map": dict(AUTO_MAP),
        **(classifier_fields(task) if task is not None else {}),
        **fields,
        "tie_word_embeddings": False,
        "dtype": "float32",
        "use_cache": True,
        # the tokenizer's <pad>: with it transformers' generate warns of right-padded batches
        # (a decoder-only model continues a right-padded row after its pads, not its bases)
        "pad_token_id": PAD_ID,
        "goatdna_version": __version__,
        "goatdna_provenance": _string_keys(provenance),
        "goatdna_run_config": _string_keys({**run_config, "model": fields}),
    }


@dataclasses.dataclass(frozen=True)
class AdapterExport:
    """An adapter fine-tune exported unmerged: peft's config and the adapter weights under the
    fine-tuned model's names (``"model." + <peft name>``, as `SequenceTaskModel` holds them)."""

    peft_config: Any
    weights: dict[str, Tensor]


def _write_adapter(folder: Path, base_folder: Path, adapter: AdapterExport, base_name: str) -> None:
    """peft's adapter folder for the classifier in ``base_folder``, written by peft itself: the
    classifier loaded, `get_peft_model` on it, the trained adapter weights set, `save_pretrained`;
    then ``auto_mapping`` set to `ADAPTER_AUTO_MAPPING` (the folder's code, not goatdna's)."""
    import copy

    from peft import get_peft_model

    from .modeling_goatdna import GoatDNAForSequenceClassification

    model = GoatDNAForSequenceClassification.from_pretrained(str(base_folder))
    peft_model = get_peft_model(model, copy.deepcopy(adapter.peft_config))
    trained = {n for n, p in model.named_parameters() if p.requires_grad and n.startswith("model.")}
    result = model.load_state_dict(adapter.weights, strict=False)
    if result.unexpected_keys or trained & set(result.missing_keys):
        raise RuntimeError(f"adapter weights do not fit the exported classifier: {result}")
    peft_model.peft_config["default"].base_model_name_or_path = base_name
    # peft's model card names the base from these (else the temporary folder it was read from)
    model.name_or_path = model.config.name_or_path = base_name
    peft_model.save_pretrained(str(folder), save_embedding_layers=False)
    config_path = folder / "adapter_config.json"
    config = json.loads(config_path.read_text())
    config["auto_mapping"] = dict(ADAPTER_AUTO_MAPPING)
    for key in ("target_modules", "feedforward_modules"):  # peft's sets, in hash order
        if isinstance(config.get(key), list):
            config[key] = sorted(config[key])
    _write_json(config_path, config)


UNMERGED_README = """# goatdna adapter fine-tune (unmerged)

`base/` is the pretrained backbone with the fine-tuned sequence head; `adapter/` is the peft
adapter trained on it. Load both:

```python
from peft import PeftModel
from transformers import AutoModelForSequenceClassification

base = AutoModelForSequenceClassification.from_pretrained("base", trust_remote_code=True)
model = PeftModel.from_pretrained(base, "adapter").eval()
```

or, from this folder (`adapter/adapter_config.json` names its base as `base`):

```python
from peft import AutoPeftModel

model = AutoPeftModel.from_pretrained("adapter", trust_remote_code=True).eval()
```

`goatdna export --merge` (the default) writes one folder with the adapter merged instead.
"""


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json_text(data))


def _save_weights(state: dict[str, Tensor], path: Path) -> None:
    """safetensors' writer; its I/O failures (a full disk, a read-only folder) become one line
    in `goatdna.atomic.write_error`, which `atomic_dir` applies to everything written here."""
    from safetensors.torch import save_file

    save_file(state, str(path), metadata={"format": "pt"})


def export_state(model: DNADecoder, task: SequenceTaskModel | None) -> dict[str, Tensor]:
    """What model.safetensors holds: the decoder's tensors under ``"model."``; for a fine-tuned
    model also its sequence head under ``"head."``, and not the next-base head (`LM_HEAD_KEY`),
    which fine-tuning never trains and the classifier never reads."""
    state = {
        WEIGHT_PREFIX + k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()
    }
    if task is not None:
        state.pop(LM_HEAD_KEY, None)
        state.update(
            {
                "head." + k: v.detach().to("cpu").contiguous()
                for k, v in task.head.state_dict().items()
            }
        )
    return state


def export_params(model: DNADecoder, task: SequenceTaskModel | None) -> int:
    """Parameters of the exported model: the language model's, or the classifier's (the trunk
    and the sequence head, without the next-base head it does not store)."""
    if task is None:
        return model.num_params()
    lm_head = model.head.weight.numel() if model.head is not None else 0
    return model.num_params() - lm_head + sum(p.numel() for p in task.head.parameters())


def _write_folder(
    folder: Path,
    model: DNADecoder,
    run_config: dict[str, Any],
    provenance: dict[str, Any],
    task: SequenceTaskModel | None,
) -> None:
    from goatdna import model as model_package
    from goatdna.model.scoring import IGNORE_TARGET

    from .tokenization_goatdna import PAD, VOCAB

    config = config_json(model.config, run_config, provenance, task)
    _write_json(folder / CONFIG_FILE, config)
    _save_weights(export_state(model, task), folder / WEIGHTS_FILE)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(folder / WEIGHTS_FILE, 0o666 & ~umask)  # safetensors writes 0600; share like the rest
    _write_json(
        folder / "generation_config.json",
        {
            "suppress_tokens": [IGNORE_TARGET],
            "use_cache": True,
            "pad_token_id": PAD_ID,
            "_from_model_config": False,
        },
    )
    _write_json(
        folder / "tokenizer_config.json",
        {
            "tokenizer_class": "GoatDNATokenizer",
            "auto_map": TOKENIZER_AUTO_MAP,
            "model_max_length": 1 << 40,
            "clean_up_tokenization_spaces": False,
            "pad_token": PAD,
        },
    )
    _write_json(folder / "vocab.json", dict(VOCAB))
    model_dir = Path(model_package.__file__).parent
    for name in MODEL_SOURCES:
        shutil.copyfile(model_dir / name, folder / name)
    hf_dir = Path(__file__).parent
    for name in HF_SOURCES:
        (folder / name).write_text(remote_code((hf_dir / name).read_text()))
    (folder / "README.md").write_text(model_card(config, export_params(model, task)))


def is_export_folder(path: Path) -> bool:
    """A goatdna export (or an unmerged adapter export, whose ``base/`` is one)."""
    if (path / NO_MERGE_DIRS[0] / CONFIG_FILE).is_file() and (path / NO_MERGE_DIRS[1]).is_dir():
        path = path / NO_MERGE_DIRS[0]
    config = path / CONFIG_FILE
    try:
        return json.loads(config.read_text()).get("model_type") == MODEL_TYPE
    except (OSError, ValueError, AttributeError):
        return False


EXPORT_FILES = frozenset(
    {
        CONFIG_FILE,
        WEIGHTS_FILE,
        "generation_config.json",
        "tokenizer_config.json",
        "vocab.json",
        "README.md",
        *MODEL_SOURCES,
        *HF_SOURCES,
    }
)
"""What an export writes at the top of its folder; anything else there is the user's."""


def foreign_files(folder: Path, written: Path | None = None) -> list[Path]:
    """Files under an earlier export ``folder`` that goatdna did not write (a user's notes,
    evaluation results): neither an export file nor one the new export ``written`` holds.
    ``__pycache__`` is derived from the exported code, so it is not the user's either."""
    fresh = {p.name for p in written.iterdir()} if written is not None else set()
    found = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if path.is_dir() or "__pycache__" in relative.parts:
            continue
        if len(relative.parts) == 1 and (path.name in EXPORT_FILES or path.name in fresh):
            continue
        if relative.parts[0] in NO_MERGE_DIRS and relative.parts[0] in fresh:
            continue  # an unmerged export's own folders, written anew
        found.append(path)
    return found


def _carry_over(old: Path, new: Path, files: list[Path]) -> None:
    """Put ``files`` (the user's files in the earlier export ``old``) into ``new`` at the same
    relative paths. Hard links where the filesystem allows (the originals stay in ``old`` until
    the swap has succeeded, so a failed export loses nothing), else copies."""
    for path in files:
        target = new / path.relative_to(old)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target, follow_symlinks=False)
        except OSError:
            shutil.copy2(path, target, follow_symlinks=False)


def export_model(
    model: DNADecoder,
    run_config: dict[str, Any],
    provenance: dict[str, Any],
    out: str | Path,
    *,
    force: bool = False,
    task: SequenceTaskModel | None = None,
    adapter: AdapterExport | None = None,
) -> Path:
    """Write ``model`` (a `DNADecoder`) and its provenance as an export folder at ``out``;
    with ``task`` (a fine-tuned `SequenceTaskModel` around ``model``), a folder that loads as
    ``AutoModelForSequenceClassification`` and predicts what `goatdna predict` does.

    An existing ``out`` is replaced only with ``force`` and only when it holds an earlier export
    (never an unrelated directory); files in it that goatdna did not write are kept (carried
    into the new folder) and named on stderr, as ``goatdna train --force`` does. Nothing appears
    at ``out`` until the folder is complete.

    With ``adapter`` (``model`` then being the pretrained backbone and ``task`` the fine-tuned
    head around it), the unmerged layout: ``out/base`` and peft's ``out/adapter``.
    """
    out = Path(out)
    replacing = False
    if out.exists():
        if not out.is_dir():
            raise GoatDNAError(f"{out}: exists and is not a folder; choose another --out")
        if any(out.iterdir()):
            if not force:
                raise GoatDNAError(
                    f"{out}: folder exists and is not empty; choose another --out "
                    "(or pass --force to replace an earlier export)"
                )
            if not is_export_folder(out):
                raise GoatDNAError(
                    f"{out}: --force replaces only an earlier goatdna export, and this folder "
                    "is not one; choose another --out"
                )
            replacing = True
    held = export_state(model, task).values()
    check_free_space(out, sum(t.numel() * t.element_size() for t in held), "the export")
    kept: list[Path] = []
    with atomic_dir(out, then="rerun the export") as folder:
        if adapter is None:
            _write_folder(folder, model, run_config, provenance, task)
        else:
            base = folder / NO_MERGE_DIRS[0]
            base.mkdir()
            _write_folder(base, model, run_config, provenance, task)
            # the base by its place beside the adapter (from the export folder), not an
            # absolute path that breaks once the folder is moved or shared
            _write_adapter(folder / NO_MERGE_DIRS[1], base, adapter, NO_MERGE_DIRS[0])
            (folder / "README.md").write_text(UNMERGED_README)
        if replacing:
            kept = foreign_files(out, folder)
            _carry_over(out, folder, kept)
    if kept:
        shown = ", ".join(str(p.relative_to(out)) for p in kept[:5])
        more = f" and {len(kept) - 5} more" if len(kept) > 5 else ""
        print(f"note: --force kept {len(kept)} file(s) goatdna did not write: {shown}{more}",
              file=sys.stderr)  # fmt: skip
    return out


@dataclasses.dataclass(frozen=True)
class Exported:
    """What `export_checkpoint` wrote: the folder, and the parameters it holds (a fine-tuned
    model's trunk and head, no next-base head: `export_params`)."""

    folder: Path
    params: int


def export_checkpoint(
    checkpoint: Path, out: Path, *, force: bool = False, merge: bool = True
) -> Exported:
    """``goatdna export``: the model in ``checkpoint`` (a `goatdna train` or `goatdna finetune`
    .ckpt, or an earlier export folder) as an export folder at ``out`` (`export_model`).

    A fine-tuned checkpoint exports with its head (predicting what `goatdna predict` does); a
    LoRA/IA3 one with its adapters merged, or, without ``merge``, as the unmerged layout: the
    head on the bare backbone, the adapters beside it. Each file is read once
    (`goatdna.checkpoint.read_checkpoint`) and passed to every loader.
    """
    from goatdna.checkpoint import (
        adapter_weights,
        checkpoint_provenance,
        find_backbone,
        load_checkpoint,
        load_task_model,
        read_checkpoint,
    )
    from goatdna.workdir import claim_output_folder, output_lock

    check_output_dir(out, "--out")  # a folder we can write, before any work
    # the current folder, an export read and replaced in one go, a folder holding the checkpoint:
    # refused. Whether an existing --out may be replaced is export_model's rule (an empty folder
    # may be used, an earlier export with --force), which carries the files goatdna did not
    # write into the new folder instead of deleting them: every entry may stay, hence owns.
    claim_output_folder(out, True, owns=lambda _entry: True, what="export", inputs=[checkpoint])
    with output_lock(out, True):  # one export per --out
        file = read_checkpoint(checkpoint)  # read once, passed to every loader below
        spec = file.adapters
        if not merge and spec is None:
            raise GoatDNAError(
                f"--no-merge: {checkpoint} has no adapters (it is not a `goatdna finetune "
                "--mode lora/ia3` checkpoint); drop the option"
            )
        backbone = read_checkpoint(find_backbone(spec, checkpoint)) if spec is not None else None
        task = None
        adapter = None
        if file.head is None:
            loaded = load_checkpoint(file, device="cpu")
            model, run_config = loaded.model, loaded.run_config
        else:  # the head too: predicts what `predict` does
            bare = None  # --no-merge: the head on the bare backbone, the adapters beside it
            if not merge and backbone is not None:
                bare = load_checkpoint(backbone, device="cpu").model
            fine_tuned = load_task_model(file, backbone=backbone, decoder=bare)
            task, run_config = fine_tuned.classifier, fine_tuned.config
            model = task.model
            if bare is not None and spec is not None:
                adapter = AdapterExport(spec.peft_config(), adapter_weights(file))
        provenance = checkpoint_provenance(file)
        folder = export_model(
            model, dict(run_config), provenance, out, force=force, task=task, adapter=adapter
        )
    return Exported(folder, export_params(model, task))
