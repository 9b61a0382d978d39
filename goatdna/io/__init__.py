"""One module per file format or encoding, each the one home of its concept (issue 42).

`goatdna.io.tokens`: the nucleotide token table, the encoder and the reverse complement.
`goatdna.io.regions`: `Region` (0-based, half-open), the one ``--region`` parser and BED reader.
`goatdna.io.text`: opening plain or gzipped text inputs.
`goatdna.io.bigwig`: the per-base track writers (bigWig through pybigtools, bedGraph), atomic.

`goatdna.io.fasta`: the one FASTA reader (indexed random access, or a small file read whole).
`goatdna.io.tables`: the one CSV/TSV/Parquet reader (sequence tables, variant tables).
`goatdna.io.records`: `SequenceRecord` and `read_records` (a sequence file, or BED + reference).
No torch (numpy at most), below data_prep and above the shared pieces (pyproject.toml's import contracts).
"""
