"""Labels of the sequence tables of downstream tasks (`finetune`, `predict`).

The tables themselves are read by `goatdna.io.tables` (the one table reader); this module turns
their ``label`` column into class indices or floats. Every problem a user can fix (a missing or
non-numeric label, a label column with one class) is a `GoatDNAError` naming the file, the row and
what to do.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from goatdna.errors import GoatDNAError
from goatdna.io.tables import SequenceTable, as_float

MISSING_LABELS = frozenset({"", "nan", "na", "n/a", "null", "none"})
"""Label cells read as missing (case-insensitive): an error, never a class of their own."""


def canonical_label(text: str) -> str:
    """One spelling per label: a number is written as Python writes it (``1``, ``1.0`` and
    ``1e0`` are one class, ``1``; ``0.50`` is ``0.5``); anything else is kept as written."""
    value = as_float(text)
    if value is None or not math.isfinite(value):
        return text
    return str(int(value)) if value.is_integer() else repr(value)


def many_classes(n_rows: int) -> int:
    """More distinct labels than this is no classification task: nearly every row would be a
    class of its own (a region name, a measurement), trained to chance and reported as such."""
    return max(10, n_rows // 2)


def infer_task(labels: list[str], table: SequenceTable, column: str, hint: str = "") -> str:
    """The task ``--task auto`` picks from the (canonical, present) training labels.

    ``regression`` when every label is a number and some is not whole, or when they are whole
    numbers nearly all distinct (a count, a measurement); ``classification`` for names and for
    whole numbers with few values. A numeric column with a word in it ("high") and a column of
    names nearly all distinct (a BED's region names) are errors, never a classifier with one
    class per row: ``hint`` adds what to do (e.g. which BED column holds the label).
    """
    values = [as_float(x) for x in labels]
    words = [i for i, v in enumerate(values) if v is None]
    distinct = len(set(labels))
    if not words:
        numbers = [v for v in values if v is not None]
        if any(not v.is_integer() for v in numbers) or distinct > many_classes(len(labels)):
            return "regression"
        return "classification"
    if len(words) * 2 < len(labels):  # mostly numbers: the words are mistakes
        row = words[0]
        raise GoatDNAError(
            f"{table.where(row)}: label {labels[row]!r} in column {column!r} is not a number, "
            f"though {len(labels) - len(words)} of {len(labels)} labels are; fix or drop the "
            "row (or pass --task classification if the labels are class names)"
        )
    if distinct > many_classes(len(labels)):
        raise GoatDNAError(
            f"{table.path}: column {column!r} holds {distinct} distinct labels over {len(labels)} "
            f"rows: nearly every row would be a class of its own, so it is not a class label"
            f"{hint}; pass --task classification to train on it anyway"
        )
    return "classification"


def check_labels_present(table: SequenceTable, column: str, option: str) -> list[str]:
    """The labels of a column in their canonical spelling (`canonical_label`); a missing one
    (NaN, empty) or a non-finite number (inf) is an error naming its row."""
    labels = table.column(column, option)
    for i, text in enumerate(labels):
        if text.strip().lower() in MISSING_LABELS:
            raise GoatDNAError(
                f"{table.where(i)}: label {text!r} in column {column!r} is missing (NaN/empty); "
                "drop the row or fill in its label"
            )
        value = as_float(text.strip())
        if value is not None and not math.isfinite(value):
            raise GoatDNAError(
                f"{table.where(i)}: label {text!r} in column {column!r} is not a finite number; "
                "drop the row or fix its label"
            )
    return [canonical_label(x.strip()) for x in labels]


def class_names(labels: list[str], where: Path, column: str) -> list[str]:
    """Sorted distinct labels (numerically when all are numbers); one class is an error."""
    distinct = set(labels)
    if len(distinct) < 2:
        only = next(iter(distinct)) if distinct else "nothing"
        raise GoatDNAError(
            f"{where}: column {column!r} holds a single class ({only!r}); a classifier needs at "
            "least two (or pass --task regression for a numeric target)"
        )
    if all(as_float(x) is not None for x in distinct):
        return sorted(distinct, key=lambda x: (float(x), x))
    return sorted(distinct)


def encode_labels(
    table: SequenceTable, column: str, option: str, task: str, classes: list[str] | None
) -> np.ndarray:
    """Class indices (int64) into ``classes``, or float64 targets for regression."""
    labels = check_labels_present(table, column, option)
    if task == "regression":
        values = np.empty(len(labels), dtype=np.float64)
        for i, text in enumerate(labels):
            value = as_float(text)
            if value is None or not math.isfinite(value):
                raise GoatDNAError(
                    f"{table.where(i)}: regression label {text!r} in column {column!r} is not a "
                    "finite number (or pass --task classification)"
                )
            values[i] = value
        return values
    assert classes is not None
    index = {name: k for k, name in enumerate(classes)}
    out = np.empty(len(labels), dtype=np.int64)
    for i, text in enumerate(labels):
        if text not in index:
            raise GoatDNAError(
                f"{table.where(i)}: label {text!r} is not one of the training classes "
                f"({', '.join(classes)})"
            )
        out[i] = index[text]
    return out
