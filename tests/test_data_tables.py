"""`goatdna.data_prep.tables`: the sequence tables of finetune and predict."""

from __future__ import annotations

from pathlib import Path


def test_a_sequence_longer_than_the_csv_field_limit_is_read(tmp_path: Path) -> None:
    from goatdna.io.tables import encode_sequences, read_table

    long = "ACGT" * 50_000  # 200,000 bases: past the csv module's default 131,072
    path = tmp_path / "t.csv"
    path.write_text(f"sequence,label\n{long},1\nACGTACGTAA,0\n")
    table = read_table(path)
    sizes = [t.size for t in encode_sequences(table, "sequence", "--sequence-column")]
    assert sizes == [200_000, 10]
