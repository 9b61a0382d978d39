"""goatdna/io/records.py: one function from `embed`'s and `attribute`'s inputs (a sequence file,
or BED regions over a reference) to validated `SequenceRecord`s."""

from __future__ import annotations

from pathlib import Path

import pytest

from goatdna.errors import GoatDNAError
from goatdna.io.records import read_records
from goatdna.io.tokens import decode


def test_a_table_carries_its_columns_and_names_rows(tmp_path: Path) -> None:
    path = tmp_path / "s.tsv"
    path.write_text("name\tsequence\tgroup\nr1\tACGT\tx\nr2\tttNR\ty\n")
    records = read_records(sequences=path)
    assert [r.name for r in records] == ["r1", "r2"]
    assert decode(records[1].tokens) == "TTNN"  # plain tokens: case and IUPAC read as N
    assert records[0].columns == {"name": "r1", "group": "x"}


def test_a_fasta_sequence_file(tmp_path: Path) -> None:
    path = tmp_path / "s.fa"
    path.write_text(">one desc\nACGT\nAC\n>two\nGG\n")
    records = read_records(sequences=path)
    assert [(r.name, decode(r.tokens)) for r in records] == [("one", "ACGTAC"), ("two", "GG")]


def test_bed_regions_over_a_reference(tmp_path: Path) -> None:
    fasta = tmp_path / "ref.fa"
    fasta.write_text(">chr1\nAACCGGTTAC\n")
    bed = tmp_path / "r.bed"
    bed.write_text("chr1\t0\t4\tfirst\t0\t-\nchr1\t6\t10\n")
    records = read_records(fasta=fasta, bed=bed)
    assert [(r.name, decode(r.tokens)) for r in records] == [("first", "GGTT"),
                                                             ("chr1:7-10", "TTAC")]  # fmt: skip
    assert records[0].columns == {"chrom": "chr1", "start": 0, "end": 4, "strand": "-"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sequences": "s.tsv", "bed": "r.bed"}, "give either --sequences, or --fasta with --bed"),
        ({"fasta": "ref.fa"}, "give --sequences FILE, or --fasta REF together with --bed"),
        ({"sequences": "none.tsv"}, "none.tsv: file not found"),
        ({"sequences": "s.tsv"}, "s.tsv: no 'sequence' column (columns: name)"),
        ({"sequences": "h.tsv"}, "h.tsv: no rows"),
        ({"sequences": "x.tsv"}, "x.tsv: row 1 (name 'a'): invalid nucleotide 'X' at position 3"),
        ({"fasta": "ref.fa", "bed": "far.bed"}, "end 99 is past the end of chr1 (4 bases)"),
        ({"fasta": "none.fa", "bed": "far.bed"}, "--fasta none.fa: file not found"),
    ],
)
def test_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kwargs: dict,
                             message: str) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    Path("s.tsv").write_text("name\nr1\n")
    Path("h.tsv").write_text("name\tsequence\n")
    Path("x.tsv").write_text("name\tsequence\na\tACX\n")
    Path("ref.fa").write_text(">chr1\nACGT\n")
    Path("far.bed").write_text("chr1\t0\t99\n")
    with pytest.raises(GoatDNAError) as err:
        read_records(**kwargs)
    assert message in str(err.value) and len(str(err.value).splitlines()) == 1
