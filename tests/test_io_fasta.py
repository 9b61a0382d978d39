"""goatdna/io/fasta.py: the one FASTA reader, read whole (`read_fasta_text`, `fasta_titles`) or
at random offsets (`open_fasta`, `ContigReader.read_text`); every fault is one error line."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from goatdna.errors import GoatDNAError
from goatdna.io.fasta import fasta_titles, open_fasta, read_fasta_text

TEXT = ">a first\nACGTac\ngtRY\n>\nNNnn\n>c\r\nTT\r\nGG\r\n"


def test_read_fasta_text_names_case_and_iupac(tmp_path: Path) -> None:
    path = tmp_path / "x.fa"
    path.write_text(TEXT)
    assert read_fasta_text(path) == [("a", "ACGTacgtRY"), ("record2", "NNnn"), ("c", "TTGG")]


@pytest.mark.parametrize("name", ["x.fa.gz", "x.fa"])
def test_gzip_is_told_by_its_bytes_not_its_name(tmp_path: Path, name: str) -> None:
    """A gzipped FASTA named .fa was read as text by the sequence-table reader (a decode
    error); the magic bytes decide now, as `open_fasta` always did."""
    path = tmp_path / name
    path.write_bytes(gzip.compress(TEXT.encode()))
    assert [n for n, _ in read_fasta_text(path)] == ["a", "record2", "c"]
    assert list(fasta_titles(path)) == ["a first", "", "c"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "file not found"),
        (b"", "no FASTA records (a record starts with a '>' line)"),
        (b"ACGT\n", "no FASTA records"),
        (b">a\n\xff\xfe\n", "cannot read as FASTA"),
        (b"\x1f\x8b\x08\x00broken", "cannot read as FASTA"),
    ],
)
def test_read_fasta_text_errors_are_one_line(tmp_path: Path, content: bytes | None,
                                             message: str) -> None:  # fmt: skip
    path = tmp_path / "bad.fa"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(GoatDNAError) as err:
        read_fasta_text(path)
    assert message in str(err.value) and str(path) in str(err.value)
    assert len(str(err.value).splitlines()) == 1


def test_fasta_titles_stops_at_the_first_line_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "x.fa"
    path.write_bytes(b">one synthetic seed=0\n" + b"ACGT\n" * 50_000 + b">two\n\xff\n")
    titles = fasta_titles(path)
    assert next(titles) == "one synthetic seed=0"  # lazily: the bad tail is not read yet
    with pytest.raises(GoatDNAError, match="cannot read as FASTA"):
        list(titles)


def test_read_text_keeps_what_was_written_and_validates(tmp_path: Path) -> None:
    path = tmp_path / "ref.fa"
    path.write_text(">chrA\nTTTTacgt\nRYNNAC\n>chrB\nACGX\n")
    source = open_fasta(path, tmp_path / "cache", lambda _text: None)
    reader = source.open_reader()
    try:
        assert reader.read_text(source.contig("chrA"), 2, 12) == "TTacgtRYNN"
        assert reader.read_text(source.contig("chrA"), 3, 3) == ""
        with pytest.raises(GoatDNAError, match="invalid character 'X' in contig 'chrB' at "
                           "position 4 \\(1-based\\) of ref.fa"):  # fmt: skip
            reader.read_text(source.contig("chrB"), 0, 4)
    finally:
        reader.close()
