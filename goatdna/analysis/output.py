"""The FASTA/JSON shapes of generated sequences (written through `goatdna.atomic`)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from goatdna.formats import json_text
from goatdna.formats import output_format as format_of

if TYPE_CHECKING:
    from goatdna.analysis.generate import SamplingOptions

FASTA_SUFFIXES = (".fa", ".fasta", ".fna")
FASTA_LINE_WIDTH = 80


def output_format(path: Path | None) -> str:
    """'fasta' or 'json' from the --out file name (stdout: fasta)."""
    if path is None:
        return "fasta"
    return format_of(path, (*FASTA_SUFFIXES, ".json")).kind


def format_generation(
    fmt: str,
    checkpoint: str,
    label: str,
    prompt: str,
    samples: Sequence[str],
    options: SamplingOptions,
    with_prompt: bool = False,
) -> str:
    """Render generated samples as FASTA (one record per sample) or a JSON document."""
    if fmt == "json":
        doc = {
            "checkpoint": checkpoint,
            "prompt_label": label,
            "prompt": prompt,
            "sampling": asdict(options),
            "samples": [prompt + s if with_prompt else s for s in samples],
            "includes_prompt": with_prompt,
        }
        return json_text(doc)
    lines = []
    what = "prompt+continuation" if with_prompt else "continuation"
    for i, sample in enumerate(samples):
        lines.append(
            f">sample_{i} {what} of {label} ({len(prompt)} nt) seed={options.seed} "
            f"temperature={options.temperature:g} top_k={options.top_k or 'off'}"
        )
        seq = prompt + sample if with_prompt else sample
        lines.extend(textwrap.wrap(seq, FASTA_LINE_WIDTH) or [""])
    return "\n".join(lines) + "\n"
