"""What `goatdna embed` reads (BED regions of a FASTA, or a FASTA/CSV/TSV of sequences) and writes
(.npz, .parquet, .zarr).

Every record is validated before any model runs, and errors name the file and the record, so a
bad input fails at once with nothing written. Outputs are written under a temporary name in the
target's folder and renamed when complete.
"""

from __future__ import annotations

import gzip
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from goatdna.data_prep.tokens import reverse_complement_tokens
from goatdna.errors import GoatDNAError

from .embed import SequenceRecord, tokens_of

FASTA_SUFFIXES = (".fa", ".fasta", ".fna", ".fa.gz", ".fasta.gz", ".fna.gz")
TABLE_SEPARATORS = {".csv": ",", ".tsv": "\t", ".csv.gz": ",", ".tsv.gz": "\t"}
OUTPUT_SUFFIXES = (".npz", ".parquet", ".zarr")


def _suffix(path: Path, choices: Sequence[str]) -> str | None:
    name = path.name.lower()
    return next((s for s in sorted(choices, key=len, reverse=True) if name.endswith(s)), None)


# ---------------------------------------------------------------------------- inputs
def read_sequence_file(path: str | Path) -> list[SequenceRecord]:
    """FASTA records, or CSV/TSV rows with a ``sequence`` column (other columns carried)."""
    path = Path(path)
    if not path.is_file():
        raise GoatDNAError(f"{path}: --sequences file not found")
    if _suffix(path, FASTA_SUFFIXES):
        return _read_fasta_records(path)
    suffix = _suffix(path, tuple(TABLE_SEPARATORS))
    if suffix is None:
        raise GoatDNAError(
            f"{path}: --sequences must be FASTA (.fa/.fasta/.fna) or a table (.csv/.tsv) "
            "with a 'sequence' column"
        )
    return _read_table(path, TABLE_SEPARATORS[suffix])


def _read_fasta_records(path: Path) -> list[SequenceRecord]:
    from Bio.SeqIO.FastaIO import SimpleFastaParser

    opener = gzip.open if path.name.lower().endswith(".gz") else open
    records = []
    try:
        with opener(path, "rt") as handle:
            for title, seq in SimpleFastaParser(handle):
                name = title.split(None, 1)[0] if title.strip() else f"record{len(records) + 1}"
                what = f"{path}: record {name!r} (#{len(records) + 1})"
                records.append(SequenceRecord(name, tokens_of(seq, what)))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise GoatDNAError(f"{path}: cannot read as FASTA ({err})") from None
    if not records:
        raise GoatDNAError(f"{path}: no FASTA records (a record starts with a '>' line)")
    return records


def _read_table(path: Path, sep: str) -> list[SequenceRecord]:
    import pandas as pd

    try:
        table = pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise GoatDNAError(f"{path}: cannot read as a table ({err})") from None
    if "sequence" not in table.columns:
        raise GoatDNAError(
            f"{path}: no 'sequence' column (columns: {', '.join(map(str, table.columns))})"
        )
    if table.empty:
        raise GoatDNAError(f"{path}: no rows")
    carried = [c for c in table.columns if c != "sequence"]
    records = []
    for row_number, row in enumerate(table.itertuples(index=False), start=1):
        values = dict(zip(table.columns, row, strict=True))
        name = str(values["name"]) if "name" in values else str(row_number)
        what = f"{path}: row {row_number} (name {name!r})"
        tokens = tokens_of(values["sequence"], what)
        records.append(SequenceRecord(name, tokens, {c: values[c] for c in carried}))
    return records


def read_bed_regions(fasta: str | Path, bed: str | Path) -> list[SequenceRecord]:
    """BED regions (0-based, end-exclusive) cut from an indexed FASTA, in file order.

    The name is column 4 when present, else ``chrom:start+1-end``; a ``-`` in column 6 reads the
    region's reverse complement. chrom/start/end (and name, strand) are carried to the output.
    """
    from pyfaidx import Fasta, FastaIndexingError

    fasta, bed = Path(fasta), Path(bed)
    for path, what in ((fasta, "--fasta"), (bed, "--bed")):
        if not path.is_file():
            raise GoatDNAError(f"{path}: {what} file not found")
    regions = _parse_bed(bed)
    try:
        reference = Fasta(str(fasta), as_raw=True, sequence_always_upper=False, rebuild=False)
    except (FastaIndexingError, ValueError, OSError) as err:
        raise GoatDNAError(
            f"{fasta}: cannot index as FASTA ({err}); a .gz reference must be bgzip-compressed"
        ) from None
    records = []
    try:
        for line_number, chrom, start, end, name, strand in regions:
            where = f"{bed}: line {line_number} ({chrom}:{start}-{end})"
            if chrom not in reference:
                raise GoatDNAError(f"{where}: contig {chrom!r} is not in {fasta}")
            contig_length = len(reference[chrom])
            if end > contig_length:
                raise GoatDNAError(
                    f"{where}: end {end} is past the end of {chrom} ({contig_length} bases)"
                )
            tokens = tokens_of(str(reference[chrom][start:end]), where)
            if strand == "-":
                tokens = reverse_complement_tokens(tokens)
            label = name or f"{chrom}:{start + 1}-{end}"
            columns = {"chrom": chrom, "start": start, "end": end}
            if strand:
                columns["strand"] = strand
            records.append(SequenceRecord(label, tokens, columns))
    finally:
        reference.close()
    if not records:
        raise GoatDNAError(f"{bed}: no regions")
    return records


def _parse_bed(bed: Path) -> list[tuple[int, str, int, int, str, str]]:
    regions = []
    with open(bed, encoding="utf-8", errors="replace") as handle:
        for line_number, line in enumerate(handle, start=1):
            text = line.rstrip("\n\r")
            if not text.strip() or text.startswith(("#", "track", "browser")):
                continue
            fields = text.split("\t") if "\t" in text else text.split()
            if len(fields) < 3:
                raise GoatDNAError(
                    f"{bed}: line {line_number}: a BED line needs chrom, start and end"
                )
            try:
                start, end = int(fields[1]), int(fields[2])
            except ValueError:
                raise GoatDNAError(
                    f"{bed}: line {line_number}: start and end must be integers, got "
                    f"{fields[1]!r} and {fields[2]!r}"
                ) from None
            if start < 0 or end <= start:
                raise GoatDNAError(
                    f"{bed}: line {line_number}: empty region {fields[0]}:{start}-{end}; BED needs "
                    "0 <= start < end (0-based, end-exclusive)"
                )
            name = fields[3] if len(fields) > 3 and fields[3] not in ("", ".") else ""
            strand = fields[5] if len(fields) > 5 and fields[5] in ("+", "-") else ""
            regions.append((line_number, fields[0], start, end, name, strand))
    return regions


# ---------------------------------------------------------------------------- outputs
def check_output(out: str | Path, pool: str) -> str:
    """The output format for ``out``, checked before any work (library present, pooling fits)."""
    out = Path(out)
    suffix = _suffix(out, OUTPUT_SUFFIXES)
    if suffix is None:
        raise GoatDNAError(f"{out}: --out must end in {', '.join(OUTPUT_SUFFIXES)}")
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
    out: str | Path, records: Sequence[SequenceRecord], vectors: Sequence[np.ndarray], pool: str
) -> Path:
    """Write one row (pooled) or one block of rows (``none``: ``offsets``) per record, in order.

    .npz: ``embeddings`` (n, d) or (total bases, d) with ``offsets`` (n + 1,), and ``names``.
    .parquet: one row per record: name, carried columns, ``embedding`` (a list of d floats).
    .zarr: the same arrays as .npz, in a zarr group.
    """
    out = Path(out)
    suffix = check_output(out, pool)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}{suffix}")
    try:
        if suffix == ".npz":
            with open(tmp, "wb") as handle:
                np.savez(handle, **_arrays(records, vectors, pool))
        elif suffix == ".parquet":
            _write_parquet(tmp, records, vectors)
        else:
            _write_zarr(tmp, _arrays(records, vectors, pool))
        if out.is_dir():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp)
        elif tmp.exists():
            tmp.unlink()
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
