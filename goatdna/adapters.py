"""Parameter-efficient fine-tuning through Hugging Face ``peft``: LoRA and IA3 on a DNADecoder.

A shared piece beside `checkpoint`: fine-tuning attaches adapters here, and `checkpoint` (the one
loader of trained models) rebuilds and merges them here, so both read one description of an
adapter (`AdapterSpec`) and one list of targets. peft's own tuners do the work (`LoraModel`,
`IA3Model`, injected in place into goatdna's decoder, which stays a `DNADecoder` with the same
module names); nothing here is a hand-written adapter.

An adapter fine-tune's checkpoint holds only what was trained: the adapter weights under their
peft names (``"model.blocks.0.attn.q_proj.lora_A.default.weight"``), the sequence head, and the
run config's ``adapter`` section (`AdapterSpec.to_dict`) naming the backbone checkpoint by path
(relative to the run folder, and absolute) and sha256. peft is an optional dependency (``pip install 'goatdna[lora]'``):
importing this module never imports it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goatdna.configfile import comma_list
from goatdna.errors import GoatDNAError

if TYPE_CHECKING:
    from peft import PeftConfig
    from torch import nn

    from goatdna.model import DNADecoder

ADAPTER_MODES = ("lora", "ia3")
"""`goatdna finetune --mode` values that train peft adapters (the backbone's own weights frozen)."""

ADAPTER_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""Default ``--lora-targets``: every attention and MLP projection of a `DNADecoder` block, by the
module names peft matches (a suffix of ``blocks.N.attn.q_proj`` ...), the names transformers'
Llama uses, so peft's defaults and users' habits carry over. The one list to change if the
blocks' layout changes."""

IA3_FEEDFORWARD = ("down_proj",)
"""Targets IA3 scales at their input rather than their output (peft's ``feedforward_modules``),
as peft's defaults for Llama do for ``down_proj``."""

LORA_RANK, LORA_ALPHA, LORA_DROPOUT = 8, 8, 0.0
"""peft's `LoraConfig` defaults (``r``, ``lora_alpha``, ``lora_dropout``), the options' defaults."""

ADAPTER_SECTION = "adapter"
"""The run config's key holding `AdapterSpec.to_dict` (absent: not an adapter fine-tune)."""

PEFT_HINT = "pip install 'goatdna[lora]'"


def require_peft() -> None:
    """One line when peft is missing, instead of an ImportError traceback."""
    try:
        import peft  # noqa: F401
    except ImportError:
        raise GoatDNAError(
            f"adapter fine-tuning (--mode lora/ia3) needs the peft library: {PEFT_HINT}"
        ) from None


@dataclasses.dataclass(frozen=True)
class AdapterSpec:
    """What adapters a fine-tune trained and on which backbone (the run config's ``adapter``).

    ``backbone`` is the absolute path of the backbone checkpoint (a ``.ckpt`` or export folder),
    ``backbone_relative`` the same path relative to the run folder (empty in runs written before
    it was recorded), so a run moved together with its backbone still finds it; and
    ``backbone_sha256`` the digest of its weights (`backbone_sha256`): loading refuses any other
    backbone, since adapters are deltas that mean nothing on different weights.
    """

    mode: str
    targets: tuple[str, ...] = ADAPTER_TARGETS
    rank: int = LORA_RANK
    alpha: int = LORA_ALPHA
    dropout: float = LORA_DROPOUT
    backbone: str = ""
    backbone_sha256: str = ""
    backbone_relative: str = ""

    def __post_init__(self) -> None:
        if self.mode not in ADAPTER_MODES:
            raise ValueError(f"adapter mode {self.mode!r}: use one of {', '.join(ADAPTER_MODES)}")
        if not self.targets:
            raise ValueError("lora_targets must name at least one module")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "targets": list(self.targets)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: Path) -> AdapterSpec:
        try:
            return cls(**{**data, "targets": tuple(data["targets"])})
        except (KeyError, TypeError, ValueError) as err:
            raise GoatDNAError(
                f"{source}: its '{ADAPTER_SECTION}' section is not one this goatdna reads "
                f"({err}); fine-tune it again"
            ) from None

    def backbone_paths(self, source: Path) -> list[Path]:
        """Where the backbone may be, in the order to try: relative to the run folder of
        ``source`` (a checkpoint in ``RUN/checkpoints/``), then the recorded absolute path."""
        paths = []
        if self.backbone_relative and source.parent.name == "checkpoints":
            paths.append(source.parent.parent / self.backbone_relative)
        if self.backbone:
            paths.append(Path(self.backbone))
        return paths

    def peft_config(self) -> PeftConfig:
        """peft's config for these adapters (LoRA: rank, alpha, dropout; IA3: the targets)."""
        require_peft()
        from peft import IA3Config, LoraConfig

        targets = list(self.targets)
        if self.mode == "lora":
            return LoraConfig(
                r=self.rank,
                lora_alpha=self.alpha,
                lora_dropout=self.dropout,
                target_modules=targets,
            )
        return IA3Config(
            target_modules=targets,
            feedforward_modules=[t for t in targets if t in IA3_FEEDFORWARD],
        )


def attach(decoder: DNADecoder, spec: AdapterSpec) -> DNADecoder:
    """Inject ``spec``'s adapters into ``decoder`` in place (peft's tuner), freezing everything
    else in it; returns the same decoder. A target that names no module is one line."""
    config = spec.peft_config()
    from peft.tuners.ia3 import IA3Model
    from peft.tuners.lora import LoraModel

    tuner = LoraModel if spec.mode == "lora" else IA3Model
    check_adapters(decoder, spec)
    tuner(decoder, config, "default")
    return decoder


def check_adapters(decoder: nn.Module, spec: AdapterSpec) -> None:
    """Refuse, in one line, adapters that cannot go on ``decoder``: a target that names none of
    its Linear layers, or (LoRA) a rank above the narrower side of a targeted layer, where the
    "low-rank" update is no longer low rank and its two factors only cost memory (a rank of a
    million is an out-of-memory crash). `goatdna finetune` calls it before it writes anything
    into the run folder, so that a corrected command needs no ``--force``; `attach` again."""
    from torch import nn

    layers = [(n, m) for n, m in decoder.named_modules() if isinstance(m, nn.Linear)]
    missing = [t for t in spec.targets if not any(_is_named(n, t) for n, _ in layers)]
    if missing:
        raise GoatDNAError(
            f"--lora-targets {','.join(spec.targets)}: no module of the decoder is named "
            f"{', '.join(missing)}; choose among {', '.join(linear_names(decoder))}"
        )
    if spec.mode != "lora":
        return
    targeted = [(n, m) for n, m in layers if any(_is_named(n, t) for t in spec.targets)]
    name, narrowest = min(targeted, key=lambda item: min(item[1].in_features, item[1].out_features))
    width = min(narrowest.in_features, narrowest.out_features)
    if spec.rank > width:
        raise GoatDNAError(
            f"--lora-rank {spec.rank}: above the width {width} of the targeted layers (a rank is "
            f"at most {width}: {name.rpartition('.')[2]} is {narrowest.in_features} x "
            f"{narrowest.out_features}); lower --lora-rank to {width} or less"
        )


def merged(decoder: DNADecoder) -> DNADecoder:
    """``decoder`` with its adapters folded into the base weights and removed (peft's
    ``merge_and_unload``): a plain `DNADecoder` whose state dict is a pretrained one's."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    for name, module in list(decoder.named_modules()):
        if isinstance(module, BaseTunerLayer):
            module.merge()
            parent_name, _, child = name.rpartition(".")
            parent = decoder.get_submodule(parent_name) if parent_name else decoder
            setattr(parent, child, module.get_base_layer())
    return decoder


def linear_names(decoder: nn.Module) -> list[str]:
    """The distinct last names of the decoder's Linear layers (what ``--lora-targets`` takes)."""
    from torch import nn

    return sorted(
        {n.rpartition(".")[2] for n, m in decoder.named_modules() if isinstance(m, nn.Linear)}
    )


def _is_named(name: str, target: str) -> bool:
    """Whether module ``name`` is what a ``--lora-targets`` entry picks (peft's rule for a list
    of targets: the whole name, or its last dotted parts)."""
    return name == target or name.endswith("." + target)


def adapter_spec(run_config: Mapping[str, Any], source: Path) -> AdapterSpec | None:
    """The run config's `AdapterSpec` (None: no adapters, a probe or full fine-tune)."""
    section = run_config.get(ADAPTER_SECTION)
    if not isinstance(section, Mapping):
        return None
    return AdapterSpec.from_dict(section, source)


def split_targets(text: str | Sequence[str]) -> tuple[str, ...]:
    """``--lora-targets q_proj,v_proj`` (or a YAML list) as a tuple of module names."""
    return tuple(comma_list(text))


def file_sha256(path: str | Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


BACKBONE_FILES = ("config.json", "model.safetensors")
"""An export folder's files that make the model goatdna loads from it (`read_checkpoint`):
config.json (every `ModelConfig` field: the same weights under another positional scheme or
training length are another model) and model.safetensors (the weights). Its other files do not
change what loads: the model card (README.md), the tokenizer files (goatdna encodes with its own
token table) and the transformers code copies (goatdna runs its own)."""


def backbone_sha256(path: str | Path) -> str:
    """The digest that identifies a backbone, wherever it lies: a ``.ckpt`` file's sha256, or
    for an export folder the sha256 over `BACKBONE_FILES` in sorted order, each as its name, a
    NUL byte and its own sha256 (so moving or copying the folder keeps the digest, and a file
    renamed or edited changes it). fine-tuning records it (``inputs.backbone_sha256``, and an
    adapter run's ``adapter.backbone_sha256``) and `--resume` and loading compare it."""
    path = Path(path)
    if not path.is_dir():
        return file_sha256(path)
    digest = hashlib.sha256()
    for name in sorted(BACKBONE_FILES):
        digest.update(name.encode() + b"\0" + bytes.fromhex(file_sha256(path / name)))
    return digest.hexdigest()
