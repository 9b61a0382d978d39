"""`goatdna info`: the records/splits table, and --verify catching a corrupted shard."""

from __future__ import annotations

import re
import shutil

import pytest
from helpers import invoke, printed

from goatdna.data_prep import ShardedGenome


def _run(*args):
    return invoke(args, env={"COLUMNS": "160"})


def test_info_table_shows_records_and_splits(synthetic_shards):
    result = _run("info", synthetic_shards)
    assert result.exit_code == 0, result.output
    out = result.stdout
    for heading in ("records (12)", "splits", "GC %", "N %", "soft-masked %"):
        assert heading in out
    genome = ShardedGenome(synthetic_shards)
    train = genome.manifest["splits"]["train"]
    gc = 100 * train["gc_count"] / (train["length"] - train["n_count"])
    row = re.search(r"train\s*│\s*4\s*│\s*([\d,]+)\s*│\s*([\d.]+)", out)
    assert row is not None, out
    assert int(row.group(1).replace(",", "")) == train["length"]
    assert abs(float(row.group(2)) - gc) < 0.006


def test_verify_passes_then_catches_a_flipped_byte(synthetic_shards, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(synthetic_shards, copy)
    ok = _run("info", copy, "--verify")
    assert ok.exit_code == 0 and "verified: all 12 records" in ok.stdout
    genome = ShardedGenome(copy)
    rec = genome.records("val")[1]
    with open(copy / "val.bin", "r+b") as handle:
        handle.seek(rec.offset + 5)
        byte = handle.read(1)[0]
        handle.seek(rec.offset + 5)
        handle.write(bytes([byte ^ 1]))
    bad = _run("info", copy, "--verify")
    assert bad.exit_code == 2
    assert f"record {rec.name}:{rec.start}-{rec.end} in val.bin" in bad.stderr
    with open(copy / "test.bin", "ab") as handle:
        handle.write(b"\0")
    truncated = _run("info", copy, "--verify")
    assert truncated.exit_code == 2 and "the manifest says" in truncated.stderr


def test_prepare_help_documents_every_option():
    result = _run("prepare", "--help")
    assert result.exit_code == 0
    import typer

    from goatdna.cli.app import app

    command = typer.main.get_command(app).commands["prepare"]  # type: ignore[attr-defined]
    for param in command.params:
        for flag in param.opts:
            if flag.startswith("--"):
                assert flag in result.stdout, flag
        assert getattr(param, "help", None), f"{param.name} has no help text"


def test_info_prints_a_folder_name_with_brackets_as_written(synthetic_shards, tmp_path):
    """rich reads ``[x]`` as markup: it dropped it from the header (and ``[/x]`` raised)."""
    for name in ("data[x]", "data[/x]"):
        copy = tmp_path / name
        shutil.copytree(synthetic_shards, copy)
        result = _run("info", copy)
        assert result.exit_code == 0, (result.output, result.exception)
        assert str(copy) in result.stdout, result.stdout


def test_info_is_one_library_call_printing_the_commands_bytes(synthetic_shards, tmp_path):
    """`goatdna info` only builds a `DatasetInfoRequest`: `describe_dataset` yields what the
    command prints, in its order, so a failed --verify comes after the tables, as before."""
    from goatdna.data_prep.dataset_info import DatasetInfoRequest, describe_dataset
    from goatdna.errors import GoatDNAError

    res = _run("info", synthetic_shards, "--verify", "--max-records", "2")
    assert res.exit_code == 0, res.output
    parts = list(describe_dataset(DatasetInfoRequest(synthetic_shards, True, 2)))
    assert printed(*parts, width=160) == res.stdout
    assert parts[-1] == "verified: all 12 records match their sha256"
    copy = tmp_path / "copy"
    shutil.copytree(synthetic_shards, copy)
    with open(copy / "test.bin", "ab") as handle:
        handle.write(b"\0")
    shown = []
    with pytest.raises(GoatDNAError, match="the manifest says"):
        for part in describe_dataset(DatasetInfoRequest(copy, verify=True)):
            shown.append(part)
    bad = _run("info", copy, "--verify")
    assert bad.exit_code == 2 and len(shown) == 3  # the source line, the records, the splits
    assert printed(*shown, width=160) == bad.stdout
