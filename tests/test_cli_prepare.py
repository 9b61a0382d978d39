"""`goatdna prepare` under hostile conditions: a concurrent writer, a full disk, a killed parent,
bad output paths, a malformed split BED, an index made for a rejected input."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from helpers import invoke

from goatdna import faults
from goatdna.data_prep import PrepareOptions, SyntheticGenomeConfig, write_synthetic_fasta
from goatdna.data_prep.prepare import prepare_genome
from goatdna.errors import GoatDNAError
from goatdna.locking import folder_lock, lock_path

OUTPUT_FILES = ("train.bin", "val.bin", "test.bin", "manifest.json")


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rel_prepare") / "genome.fa"
    return write_synthetic_fasta(path, SyntheticGenomeConfig(total_length=120_000, n_contigs=4))


@pytest.fixture(scope="module")
def reference(source, tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("rel_ref") / "out"
    prepare_genome(source, out, PrepareOptions(workers=1, progress=False))
    return {name: (out / name).read_bytes() for name in OUTPUT_FILES}


def _cli(*args):
    return invoke(args)


def _one_error(result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_second_prepare_into_a_locked_folder_fails_at_once_naming_the_holder(source, tmp_path):
    out = tmp_path / "out"
    with folder_lock(out, "--out"):
        started = time.perf_counter()
        line = _one_error(_cli("prepare", source, "--out", out, "--workers", "1"))
        assert time.perf_counter() - started < 5
    assert "--out" in line and "in use by another goatdna process" in line
    assert f"pid {os.getpid()}" in line
    assert not out.exists()  # the refused run wrote nothing
    assert not lock_path(out).exists()  # released and removed by its holder
    assert _cli("prepare", source, "--out", out, "--workers", "1").exit_code == 0


def test_disk_full_mid_run_is_one_line_removes_temp_files_and_resume_is_identical(
    source, reference, tmp_path, monkeypatch
):
    out = tmp_path / "out"
    real_pwrite = os.pwrite
    written = {"bases": 0}

    def filling_pwrite(fd, data, offset):
        if written["bases"] > 50_000:
            raise OSError(errno.ENOSPC, "No space left on device")
        written["bases"] += len(data)
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", filling_pwrite)
    options = PrepareOptions(workers=1, progress=False, chunk_bases=10_000)
    with pytest.raises(GoatDNAError, match="disk full while writing") as caught:
        prepare_genome(source, out, options)
    message = str(caught.value)
    assert ".partial" in message and "--resume" in message and "free" in message
    monkeypatch.setattr(os, "pwrite", real_pwrite)

    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    assert not any((out / name).exists() for name in OUTPUT_FILES)
    assert list((out / ".prepare").glob("record-*.json"))  # finished records are kept

    resumed = _cli("prepare", source, "--out", out, "--resume", "--workers", "1")
    assert resumed.exit_code == 0, resumed.output
    assert {name: (out / name).read_bytes() for name in OUTPUT_FILES} == reference


def test_disk_too_small_fails_before_any_work_with_the_size_needed(source, tmp_path, monkeypatch):
    def no_space(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    line = _one_error(_cli("prepare", source, "--out", tmp_path / "out", "--workers", "1"))
    assert "disk full while writing" in line and "it needs about" in line
    assert not (tmp_path / "out").exists()


def test_workers_zero_is_rejected(source, tmp_path):
    line = _one_error(_cli("prepare", source, "--out", tmp_path / "out", "--workers", "0"))
    assert "--workers" in line and ">= 1" in line
    assert not (tmp_path / "out").exists()


def test_out_below_a_file_is_one_line(source, tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    line = _one_error(_cli("prepare", source, "--out", blocker / "out"))
    assert "--out" in line and "is a file" in line
    line = _one_error(_cli("prepare", source, "--out", blocker))
    assert "is a file, not a folder" in line


@pytest.mark.skipif(
    not Path("/sys").is_dir(), reason="needs Linux /sys (unwritable, even for root)"
)
def test_out_in_an_unwritable_folder_is_one_line(source):
    line = _one_error(_cli("prepare", source, "--out", "/sys/goatdna-test-out"))
    assert "--out" in line and "cannot write" in line


def test_split_bed_with_a_bad_first_line_is_an_error_not_a_header(source, tmp_path):
    bed = tmp_path / "splits.bed"
    bed.write_text("syn1\tstart\t1000\ttrain\nsyn1\t1000\t2000\tval\n")
    line = _one_error(_cli("prepare", source, "--out", tmp_path / "out", "--split-bed", bed))
    assert "line 1" in line and "integers" in line
    bed.write_text("# comment\ntrack name=x\nsyn1\t0\t1000\ttrain\nsyn1\t1000\t2000\tval\n")
    assert _cli("prepare", source, "--out", tmp_path / "ok", "--split-bed", bed).exit_code == 0


def test_index_made_for_a_rejected_input_is_removed(tmp_path):
    fasta = tmp_path / "bad.fa"
    fasta.write_text(">chr1\nACGTACGTAC\nACGT!CGTAC\n")
    line = _one_error(_cli("prepare", fasta, "--out", tmp_path / "out"))
    assert "chr1" in line
    assert not Path(f"{fasta}.fai").exists()
    assert not (tmp_path / "out").exists()
    # an index the user already had stays
    good = tmp_path / "good.fa"
    good.write_text(">chr1\nACGTACGTAC\n")
    import pyfaidx

    pyfaidx.Faidx(str(good)).close()
    fai_before = Path(f"{good}.fai").read_bytes()
    _cli("prepare", good, "--out", tmp_path / "out2", "--val-fraction", "0.5")
    assert Path(f"{good}.fai").read_bytes() == fai_before


def _pids_with_marker(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_prepare_with_workers_leaves_no_worker_alive(tmp_path):
    source = write_synthetic_fasta(
        tmp_path / "g.fa", SyntheticGenomeConfig(total_length=400_000, n_contigs=8)
    )
    marker = f"GOATDNA_TEST_MARKER={uuid.uuid4().hex}"
    env = {
        **os.environ,
        **faults.arm("prepare.record_journaled", 2),
        marker.split("=")[0]: marker.split("=")[1],
    }
    cmd = [sys.executable, "-m", "goatdna.cli.app", "prepare", str(source), "--out"]
    proc = subprocess.run(
        [*cmd, str(tmp_path / "out"), "--workers", "2"], env=env, capture_output=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    deadline = time.monotonic() + 10
    while _pids_with_marker(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _pids_with_marker(marker)
    for pid in alive:  # clean up before failing
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"worker processes outlived their killed parent: {alive}"


@pytest.mark.slow
def test_lock_held_by_another_process_names_it_and_dies_with_it(source, tmp_path):
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from goatdna.locking import folder_lock\n"
         f"with folder_lock({str(out)!r}, '--out'):\n"
         "    print('held', flush=True)\n"
         "    time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        line = _one_error(_cli("prepare", source, "--out", out, "--workers", "1"))
        assert f"pid {holder.pid}" in line
    finally:
        holder.kill()  # SIGKILL: the kernel releases the lock; a stale lock file blocks nobody
        holder.wait()
    assert lock_path(out).exists()
    assert _cli("prepare", source, "--out", out, "--workers", "1").exit_code == 0


def test_disk_full_while_indexing_is_one_line_and_leaves_nothing(source, tmp_path, monkeypatch):
    import goatdna.data_prep.prepare as prepare_module

    def full(path, cache_dir, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(cache_dir / "genome.fa"))

    monkeypatch.setattr(prepare_module, "open_fasta", full)
    line = _one_error(_cli("prepare", source, "--out", tmp_path / "out", "--workers", "1"))
    assert "disk full while writing" in line and "cache" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_two_prepares_into_one_out_at_once_leave_one_valid_dataset(tmp_path):
    inputs = [
        write_synthetic_fasta(
            tmp_path / f"g{seed}.fa",
            SyntheticGenomeConfig(total_length=1_500_000, n_contigs=3, seed=seed),
        )
        for seed in (1, 2)
    ]
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "goatdna.cli.app", "prepare"]
    procs = [
        subprocess.Popen([*cmd, str(fa), "--out", str(out), "--workers", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for fa in inputs
    ]  # fmt: skip
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    loser = next(err for code, err in results if code == 2)
    # whichever came second: refused while the first held the lock, or after it had finished
    assert "in use by another goatdna process" in loser or "different dataset" in loser, loser
    assert _cli("info", out, "--verify").exit_code == 0


def test_prepare_options_are_the_library_flags_with_the_fields_defaults() -> None:
    """`goatdna prepare`'s flags that set `PrepareOptions` are `PREPARE_FLAGS` (one declaration,
    next to the dataclass), each defaulting to its field's default (issue 42.3)."""
    import inspect
    import typing

    from goatdna.cli.prepare import prepare
    from goatdna.data_prep.options import PREPARE_FLAGS

    parameters = inspect.signature(prepare).parameters
    for flag in PREPARE_FLAGS:
        parameter = parameters[flag.name]
        assert parameter.default == getattr(PrepareOptions(), flag.key), flag.name
        assert typing.get_args(parameter.annotation)[1].help == flag.help_text, flag.name
    import typer.main

    from goatdna.cli.app import app

    click_command = typer.main.get_command(app).commands["prepare"]  # type: ignore[attr-defined]
    workers = next(p for p in click_command.params if p.name == "workers")
    assert workers.opts == ["--workers", "-j"]


def test_prepare_reads_comma_separated_flags_as_lists(source, tmp_path, monkeypatch) -> None:
    seen: list[PrepareOptions] = []

    class Stop(Exception):
        pass

    def record(fasta, out, options, synthetic, reporter):
        seen.append(options)
        raise Stop

    monkeypatch.setattr("goatdna.data_prep.prepare.prepare_dataset", record)
    result = _cli("prepare", source, "-o", tmp_path / "o", "--contigs", "chr1, chr2", "--exclude-contigs",
                  "", "--val-fraction", "0.1", "-j", "2")  # fmt: skip
    assert isinstance(result.exception, Stop), result.output
    assert seen[0] == PrepareOptions(
        contigs=["chr1", "chr2"], exclude_contigs=[], val_fraction=0.1, workers=2
    )
