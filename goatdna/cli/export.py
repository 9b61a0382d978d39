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
    from goatdna.adapters import adapter_spec
    from goatdna.checkpoint import checkpoint_provenance, load_checkpoint, task_head

    try:
        from goatdna.hf.export import export_model, export_params
    except ImportError:
        raise GoatDNAError(
            "goatdna export needs transformers and safetensors: pip install 'goatdna[hf]'"
        ) from None

    from goatdna.atomic import check_output_dir
    from goatdna.workdir import claim_output, output_lock

    check_output_dir(out, "--out")  # a folder we can write, before any work
    # an export read and replaced in one go is refused; whether an existing --out may be
    # replaced is export_model's rule (an empty folder may be used, an earlier export --force)
    claim_output([out], True, inputs=[checkpoint])
    with output_lock(out, True):  # one export per --out
        loaded = load_checkpoint(checkpoint, device="cpu")
        spec = adapter_spec(loaded.run_config, checkpoint) if loaded.kind == "finetuned" else None
        if not merge and spec is None:
            raise GoatDNAError(
                f"--no-merge: {checkpoint} has no adapters (it is not a `goatdna finetune "
                "--mode lora/ia3` checkpoint); drop the option"
            )
        model = loaded.model
        task = None
        if task_head(loaded.run_config) is not None:  # the head too: predicts what `predict` does
            from goatdna.checkpoint import load_task_model

            task = load_task_model(checkpoint).classifier
            model = task.model
        adapter = None
        if not merge and spec is not None and task is not None:
            from goatdna.checkpoint import adapter_weights, find_backbone
            from goatdna.hf.export import AdapterExport
            from goatdna.model.classifier import SequenceTaskModel

            model = load_checkpoint(find_backbone(spec, checkpoint), device="cpu").model
            head = task.head
            task = SequenceTaskModel(model, task.task_config)
            task.head.load_state_dict(head.state_dict())
            adapter = AdapterExport(spec.peft_config(), adapter_weights(checkpoint))
        provenance = checkpoint_provenance(checkpoint)
        folder = export_model(
            model, dict(loaded.run_config), provenance, out, force=force, task=task,
            adapter=adapter,
        )  # fmt: skip
    # the classifier's count for a fine-tuned model (trunk and head, no next-base head)
    typer.echo(f"exported {export_params(model, task):,} parameters to {folder}", err=True)
