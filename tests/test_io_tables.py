"""goatdna/io/tables.py: the one strict reader of CSV/TSV/Parquet tables, as strings
(`read_table`, sequence tasks) or as a pandas frame (`read_frame`, variant tables); every fault is
one error line naming the file (and the option)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from goatdna.errors import GoatDNAError
from goatdna.io.tables import encode_sequences, read_frame, read_table
from goatdna.io.tokens import InvalidNucleotide, encode_bytes


def test_read_table_keeps_cells_as_written(tmp_path: Path) -> None:
    path = tmp_path / "t.csv.gz"
    path.write_bytes(gzip.compress(b"sequence,label,id\nACGTn,1.0,007\nRYac,0,8\n"))
    table = read_table(path)
    assert table.columns == {"sequence": ["ACGTn", "RYac"], "label": ["1.0", "0"],
                             "id": ["007", "8"]}  # fmt: skip
    assert table.where(1) == f"{path}: row 2 (line 3)"
    tokens = encode_sequences(table, "sequence", "--sequence-column")
    assert [t.tolist() for t in tokens] == [[0, 1, 2, 3, 4], [4, 4, 0, 1]]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.csv", None, "missing.csv: file not found"),
        ("empty.csv", b"", "empty file; expected a header line such as sequence,label"),
        ("ragged.tsv", b"sequence\tlabel\nACGT\n", "row 1 (line 2) has 1 fields, the header has 2"),
        ("twice.csv", b"a,a\n1,2\n", "the header names a column twice"),
        ("t.xlsx", b"x", "unknown table type '.xlsx'"),
        ("t.parquet", b"not parquet", "not a readable Parquet file"),
        ("r.bed", b"chr1\t0\t4\n", "a BED file needs --fasta REF"),
    ],
)
def test_read_table_errors_are_one_line(tmp_path: Path, name: str, content: bytes | None,
                                        message: str) -> None:  # fmt: skip
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(GoatDNAError) as err:
        read_table(path)
    assert message in str(err.value) and len(str(err.value).splitlines()) == 1


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("ACGX", "row 2 (line 3): invalid nucleotide 'X' at position 4 of column 'sequence'"),
        ("  ", "row 2 (line 3): empty sequence in column 'sequence'"),
        ("ACGé", "row 2 (line 3): column 'sequence' holds a non-ASCII character"),
    ],
)
def test_encode_sequences_names_the_row(tmp_path: Path, cell: str, message: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(f"sequence\nACGT\n{cell}\n", encoding="utf-8")
    with pytest.raises(GoatDNAError) as err:
        encode_sequences(read_table(path), "sequence", "--sequence-column")
    assert message in str(err.value) and len(str(err.value).splitlines()) == 1


def test_a_missing_column_names_the_option(tmp_path: Path) -> None:
    path = tmp_path / "t.tsv"
    path.write_text("seq\tlabel\nACGT\t1\n")
    with pytest.raises(GoatDNAError) as err:
        encode_sequences(read_table(path), "sequence", "--sequence-column")
    assert "no column 'sequence' (columns: seq, label); name the right one with " \
        "--sequence-column" in str(err.value)  # fmt: skip


def test_the_token_encoder_says_where_the_bad_base_is() -> None:
    """The table encoder and `encode_bytes` share one table and one check (io/tokens.py)."""
    with pytest.raises(InvalidNucleotide) as err:
        encode_bytes(b"ACGTZ")
    assert (err.value.char, err.value.position) == ("Z", 5)
    assert str(err.value).startswith("invalid nucleotide 'Z' at position 5 (1-based)")


def test_read_frame_text_columns_and_na(tmp_path: Path) -> None:
    path = tmp_path / "t.tsv"
    path.write_text("chrom\t pos\tref\talt\tscore\n20\t5\tNA\tA\tNA\n")
    frame = read_frame(path, "--labels", ("chrom", "ref", "alt"))
    assert list(frame.columns) == ["chrom", "pos", "ref", "alt", "score"]
    assert frame.chrom[0] == "20" and frame.ref[0] == "NA" and np.isnan(frame.score[0])


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("no.tsv", None, "--scores {path}: file not found"),
        ("c.tsv", b"chrom,pos,ref,alt\n", "--scores {path}: the separator looks wrong"),
        ("z.tsv", gzip.compress(b"chrom\tpos\n"), "--scores {path}: the file is gzip-compressed"),
        ("p.tsv.gz", b"chrom\tpos\n", "--scores {path}: named .gz but not gzip-compressed"),
        ("e.csv", b"", "--scores {path}: not a readable table (No columns to parse from file)"),
        ("b.parquet", b"junk", "--scores {path}: not a readable table"),
    ],
)
def test_read_frame_errors_are_one_line(tmp_path: Path, name: str, content: bytes | None,
                                        message: str) -> None:  # fmt: skip
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(GoatDNAError) as err:
        read_frame(path, "--scores", ("chrom", "ref", "alt"))
    assert message.format(path=path) in str(err.value)
    assert len(str(err.value).splitlines()) == 1
