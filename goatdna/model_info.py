"""What `goatdna model-info` describes: a model's parameters by component, d_c/d_p per head and
training FLOPs per token, from a YAML config's ``model:`` section or the model config a
checkpoint records (a ``.ckpt``, read with its tensors mapped, not loaded; or an export folder).

The model is built on the meta device: shapes only, no memory and no initialisation cost."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich loads when the table is made, not for `goatdna --help`
    from rich.table import Table

    from goatdna.model import ModelConfig

WHAT_TO_PASS = (
    "pass a YAML config with a `model:` section (e.g. configs/goat-tiny.yaml) or a checkpoint "
    "(a .ckpt or a `goatdna export` folder)"
)
ZIP_MAGIC = b"PK\x03\x04"
"""How torch's checkpoint files (zip archives) start: such a file is read as a checkpoint."""


@dataclass(frozen=True)
class ModelInfoRequest:
    """``config``: a YAML config or a checkpoint; ``seq_len``: the context length of the FLOPs
    term (None: the model's training length)."""

    config: Path
    seq_len: int | None = None


@dataclass(frozen=True)
class ModelInfo:
    """The described model: its config, parameters per component and in all, and the lines
    that say its shape, its per-head split and its FLOPs per token."""

    source: Path
    config: ModelConfig
    breakdown: dict[str, int]
    total: int
    lines: list[str]

    def table(self) -> Table:
        """Parameters by component, with each one's share of the total."""
        from rich.table import Table

        table = Table(title=f"{self.source} ({self.config.positional})")
        table.add_column("component")
        table.add_column("parameters", justify="right")
        table.add_column("share", justify="right")
        for name, count in self.breakdown.items():
            table.add_row(name, f"{count:,}", f"{100 * count / self.total:.2f}%")
        table.add_row("total", f"{self.total:,}", "100.00%", style="bold")
        return table


def describe_model(request: ModelInfoRequest) -> ModelInfo:
    """Read the model config ``request.config`` holds and describe the model it builds."""
    import torch

    from goatdna.configfile import from_dict
    from goatdna.errors import GoatDNAError
    from goatdna.model import DNADecoder, ModelConfig, flops_per_token

    section = model_section(request.config)
    seq_len = request.seq_len
    if seq_len is not None and seq_len < 1:
        raise GoatDNAError(
            f"--seq-len must be >= 1, got {seq_len} (omit it for model.train_length)"
        )
    c = from_dict(ModelConfig, section, "model")
    length = seq_len if seq_len is not None else c.train_length
    with torch.device("meta"):  # shapes only: no memory, no init cost
        model = DNADecoder(c)
    breakdown = model.param_breakdown()
    total = model.num_params()
    lines = [
        f"layers {c.n_layers}, d_model {c.d_model}, heads {c.n_heads}"
        f"{'' if c.kv_heads == c.n_heads else f' ({c.kv_heads} key/value)'}, head dim d_h "
        f"{c.head_dim}, {'GELU' if c.block_style == 'gpt2' else 'SwiGLU'} hidden {c.mlp_hidden}, "
        f"train length {c.train_length}"
    ]
    if c.positional == "goat":
        slots = "key bias + alignment" if c.goat_alignment_slot else "key bias"
        lines.append(
            f"per head: d_c = {c.content_dim} content dims, d_p = {c.position_dim} position dims "
            f"(2 x {c.goat_modes} modes + {slots}), d_h = {c.head_dim}"
        )
    elif c.positional == "alibi":
        lines.append(
            f"per head: d_c = {c.content_dim} content dims, d_p = 2 position dims (ALiBi's fixed "
            f"slope term, hi + lo), d_h = {c.head_dim}"
        )
    else:
        what = "RoPE rotates all" if c.positional == "rope" else "NoPE: no positional signal"
        lines.append(f"per head: d_c = {c.content_dim} ({what}), d_p = 0")
    flops = flops_per_token(c, length)
    lines.append(
        f"training FLOPs per token at T = {length}: {flops:.4g} "
        f"(6N + 12 n_layers d_model T; N = {total - breakdown['embedding']:,} without the embedding)"
        if not c.tie_embeddings
        else f"training FLOPs per token at T = {length}: {flops:.4g} (6N + 12 n_layers d_model T)"
    )
    return ModelInfo(request.config, c, breakdown, total, lines)


def model_section(path: Path) -> dict[str, object]:
    """The ``model`` mapping to describe: a YAML config's ``model:`` section, or a checkpoint's
    recorded model config (a folder, or a file that is a zip archive as torch writes them)."""
    from goatdna.checkpoint import read_checkpoint
    from goatdna.configfile import load_yaml
    from goatdna.errors import GoatDNAError

    if not path.exists():
        raise GoatDNAError(f"{path}: no such file or folder; {WHAT_TO_PASS}")
    if path.is_dir():
        return read_checkpoint(path).model_fields
    with path.open("rb") as fh:
        start = fh.read(len(ZIP_MAGIC))
    if start == ZIP_MAGIC:
        return read_checkpoint(path, mmap=True).model_fields
    section = load_yaml(path).get("model")
    if not isinstance(section, dict):
        raise GoatDNAError(f"{path}: no `model:` section; add one (see configs/goat-tiny.yaml)")
    return section
