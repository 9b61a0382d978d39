"""`goatdna export`: a checkpoint as a self-contained Hugging Face model folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from goatdna.cli.common import option
from goatdna.errors import GoatDNAError


def export(
    checkpoint: Annotated[
        Path,
        option(
            "checkpoint",
            "A .ckpt written by `goatdna train` or `goatdna finetune` (or an earlier export "
            "folder). A fine-tuned model becomes an AutoModelForSequenceClassification folder.",
        ),
    ],
    out: Annotated[Path, option("out", "Folder to write (must not exist yet).")],
    force: Annotated[
        bool, option("force", "Replace --out when it holds an earlier goatdna export.")
    ] = False,
    merge: Annotated[
        bool,
        typer.Option(
            "--merge/--no-merge",
            help="A LoRA/IA3 fine-tune: one folder with the adapters merged into the weights, or "
            "(--no-merge) OUT/base (backbone + head) and OUT/adapter, a peft adapter folder "
            "that PeftModel.from_pretrained loads.",
        ),
    ] = True,
) -> None:
    """Write config.json, model.safetensors, tokenizer, transformers code and a model card."""
    try:
        from goatdna.hf.export import export_checkpoint
    except ImportError:
        raise GoatDNAError(
            "goatdna export needs transformers and safetensors: pip install 'goatdna[hf]'"
        ) from None

    exported = export_checkpoint(checkpoint, out, force=force, merge=merge)
    typer.echo(f"exported {exported.params:,} parameters to {exported.folder}", err=True)
