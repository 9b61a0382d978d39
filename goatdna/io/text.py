"""Opening text inputs (plain or gzipped): one helper for the table and BED readers."""

from __future__ import annotations

import gzip
import io
from pathlib import Path


def open_text(path: Path) -> io.TextIOBase:
    """A text file, gunzipped when its name ends in ``.gz``; newlines kept as written (csv)."""
    if path.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), newline="")
    return path.open(newline="")
