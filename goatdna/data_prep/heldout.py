"""The held-out windows: one definition for training's validation loss and `goatdna evaluate`.

For a context length L, each record of a split (in file order) is tiled by windows of L + 1
bases that start every L bases inside it (never across a record boundary): the model reads bases
0..L-1 of a window and predicts bases 1..L, and consecutive windows share one base (the last
target of one is the first input of the next), so every base of a record except its first, and
the tail too short to fill a window, is predicted exactly once, with 0 to L-1 bases of context.
Windows may contain N; N *targets* are not scored (`goatdna.model.scoring`). When more windows
fit than ``max_windows``, an evenly spaced subset is kept, so a capped set still spans the split.

The validation loss in ``summary.json`` (at L = ``data.seq_len``, capped at
``data.val_max_windows``) and `evaluate`'s NLL at the same L and cap score exactly these windows,
so they are the same number for the same weights.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def heldout_window_starts(
    records: Iterable[tuple[int, int]], context_length: int, max_windows: int | None = None
) -> np.ndarray:
    """Offsets (in the split's .bin) of the held-out windows of ``context_length + 1`` bases.

    ``records`` are ``(offset, length)`` pairs of one split. Returns int64 offsets, ascending.
    """
    if context_length < 1:
        raise ValueError(f"context_length must be >= 1, got {context_length}")
    starts = [
        offset + context_length * np.arange((length - 1) // context_length, dtype=np.int64)
        for offset, length in records
        if length - 1 >= context_length
    ]
    out = np.concatenate(starts) if starts else np.zeros(0, dtype=np.int64)
    if max_windows is not None and out.size > max_windows:
        keep = np.linspace(0, out.size - 1, max_windows).round().astype(np.int64)
        out = out[keep]
    return out
