"""`goatdna attention`: one sequence's attention weights and their two GOAT terms, per head."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from goatdna.cli.common import (
    AcceleratorOpt,
    CacheDirOpt,
    CheckpointOpt,
    OneDeviceOpt,
    ThreadsOpt,
    option,
)

if TYPE_CHECKING:
    import numpy as np

SUFFIXES = (".npz", ".png")
MAX_FIGURE_BASES = 2048
"""An L x L map of more bases than this is no longer readable: ``.png`` is refused beyond it."""


def attention(
    checkpoint: CheckpointOpt,
    out: Annotated[
        list[Path],
        option(
            "out",
            "Output, repeatable; the suffix picks it: .npz (weights, content and prior "
            "(n_layers, H, L, L), per-head summaries and profiles by distance), .png (the figure: "
            "heads x distance profiles, the prior's share, one head's maps).",
        ),
    ],
    sequence: Annotated[
        str | None,
        typer.Option(
            "--sequence", help="The DNA to read (A C G T N), or use --fasta and --region."
        ),
    ] = None,
    fasta: Annotated[Path | None, option("fasta")] = None,
    region: Annotated[
        str | None,
        option(
            "region", "With --fasta: contig:start-end, 1-based inclusive, e.g. 20:1000001-1000256."
        ),
    ] = None,
    layer: Annotated[
        list[int] | None,
        typer.Option(
            "--layer",
            help="A block whose attention to show (0-based; repeatable; default: every block). "
            "Block k reads `goatdna embed --layer k`'s hidden states.",
        ),
    ] = None,
    head: Annotated[
        int,
        typer.Option("--head", help="The head whose maps the figure shows (of the first --layer)."),
    ] = 0,
    force: Annotated[bool, option("force", "Replace existing --out files.")] = False,
    accelerator: AcceleratorOpt = "cpu",
    devices: OneDeviceOpt = "1",
    threads: ThreadsOpt = None,
    cache_dir: CacheDirOpt = None,
) -> None:
    """Show which heads are positional and which content-driven: weights, content logits and prior."""
    from goatdna.atomic import check_output_file
    from goatdna.errors import GoatDNAError
    from goatdna.formats import output_format
    from goatdna.workdir import claim_output, output_lock

    if not out:
        raise GoatDNAError("--out: give at least one output (.npz or .png)")
    kinds = [output_format(path, SUFFIXES).kind for path in out]
    for path in out:
        check_output_file(path, "--out")
    with output_lock(out, True):  # one writer of each --out: a second run is refused
        claim_output(out, force, inputs=[checkpoint, fasta])
        _run(out, kinds, checkpoint, sequence, fasta, region, layer, head, accelerator, devices,
             threads, cache_dir)  # fmt: skip


def _run(
    out: list[Path],
    kinds: list[str],
    checkpoint: Path,
    sequence: str | None,
    fasta: Path | None,
    region: str | None,
    layer: list[int] | None,
    head: int,
    accelerator: str,
    devices: str,
    threads: int | None,
    cache_dir: Path | None,
) -> None:
    """Read the sequence, compute the maps, write ``out`` (under their locks) and print."""
    from goatdna.analysis.attention import (
        attention_maps,
        check_layers,
        check_size,
        summary_frame,
        write_npz,
    )
    from goatdna.analysis.generate import torch_threads
    from goatdna.checkpoint import load_checkpoint
    from goatdna.cli.common import print_frame
    from goatdna.console import output_console
    from goatdna.errors import GoatDNAError
    from goatdna.runtime import single_device

    device = single_device(accelerator, devices)
    tokens, label = _read_sequence(sequence, fasta, region, cache_dir)
    if len(tokens) < 2:
        raise GoatDNAError(f"{label}: {len(tokens)} base(s); attention needs at least 2")
    if "png" in kinds and len(tokens) > MAX_FIGURE_BASES:
        raise GoatDNAError(
            f"--out {out[kinds.index('png')]}: a map shows at most {MAX_FIGURE_BASES:,} bases and "
            f"{label} has {len(tokens):,}; read a shorter sequence or drop the .png"
        )
    loaded = load_checkpoint(checkpoint, device=device)
    model, config = loaded.model, loaded.model_config
    layers = check_layers(layer, model.n_layers)
    if not 0 <= head < config.n_heads:
        raise GoatDNAError(
            f"--head {head}: the model has {config.n_heads} heads, 0..{config.n_heads - 1}"
        )
    check_size(len(tokens), config.n_heads, len(layers), config.positional in ("goat", "alibi"),
               shorten="--sequence" if sequence is not None else "--region")  # fmt: skip
    with torch_threads(threads):
        maps = attention_maps(model, tokens, layers)

    console = output_console()
    for path, kind in zip(out, kinds, strict=True):
        if kind == "npz":
            write_npz(maps, path)
        else:
            from goatdna.analysis.attention_plots import plot_attention

            plot_attention(
                maps,
                path,
                head,
                f"Attention of {label} ({len(tokens):,} bases, {config.positional})",
            )
    print_frame(
        summary_frame(maps), f"{label}: {len(tokens):,} bases, {config.positional}", console=console
    )
    console.print(maps.note)
    if len(tokens) > loaded.train_length:
        console.print(
            f"note: {len(tokens):,} bases is beyond the training length {loaded.train_length:,} "
            "(extrapolation)"
        )
    for path in out:
        console.print(f"wrote {path}", markup=False)


def _read_sequence(
    sequence: str | None, fasta: Path | None, region: str | None, cache_dir: Path | None
) -> tuple[np.ndarray, str]:
    """The tokens to read and how to name them: ``--sequence`` itself, or ``--region`` of
    ``--fasta`` (through the inference reference reader)."""
    from goatdna.analysis.generate import parse_prompt
    from goatdna.errors import GoatDNAError
    from goatdna.inference.reference import Reference
    from goatdna.io.regions import parse_region

    if (sequence is None) == (fasta is None):
        raise GoatDNAError("give exactly one of --sequence or --fasta (with --region)")
    if sequence is not None:
        if region is not None:
            raise GoatDNAError("--region needs --fasta")
        return parse_prompt(sequence, "--sequence"), "--sequence"
    assert fasta is not None
    if region is None:
        raise GoatDNAError("--fasta needs --region contig:start-end (the bases to read)")
    where = parse_region(region)
    if not fasta.is_file():
        raise GoatDNAError(f"--fasta {fasta}: not found")
    with Reference(fasta, cache_dir) as reference:
        info = reference.contig(where.contig, where=f"--region {where.label}")
        if where.end > info.length:
            raise GoatDNAError(
                f"--region {where.label}: ends beyond contig {info.name!r} ({info.length:,} bases)"
            )
        return reference.read(info, where.start, where.end), where.label
