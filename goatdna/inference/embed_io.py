"""What `goatdna embed` writes (.npz, .parquet, .zarr).

Its inputs are read by `goatdna.io.records.read_records` (BED regions of a FASTA, or a
FASTA/CSV/TSV/Parquet of sequences), every record validated before any model runs. Outputs are
written under a temporary name in the target's folder and renamed when complete.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from goatdna.atomic import atomic_dir, atomic_path
from goatdna.errors import GoatDNAError
from goatdna.formats import output_format
from goatdna.io.records import SequenceRecord

OUTPUT_SUFFIXES = (".npz", ".parquet", ".zarr")


# ---------------------------------------------------------------------------- outputs
def check_output(out: str | Path, pool: str) -> str:
    """The output format for ``out``, checked before any work (library present, pooling fits)."""
    out = Path(out)
    suffix = output_format(out, OUTPUT_SUFFIXES).suffix
    if suffix == ".parquet":
        if pool == "none":
            raise GoatDNAError(
                f"{out}: --pool none gives one vector per base, which a parquet row cannot hold; "
                "write .npz or .zarr instead"
            )
        _need("pyarrow", out)
    if suffix == ".zarr":
        _need("zarr", out)
    if out.is_dir() and not (suffix == ".zarr" and _is_zarr_store(out)):
        raise GoatDNAError(f"{out}: exists and is a folder; choose another --out")
    return suffix


ZARR_ENTRIES = frozenset({"zarr.json", ".zgroup", ".zattrs", ".zmetadata", "embeddings",
                          "offsets", "names"})  # fmt: skip
"""What a ``.zarr`` output holds at its top (zarr v3 or v2 metadata, the arrays `_arrays` writes)."""


def zarr_entry(path: Path) -> bool:
    """Whether ``path``, in a ``.zarr`` output, is one goatdna writes: ``embed --force`` replaces
    a store of these only (`goatdna.workdir.claim_output_folder`), never a user's file in it."""
    return path.name in ZARR_ENTRIES


def _is_zarr_store(path: Path) -> bool:
    """A folder goatdna may replace: a zarr store (v3 ``zarr.json`` or v2 ``.zgroup``)."""
    return (path / "zarr.json").is_file() or (path / ".zgroup").is_file()


def _need(module: str, out: Path) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise GoatDNAError(
            f"{out}: writing {out.suffix} needs {module} (pip install {module}); or write .npz"
        )


def _arrays(records: Sequence[SequenceRecord], vectors: Sequence[np.ndarray], pool: str) -> dict:
    names = np.array([r.name for r in records], dtype=str)
    if pool == "none":
        lengths = np.array([len(v) for v in vectors], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return {"embeddings": np.concatenate(vectors), "offsets": offsets, "names": names}
    return {"embeddings": np.stack(vectors).astype(np.float32), "names": names}


def write_embeddings(
    out: str | Path,
    records: Sequence[SequenceRecord],
    vectors: Sequence[np.ndarray],
    pool: str,
    then: str = "rerun the command",
) -> Path:
    """Write one row (pooled) or one block of rows (``none``: ``offsets``) per record, in order.

    .npz: ``embeddings`` (n, d) or (total bases, d) with ``offsets`` (n + 1,), and ``names``.
    .parquet: one row per record: name, carried columns, ``embedding`` (a list of d floats).
    .zarr: the same arrays as .npz, in a zarr group.
    ``then``: what a full disk's one error line says to run next (`WorkDir.then`).
    """
    out = Path(out)
    suffix = check_output(out, pool)
    if suffix == ".zarr":  # a folder: swapped in whole, an earlier store replaced
        with atomic_dir(out, then=then) as folder:
            _write_zarr(folder, _arrays(records, vectors, pool))
        return out
    with atomic_path(out, then=then) as tmp:
        if suffix == ".npz":
            with open(tmp, "wb") as handle:
                np.savez(handle, **_arrays(records, vectors, pool))
        else:
            _write_parquet(tmp, records, vectors)
    return out


def _write_parquet(
    path: Path, records: Sequence[SequenceRecord], vectors: Sequence[np.ndarray]
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns: dict[str, Any] = {"name": [r.name for r in records]}
    for key in dict.fromkeys(k for r in records for k in r.columns):
        if key in columns:
            continue
        columns[key] = [r.columns.get(key) for r in records]
    matrix = np.stack(vectors).astype(np.float32)  # (n, d)
    columns["embedding"] = pa.FixedSizeListArray.from_arrays(
        pa.array(matrix.reshape(-1)), matrix.shape[1]
    )
    pq.write_table(pa.table(columns), path)


def _write_zarr(path: Path, arrays: dict[str, np.ndarray]) -> None:
    import zarr

    group = zarr.open_group(str(path), mode="w")
    for name, values in arrays.items():
        dtype = str if values.dtype.kind == "U" else values.dtype  # zarr's variable-length UTF-8
        group.create_array(name, shape=values.shape, dtype=dtype)[...] = values
