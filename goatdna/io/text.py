"""Opening text inputs (plain or gzipped): one helper for the table and BED readers, and the one
test of what compression a file really has (FASTA, VCF)."""

from __future__ import annotations

import gzip
import io
from pathlib import Path


def open_text(path: Path) -> io.TextIOBase:
    """A text file, gunzipped when its name ends in ``.gz``; newlines kept as written (csv)."""
    if path.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), newline="")
    return path.open(newline="")


GZIP_MAGIC = b"\x1f\x8b"


def detect_compression(path: Path) -> str:
    """'none', 'gzip' or 'bgzip', from the magic bytes (file names lie)."""
    with open(path, "rb") as handle:
        head = handle.read(18)
    if not head.startswith(GZIP_MAGIC):
        return "none"
    # BGZF: gzip with FEXTRA (flag bit 2) holding a 'BC' subfield.
    if len(head) >= 14 and head[3] & 4 and head[12:14] == b"BC":
        return "bgzip"
    return "gzip"
