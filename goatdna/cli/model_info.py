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
    from goatdna.console import output_console
    from goatdna.model_info import ModelInfoRequest, describe_model

    info = describe_model(ModelInfoRequest(config, seq_len))
    console = output_console()
    console.print(info.table())
    for line in info.lines:
        console.print(line)
