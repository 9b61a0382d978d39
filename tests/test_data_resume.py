"""Interrupted runs: a SIGKILLed `goatdna prepare` finished with --resume equals an
uninterrupted run byte for byte; parallel workers give the same bytes as one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import invoke

from goatdna import faults
from goatdna.data_prep import SyntheticGenomeConfig, write_synthetic_fasta

OUTPUT_FILES = ("train.bin", "val.bin", "test.bin", "manifest.json")


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("resume") / "genome.fa"
    return write_synthetic_fasta(path, SyntheticGenomeConfig(total_length=240_000, n_contigs=6))


def _cli(*args) -> object:
    return invoke(args)


def _files(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in OUTPUT_FILES}


@pytest.fixture(scope="module")
def reference(source, tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("ref") / "out"
    result = _cli("prepare", source, "--out", out, "--workers", "1")
    assert result.exit_code == 0, result.output
    return _files(out)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("point", "journaled"),
    [
        ("prepare.record_journaled", 7),  # killed right after the 7th record was journaled
        ("prepare.bases_written", 8),  # killed once the 9th record's first base is written
    ],
)
def test_killed_subprocess_then_resume_is_byte_identical(
    source, reference, tmp_path, point, journaled
):
    out = tmp_path / "out"
    count = journaled
    if point == "prepare.bases_written":  # the first 8 records' bases, + 1 of the 9th
        records = json.loads(reference["manifest.json"])["records"]
        count = sum(r["length"] for r in records[:journaled]) + 1
    env = {**os.environ, **faults.arm(point, count)}
    cmd = [
        sys.executable,
        "-m",
        "goatdna.cli.app",
        "prepare",
        str(source),
        "--out",
        str(out),
        "--workers",
        "1",
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    # killed mid-run: no final file exists, only some of the 18 records are journaled as done
    assert not any((out / name).exists() for name in OUTPUT_FILES)
    assert len(list((out / ".prepare").glob("record-*.json"))) == journaled

    # without --resume the directory is refused, with other options too
    refused = _cli("prepare", source, "--out", out)
    assert refused.exit_code == 2 and "--resume" in refused.stderr
    other = _cli("prepare", source, "--out", out, "--resume", "--val-fraction", "0.2")
    assert other.exit_code == 2 and "(records differ)" in other.stderr

    resumed = _cli("prepare", source, "--out", out, "--resume", "--workers", "1")
    assert resumed.exit_code == 0, resumed.output
    assert "resuming" in resumed.stderr
    assert _files(out) == reference
    assert not (out / ".prepare").exists()


def test_workers_give_identical_bytes(source, reference, tmp_path):
    out = tmp_path / "out"
    result = _cli("prepare", source, "--out", out, "--workers", "2")
    assert result.exit_code == 0, result.output
    assert _files(out) == reference


def test_force_restarts_an_interrupted_run(source, reference, tmp_path):
    out = tmp_path / "out"
    (out / ".prepare").mkdir(parents=True)
    (out / ".prepare" / "plan.json").write_text("{}")
    result = _cli("prepare", source, "--out", out, "--force", "--workers", "1")
    assert result.exit_code == 0, result.output
    assert _files(out) == reference


def test_resume_redoes_a_damaged_record_and_refuses_nothing_to_resume(
    source, reference, tmp_path, monkeypatch
):
    """prepare's work folder is the shared engine's: a damaged record unit is named and redone,
    `--resume` with nothing interrupted is refused, a killed set-up leaves nothing in the way."""
    import goatdna.data_prep.prepare as prepare_module

    out = tmp_path / "out"
    nothing = _cli("prepare", source, "--out", out, "--resume")
    assert nothing.exit_code == 2 and "no interrupted prepare run" in nothing.stderr
    assert not out.exists()

    def killed_setup(work, lengths):  # a kill while the split files are being allocated
        (work / "train.bin.partial").write_bytes(b"x")
        raise KeyboardInterrupt

    monkeypatch.setattr(prepare_module, "_allocate_partials", killed_setup)
    assert _cli("prepare", source, "--out", out, "--workers", "1").exit_code != 0
    assert not (out / ".prepare").exists()
    monkeypatch.undo()

    real_save = prepare_module.WorkDir.save
    saved = []

    def save_then_stop(self, index, payload, durable=True):
        real_save(self, index, payload, durable)
        saved.append(index)
        if len(saved) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(prepare_module.WorkDir, "save", save_then_stop)
    assert _cli("prepare", source, "--out", out, "--workers", "1").exit_code != 0
    monkeypatch.undo()
    units = sorted((out / ".prepare").glob("record-*.json"))
    assert len(units) == 3
    units[1].write_bytes(units[1].read_bytes()[:-2])  # a damaged unit file
    resumed = _cli("prepare", source, "--out", out, "--resume", "--workers", "1")
    assert resumed.exit_code == 0, resumed.output
    assert f"{units[1].name}: damaged" in resumed.output
    assert _files(out) == reference
