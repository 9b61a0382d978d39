"""`goatdna model-info CONFIG`: parameters by component, d_c/d_p per head, training FLOPs/token.

CONFIG is a YAML config with a ``model:`` section or a checkpoint (a ``.ckpt``, read with its
tensors mapped, not loaded; or a `goatdna export` folder), whose recorded model config is
described the same way."""

from __future__ import annotations

from pathlib import Path

import typer


def model_info(
    config: Path = typer.Argument(
        ...,
        help="YAML config with a `model:` section, or a checkpoint (.ckpt or `goatdna export` "
        "folder) to describe the model it holds.",
    ),
    seq_len: int | None = typer.Option(
        None, "--seq-len", help="Context length for the FLOPs term (default: model.train_length)."
    ),
) -> None:
    """Print the model's parameters by component, GOAT's d_c/d_p per head and FLOPs per token."""
    import torch
    from rich.table import Table

    from goatdna.configfile import from_dict
    from goatdna.console import output_console
    from goatdna.errors import GoatDNAError
    from goatdna.model import DNADecoder, ModelConfig, flops_per_token

    section = _model_section(config)
    if seq_len is not None and seq_len < 1:
        raise GoatDNAError(
            f"--seq-len must be >= 1, got {seq_len} (omit it for model.train_length)"
        )
    model_config = from_dict(ModelConfig, section, "model")
    length = seq_len if seq_len is not None else model_config.train_length

    with torch.device("meta"):  # shapes only: no memory, no init cost
        model = DNADecoder(model_config)
    breakdown = model.param_breakdown()
    total = model.num_params()

    console = output_console()
    table = Table(title=f"{config} ({model_config.positional})")
    table.add_column("component")
    table.add_column("parameters", justify="right")
    table.add_column("share", justify="right")
    for name, count in breakdown.items():
        table.add_row(name, f"{count:,}", f"{100 * count / total:.2f}%")
    table.add_row("total", f"{total:,}", "100.00%", style="bold")
    console.print(table)

    c = model_config
    console.print(
        f"layers {c.n_layers}, d_model {c.d_model}, heads {c.n_heads}"
        f"{'' if c.kv_heads == c.n_heads else f' ({c.kv_heads} key/value)'}, head dim d_h "
        f"{c.head_dim}, {'GELU' if c.block_style == 'gpt2' else 'SwiGLU'} hidden {c.mlp_hidden}, "
        f"train length {c.train_length}"
    )
    if c.positional == "goat":
        slots = "key bias + alignment" if c.goat_alignment_slot else "key bias"
        console.print(
            f"per head: d_c = {c.content_dim} content dims, d_p = {c.position_dim} position dims "
            f"(2 x {c.goat_modes} modes + {slots}), d_h = {c.head_dim}"
        )
    elif c.positional == "alibi":
        console.print(
            f"per head: d_c = {c.content_dim} content dims, d_p = 2 position dims (ALiBi's fixed "
            f"slope term, hi + lo), d_h = {c.head_dim}"
        )
    else:
        what = "RoPE rotates all" if c.positional == "rope" else "NoPE: no positional signal"
        console.print(f"per head: d_c = {c.content_dim} ({what}), d_p = 0")
    flops = flops_per_token(c, length)
    console.print(
        f"training FLOPs per token at T = {length}: {flops:.4g} "
        f"(6N + 12 n_layers d_model T; N = {total - breakdown['embedding']:,} without the embedding)"
        if not c.tie_embeddings
        else f"training FLOPs per token at T = {length}: {flops:.4g} (6N + 12 n_layers d_model T)"
    )


WHAT_TO_PASS = (
    "pass a YAML config with a `model:` section (e.g. configs/goat-tiny.yaml) or a checkpoint "
    "(a .ckpt or a `goatdna export` folder)"
)
ZIP_MAGIC = b"PK\x03\x04"
"""How torch's checkpoint files (zip archives) start: such a file is read as a checkpoint."""


def _model_section(path: Path) -> dict[str, object]:
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
