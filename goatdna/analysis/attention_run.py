"""Running `goatdna attention`: the sequence to read, the checks before any work, the maps and
their files (`goatdna.analysis.attention` computes them, `attention_plots` draws them).

The sequence is ``--sequence`` itself or ``--region`` of ``--fasta``; the FASTA is read by the
inference reference reader, which the caller passes as ``read_region`` (analysis does not
import its sibling `goatdna.inference`; `goatdna.inference.reference.read_region` is the one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from goatdna.analysis.attention import AttentionMaps
from goatdna.configfile import COUNT_OR_ZERO, bounded
from goatdna.errors import GoatDNAError

SUFFIXES = (".npz", ".png")
MAX_FIGURE_BASES = 2048
"""An L x L map of more bases than this is no longer readable: ``.png`` is refused beyond it."""

ReadRegion = Callable[[Path, str, "Path | None"], tuple[np.ndarray, str]]
"""``read_region(fasta, region, cache_dir)``: the tokens of ``region`` of ``fasta`` and its label."""


@dataclass(frozen=True)
class AttentionRequest:
    """Everything one `attention` run needs (the CLI's options)."""

    checkpoint: Path
    outs: tuple[Path, ...]
    sequence: str | None = None
    fasta: Path | None = None
    region: str | None = None
    layers: tuple[int, ...] | None = None  # None: every block
    head: int = bounded(0, COUNT_OR_ZERO)  # 0-based, below the model's heads (`attention`)
    force: bool = False
    accelerator: str = "cpu"
    devices: str = "1"
    threads: int | None = None
    cache_dir: Path | None = None


@dataclass
class AttentionResult:
    """What was read and computed; the files are written."""

    maps: AttentionMaps
    label: str
    bases: int
    positional: str
    train_length: int
    written: list[Path] = field(default_factory=list)


def attention(request: AttentionRequest, read_region: ReadRegion) -> AttentionResult:
    """Check the outputs, hold their locks, read the sequence, compute the maps and write them."""
    from goatdna.atomic import check_output_file
    from goatdna.formats import output_format
    from goatdna.workdir import claim_output, output_lock

    outs = list(request.outs)
    if not outs:
        raise GoatDNAError("--out: give at least one output (.npz or .png)")
    kinds = [output_format(path, SUFFIXES).kind for path in outs]
    for path in outs:
        check_output_file(path, "--out")
    with output_lock(outs, True):  # one writer of each --out: a second run is refused
        claim_output(outs, request.force, inputs=[request.checkpoint, request.fasta])
        return _run(request, kinds, read_region)


def _run(request: AttentionRequest, kinds: list[str], read_region: ReadRegion) -> AttentionResult:
    """Read the sequence, compute the maps, write the outputs (under their locks)."""
    from goatdna.analysis.attention import attention_maps, check_layers, check_size, write_npz
    from goatdna.analysis.generate import torch_threads
    from goatdna.checkpoint import load_checkpoint
    from goatdna.runtime import single_device

    device = single_device(request.accelerator, request.devices)
    tokens, label = read_sequence(request, read_region)
    if len(tokens) < 2:
        raise GoatDNAError(f"{label}: {len(tokens)} base(s); attention needs at least 2")
    if "png" in kinds and len(tokens) > MAX_FIGURE_BASES:
        raise GoatDNAError(
            f"--out {request.outs[kinds.index('png')]}: a map shows at most {MAX_FIGURE_BASES:,} "
            f"bases and {label} has {len(tokens):,}; read a shorter sequence or drop the .png"
        )
    loaded = load_checkpoint(request.checkpoint, device=device)
    model, config = loaded.model, loaded.model_config
    layers = check_layers(request.layers, model.n_layers)
    if not 0 <= request.head < config.n_heads:
        raise GoatDNAError(
            f"--head {request.head}: the model has {config.n_heads} heads, 0..{config.n_heads - 1}"
        )
    shorten = "--sequence" if request.sequence is not None else "--region"
    has_prior = config.positional in ("goat", "alibi")
    check_size(len(tokens), config.n_heads, len(layers), has_prior, shorten=shorten)
    with torch_threads(request.threads):
        maps = attention_maps(model, tokens, layers)
    result = AttentionResult(maps, label, len(tokens), config.positional, loaded.train_length)
    for path, kind in zip(request.outs, kinds, strict=True):
        if kind == "npz":
            write_npz(maps, path)
        else:
            from goatdna.analysis.attention_plots import plot_attention

            title = f"Attention of {label} ({len(tokens):,} bases, {config.positional})"
            plot_attention(maps, path, request.head, title)
        result.written.append(path)
    return result


def read_sequence(request: AttentionRequest, read_region: ReadRegion) -> tuple[np.ndarray, str]:
    """The tokens to read and how to name them: ``--sequence`` itself, or ``--region`` of
    ``--fasta`` (through ``read_region``)."""
    from goatdna.analysis.generate import parse_prompt

    if (request.sequence is None) == (request.fasta is None):
        raise GoatDNAError("give exactly one of --sequence or --fasta (with --region)")
    if request.sequence is not None:
        if request.region is not None:
            raise GoatDNAError("--region needs --fasta")
        return parse_prompt(request.sequence, "--sequence"), "--sequence"
    assert request.fasta is not None
    if request.region is None:
        raise GoatDNAError("--fasta needs --region contig:start-end (the bases to read)")
    return read_region(request.fasta, request.region, request.cache_dir)
