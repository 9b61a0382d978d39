"""`goatdna.formats.output_format`: the one rule that turns an output name into a format."""

from __future__ import annotations

from pathlib import Path

import pytest

from goatdna.errors import GoatDNAError
from goatdna.formats import FORMATS, TABLE_SUFFIXES, OutputFormat, output_format


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("p.tsv", OutputFormat("tsv", None, ".tsv")),
        ("p.TSV.GZ", OutputFormat("tsv", "gzip", ".tsv.gz")),
        ("dir.v2/p.csv.gz", OutputFormat("csv", "gzip", ".csv.gz")),
        ("p.gz.csv", OutputFormat("csv", None, ".csv")),
        ("p.Parquet", OutputFormat("parquet", None, ".parquet")),
    ],
)
def test_the_longest_suffix_decides_case_insensitively(name: str, expected: OutputFormat) -> None:
    assert output_format(Path(name), TABLE_SUFFIXES) == expected


@pytest.mark.parametrize("name", ["p.txt", "p.gz", "p.parquet.gz", "p", ".tsv", "p.tsv.bz2"])
def test_any_other_name_is_one_error_listing_the_suffixes(name: str) -> None:
    with pytest.raises(GoatDNAError) as caught:
        output_format(Path(name), TABLE_SUFFIXES, "--out")
    message = str(caught.value)
    assert message.startswith(f"--out {name}: unknown extension ")
    assert message.endswith(
        "--out must end in .tsv, .tsv.gz, .csv, .csv.gz or .parquet (the suffix picks the format)"
    )
    assert "\n" not in message


def test_every_command_decides_through_it() -> None:
    """Each writer's suffix list names known formats, and its own check is the shared one."""
    from goatdna.analysis.output import FASTA_SUFFIXES
    from goatdna.analysis.output import output_format as generate_format
    from goatdna.inference.embed_io import OUTPUT_SUFFIXES as EMBED
    from goatdna.inference.embed_io import check_output
    from goatdna.inference.variant_io import OUTPUT_SUFFIXES as VARIANTS
    from goatdna.inference.variant_io import output_kind
    from goatdna.io.bigwig import TRACK_SUFFIXES
    from goatdna.io.bigwig import output_kind as track_kind

    for suffixes in (TABLE_SUFFIXES, EMBED, TRACK_SUFFIXES, VARIANTS, FASTA_SUFFIXES):
        assert all(s.lower() in FORMATS for s in suffixes), suffixes
    checks = [
        lambda p: track_kind(p),
        lambda p: output_kind(p),
        lambda p: check_output(p, "mean"),
        lambda p: generate_format(p),
    ]
    for check in checks:
        with pytest.raises(GoatDNAError, match=r"^--out x\.txt: unknown extension \.txt; --out"):
            check(Path("x.txt"))
    assert track_kind(Path("t.BigWig")) == "bigwig" and track_kind(Path("t.bg")) == "bedgraph"
    assert output_kind(Path("s.VCF.GZ")) == "vcf.gz" and generate_format(Path("g.FA")) == "fasta"
    assert check_output(Path("e.NPZ"), "mean") == ".npz"
