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
    from goatdna.checkpoint import (
        adapter_weights,
        checkpoint_provenance,
        find_backbone,
        load_checkpoint,
        load_task_model,
        read_checkpoint,
    )

    try:
        from goatdna.hf.export import export_model, export_params
    except ImportError:
        raise GoatDNAError(
            "goatdna export needs transformers and safetensors: pip install 'goatdna[hf]'"
        ) from None

    from goatdna.atomic import check_output_dir
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
                from goatdna.hf.export import AdapterExport

                adapter = AdapterExport(spec.peft_config(), adapter_weights(file))
        provenance = checkpoint_provenance(file)
        folder = export_model(
            model, dict(run_config), provenance, out, force=force, task=task,
            adapter=adapter,
        )  # fmt: skip
    # the classifier's count for a fine-tuned model (trunk and head, no next-base head)
    typer.echo(f"exported {export_params(model, task):,} parameters to {folder}", err=True)
