"""Which file format an output name asks for: the one rule every command uses.

Every goatdna command that writes a file chooses its format from the ``--out`` name's suffix
(`goatdna predict`, `score-variants`, `score-track`, `embed`, `generate`); each passes the
suffixes it can write to `output_format`, which matches the longest one (case-insensitive, so
``.tsv.gz`` is gzipped TSV, not "something .gz") and refuses any other name before work starts
with one message naming the suffixes the command accepts. Nothing is written under a name whose
suffix says another format.

`json_text` is the one JSON serialisation of every JSON goatdna writes (files and the one-line
JSON summaries on stdout), with one NaN policy: a float JSON cannot hold (NaN, +-inf) is written
``null``, anywhere in the document, so every file is strict JSON that any reader parses. Issue
42 found four policies (null in summary.json, evaluation and variant JSON; bare ``NaN`` tokens in
probe_sweep.json and the precision report; ``Infinity`` left in the export's config.json;
raising in evaluate); null was the one most files used.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from goatdna.errors import GoatDNAError


@dataclass(frozen=True)
class OutputFormat:
    """What a file name asks for: ``kind`` (the format) and ``compression`` over it."""

    kind: str  # tsv, csv, parquet, bigwig, bedgraph, vcf, npz, zarr, fasta, json
    compression: str | None  # "gzip", "bgzip" (block gzip, for a tabix index) or None
    suffix: str  # the suffix matched, lower-case (".tsv.gz")


FORMATS: dict[str, tuple[str, str | None]] = {
    ".tsv": ("tsv", None),
    ".tsv.gz": ("tsv", "gzip"),
    ".csv": ("csv", None),
    ".csv.gz": ("csv", "gzip"),
    ".parquet": ("parquet", None),
    ".bw": ("bigwig", None),
    ".bigwig": ("bigwig", None),
    ".bedgraph": ("bedgraph", None),
    ".bg": ("bedgraph", None),
    ".vcf.gz": ("vcf", "bgzip"),
    ".npz": ("npz", None),
    ".zarr": ("zarr", None),
    ".fa": ("fasta", None),
    ".fasta": ("fasta", None),
    ".fna": ("fasta", None),
    ".json": ("json", None),
    ".png": ("png", None),
}
"""Every suffix any command writes, and what it means."""

TABLE_SUFFIXES = (".tsv", ".tsv.gz", ".csv", ".csv.gz", ".parquet")
"""The tables `goatdna predict` writes."""


def _listed(suffixes: Sequence[str]) -> str:
    return ", ".join(suffixes[:-1]) + f" or {suffixes[-1]}" if len(suffixes) > 1 else suffixes[0]


def output_format(path: str | Path, suffixes: Sequence[str], option: str = "--out") -> OutputFormat:
    """The format of ``path`` among the ``suffixes`` a command writes (keys of `FORMATS`, in
    the order the message lists them); any other name is a `GoatDNAError`."""
    path = Path(path)
    name = path.name.lower()
    for suffix in sorted(suffixes, key=len, reverse=True):
        if name.endswith(suffix.lower()) and len(name) > len(suffix):
            kind, compression = FORMATS[suffix.lower()]
            return OutputFormat(kind, compression, suffix.lower())
    found = "".join(path.suffixes[-2:]) or "(none)"
    raise GoatDNAError(
        f"{option} {path}: unknown extension {found}; {option} must end in {_listed(suffixes)} "
        "(the suffix picks the format)"
    )


def json_safe(value: object) -> object:
    """``value`` with every float JSON cannot hold (NaN, +-inf) as None, at any depth of dicts,
    lists and tuples; everything else passes through (json.dumps judges it)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def json_text(
    value: object, *, indent: int | None = 2, sort_keys: bool = False, end: str = "\n"
) -> str:
    """The JSON text of ``value`` as goatdna writes it: non-finite floats as ``null`` (strict
    JSON), ``indent`` as json.dumps (None: one line), then ``end``."""
    text = json.dumps(json_safe(value), indent=indent, sort_keys=sort_keys, allow_nan=False)
    return text + end
