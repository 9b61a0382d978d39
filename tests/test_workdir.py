"""`goatdna.workdir`, the one resumable-work engine, and the guarantees the commands get from it.

The engine alone: a state checked key by key on resume, checksummed units, folders without
goatdna state never deleted. Through ``score-variants``: an occupied ``--out`` is refused without
``--force``, a second run on the same ``--out`` is refused with the holder's pid, a damaged chunk
is redone (saying so) and ``--resume`` with a changed input names it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from helpers import assert_one_error_line, invoke, tiny_config

from goatdna.checkpoint import save_checkpoint
from goatdna.configfile import to_dict
from goatdna.errors import GoatDNAError
from goatdna.locking import folder_lock
from goatdna.model import DNADecoder
from goatdna.workdir import (
    OutputFolder,
    WorkDir,
    claim_output,
    claim_output_folder,
    decode_unit,
    encode_unit,
    input_stamp,
)

pytestmark = pytest.mark.usefixtures("one_thread")

CONTIG = "ACGTTGCAAGGCTTACCGATAGCTAGGATCCAGTAACGTACGTTAGCTAGGCATCGATCGGATCCTAGCATGCAAGT"


# ------------------------------------------------------------------------------ the engine
def test_state_is_checked_key_by_key_and_no_state_is_said(tmp_path: Path) -> None:
    folder = tmp_path / ".out.work"
    with pytest.raises(GoatDNAError, match="--resume: no interrupted demo-cmd run"):
        WorkDir(folder, "demo-cmd", {"a": 1, "b": [1, 2]}).open(resume=True)  # no state at all
    assert not folder.exists()
    WorkDir(folder, "demo-cmd", {"a": 1, "b": [1, 2]}).open(resume=False)
    with pytest.raises(GoatDNAError, match="pass --resume to continue it"):
        WorkDir(folder, "demo-cmd", {"a": 1, "b": [1, 2]}).open(resume=False)
    with pytest.raises(GoatDNAError, match=r"\(b differ\)"):
        WorkDir(folder, "demo-cmd", {"a": 1, "b": [1, 3]}).open(resume=True)
    with pytest.raises(GoatDNAError, match="not other-cmd's"):
        WorkDir(folder, "other-cmd", {"a": 1, "b": [1, 2]}).open(resume=True)
    WorkDir(folder, "demo-cmd", {"a": 1, "b": [1, 2]}).open(resume=True)  # the same: continues
    WorkDir(folder, "demo-cmd", {"a": 2}).open(resume=False, force=True)  # --force: starts over
    assert "unit" not in " ".join(p.name for p in folder.iterdir())


def test_a_new_folder_appears_whole_and_a_killed_setup_is_cleared(tmp_path: Path) -> None:
    folder = tmp_path / ".out.work"

    def killed(building: Path) -> None:
        (building / "big.partial").write_bytes(b"half")
        raise KeyboardInterrupt  # a kill while the command fills its new folder

    with pytest.raises(KeyboardInterrupt):
        WorkDir(folder, "demo-cmd", {"a": 1}).open(resume=False, setup=killed)
    assert not folder.exists()  # never a folder that --resume could take for a set-up one
    with pytest.raises(GoatDNAError, match="no interrupted demo-cmd run"):
        WorkDir(folder, "demo-cmd", {"a": 1}).open(resume=True)
    seen: list[str] = []
    WorkDir(folder, "demo-cmd", {"a": 1}).open(
        resume=False, setup=lambda b: seen.extend(p.name for p in b.iterdir())
    )
    assert seen == ["state.json"]  # setup sees a folder holding only its state
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.work"]  # the stale one went


def test_an_output_that_is_an_input_is_always_refused(tmp_path: Path) -> None:
    table = tmp_path / "x.parquet"
    table.write_bytes(b"data")
    for force in (False, True):
        with pytest.raises(GoatDNAError, match="is also an input of this run"):
            claim_output([tmp_path / "." / "x.parquet"], force, inputs=[None, table])
    assert table.read_bytes() == b"data"


def test_claim_output_folder_is_the_one_rule_for_a_replaced_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def ours(entry: Path) -> bool:
        return entry.name in {"a.txt", "b"}

    def claim(path: Path, force: bool, inputs: list[Path] | None = None) -> OutputFolder:
        return claim_output_folder(path, force, owns=ours, what="thing", inputs=inputs or [])

    out = tmp_path / "proj"
    assert claim(out, False) == OutputFolder(out, earlier=False)  # nothing there yet
    out.mkdir()
    assert claim(out, False).earlier  # an empty folder holds nothing of anyone's
    (out / "a.txt").write_text("earlier")
    (out / "b").mkdir()
    with pytest.raises(GoatDNAError, match="exists; pass --force"):
        claim(out, False)
    assert claim(out, True).earlier  # only what the command writes: --force may replace it
    (out / "attr.npz").write_text("input")
    for force in (False, True):  # the folder is, or holds, an input: never, --force or not
        with pytest.raises(GoatDNAError, match=r"holds .*attr.npz, an input of this run"):
            claim(out, force, [tmp_path / "x.npz", out / "attr.npz"])
        with pytest.raises(GoatDNAError, match="is also an input of this run"):
            claim(out, force, [out])
    with pytest.raises(GoatDNAError, match=r"does not write \(attr.npz\)"):
        claim(out, True)  # a file goatdna did not write: never deleted
    monkeypatch.chdir(out)
    for here in (Path("."), Path(".."), out):  # the current folder, or one above it
        with pytest.raises(GoatDNAError, match="is the current folder or holds it"):
            claim(here, True)
    assert sorted(p.name for p in out.iterdir()) == ["a.txt", "attr.npz", "b"]


def test_a_folder_without_goatdna_state_is_never_deleted(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    work = WorkDir(folder, "demo-cmd", {})
    for resume, force in ((False, False), (False, True), (True, False), (True, True)):
        with pytest.raises(GoatDNAError, match="holds no goatdna demo-cmd state"):
            work.open(resume=resume, force=force)
    with pytest.raises(GoatDNAError, match="not deleting it"):
        work.remove()
    assert (folder / "notes.txt").read_text() == "keep me"


def test_units_carry_a_checksum_and_a_damaged_one_is_redone_or_refused(tmp_path: Path) -> None:
    assert decode_unit(encode_unit(b"payload")) == b"payload"
    assert decode_unit(b"payload") is None
    work = WorkDir(tmp_path / "w", "demo-cmd", {})
    work.open(resume=False)
    for i in range(3):
        work.save(i, f"unit {i}".encode())
    path = work.unit_path(1)
    data = bytearray(path.read_bytes())
    data[-1] ^= 1  # one flipped bit in the payload
    path.write_bytes(bytes(data))
    with pytest.raises(GoatDNAError, match=r"damaged unit file .*rerun with --resume") as err:
        work.load(1)
    assert "\n" not in str(err.value)
    said: list[str] = []
    assert work.pending(range(4), said.append) == ([0, 2], [1, 3])
    assert len(said) == 1 and path.name in said[0] and "computing it again" in said[0]
    assert not path.exists()
    with pytest.raises(GoatDNAError, match="was not computed"):
        work.load(1)


def test_claim_output_and_input_stamp(tmp_path: Path) -> None:
    out = tmp_path / "o.tsv"
    claim_output([out], force=False)  # nothing there yet
    out.write_text("user's file")
    with pytest.raises(GoatDNAError, match="exists; pass --force"):
        claim_output([out], force=False)
    claim_output([out], force=True)
    before = input_stamp(out)
    assert before == input_stamp(out) and before.size == len("user's file")
    out.write_text("user's file, edited")
    assert input_stamp(out) != before
    with pytest.raises(GoatDNAError, match="cannot read"):
        input_stamp(tmp_path / "absent")


# ------------------------------------------------------------------------------ score-variants
@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("workdir_inputs")
    torch.manual_seed(3)
    config = tiny_config()
    ckpt = save_checkpoint(folder / "m.ckpt", DNADecoder(config), {"model": to_dict(config)})
    fasta = folder / "ref.fa"
    fasta.write_text(f">chr1\n{CONTIG}\n")
    rows = [
        f"chr1\t{pos}\tv{pos}\t{CONTIG[pos - 1]}\t{'A' if CONTIG[pos - 1] != 'A' else 'C'}\t.\t.\t."
        for pos in range(5, 70, 4)
    ]
    vcf = folder / "v.vcf"
    header = ["##fileformat=VCFv4.2", f"##contig=<ID=chr1,length={len(CONTIG)}>",
              "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]  # fmt: skip
    vcf.write_text("\n".join(header + rows) + "\n")
    return {"checkpoint": ckpt, "fasta": fasta, "vcf": vcf}


def _args(inputs: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return ["score-variants", "-c", str(inputs["checkpoint"]), "--fasta", str(inputs["fasta"]),
            "--vcf", str(inputs["vcf"]), "--out", str(out), "--window", "12",
            "--chunk-size", "4", *extra]  # fmt: skip


def test_score_variants_refuses_an_occupied_out_without_force(inputs, tmp_path: Path) -> None:
    out = tmp_path / "scores.tsv"
    out.write_text("a user's file\n")
    assert_one_error_line(invoke(_args(inputs, out)), "exists; pass --force")
    assert out.read_text() == "a user's file\n"
    res = invoke(_args(inputs, out, "--force"))
    assert res.exit_code == 0, res.output + str(res.exception)
    assert out.read_text().startswith("chrom")


def test_score_variants_refuses_a_second_run_on_the_same_out(inputs, tmp_path: Path) -> None:
    out = tmp_path / "scores.tsv"
    with folder_lock(out, "--out"):  # this process plays the first run
        assert_one_error_line(invoke(_args(inputs, out)), f"pid {os.getpid()}")
    assert not out.exists()
    assert invoke(_args(inputs, out)).exit_code == 0  # the lock is gone with it


def test_score_variants_damaged_chunk_is_redone_and_changed_input_named(
    inputs, tmp_path: Path, monkeypatch
) -> None:
    import goatdna.inference.variant_run as variant_run

    whole, cut = tmp_path / "whole.tsv", tmp_path / "cut.tsv"
    assert invoke(_args(inputs, whole)).exit_code == 0
    save = variant_run._save_chunk
    saved: list[int] = []

    def dies_after_three(work, chunk, scores, windows):
        if len(saved) == 3:
            raise KeyboardInterrupt
        save(work, chunk, scores, windows)
        saved.append(chunk)

    monkeypatch.setattr(variant_run, "_save_chunk", dies_after_three)
    assert invoke(_args(inputs, cut)).exit_code != 0
    monkeypatch.setattr(variant_run, "_save_chunk", save)
    work = variant_run.work_dir_for(cut)
    damaged = work / "chunk-000001.npz"
    damaged.write_bytes(damaged.read_bytes()[:-7])  # cut short by a bad disk
    changed = tmp_path / "other.vcf"
    changed.write_text(inputs["vcf"].read_text())
    args = _args({**inputs, "vcf": changed}, cut, "--resume")
    assert_one_error_line(invoke(args), "(variants differ)")
    res = invoke(_args(inputs, cut, "--resume"))
    assert res.exit_code == 0, res.output + str(res.exception)
    assert "chunk-000001.npz: damaged" in res.stdout and "resumed: 2 chunk(s)" in res.stdout
    assert cut.read_bytes() == whole.read_bytes()
    assert not work.exists()


# ------------------------------------------------------------------------------ score-track
def _track_args(inputs: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return ["score-track", "-c", str(inputs["checkpoint"]), "-f", str(inputs["fasta"]),
            "-r", "chr1:1-60", "--context", "16", "--stride", "8", "--accelerator", "cpu",
            "-o", str(out), *extra]  # fmt: skip


def test_score_track_refuses_an_occupied_out_and_a_second_run(inputs, tmp_path: Path) -> None:
    out = tmp_path / "t.bedGraph"
    out.write_text("a user's track\n")
    assert_one_error_line(invoke(_track_args(inputs, out)), "exists; pass --force")
    assert out.read_text() == "a user's track\n"
    res = invoke(_track_args(inputs, out, "--force"))
    assert res.exit_code == 0, res.output + str(res.exception)
    assert out.read_text() != "a user's track\n"
    other = tmp_path / "u.bedGraph"
    with folder_lock(other, "--out"):  # this process plays the first run
        res = invoke(_track_args(inputs, other))
    # score-track reports on stderr: the refusal is its one error line, after the header
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and f"pid {os.getpid()}" in errors[0], res.stderr
    assert not other.exists()


# ------------------------------------------------------------------------------ embed
def test_embed_interrupted_then_resumed_gives_the_same_vectors(
    inputs, tmp_path: Path, monkeypatch
) -> None:
    import numpy as np

    import goatdna.inference.embed_run as embed_run

    sequences = tmp_path / "s.fa"
    sequences.write_text("".join(f">s{i}\n{CONTIG[i : i + 20 + i]}\n" for i in range(6)))
    monkeypatch.setattr(embed_run, "UNIT_GROUPS", 1)  # one record per unit: 6 units
    args = ["embed", "-c", str(inputs["checkpoint"]), "--sequences", str(sequences),
            "--batch-size", "1", "--strands", "both"]  # fmt: skip
    whole, cut = tmp_path / "whole.npz", tmp_path / "cut.npz"
    assert invoke([*args, "-o", str(whole)]).exit_code == 0
    save = embed_run._save_unit
    saved: list[int] = []

    def dies_after_two(work, unit, vectors):
        if len(saved) == 2:
            raise KeyboardInterrupt
        save(work, unit, vectors)
        saved.append(unit)

    monkeypatch.setattr(embed_run, "_save_unit", dies_after_two)
    assert invoke([*args, "-o", str(cut)]).exit_code != 0 and not cut.exists()
    monkeypatch.setattr(embed_run, "_save_unit", save)
    assert_one_error_line(invoke([*args, "-o", str(cut)]), "pass --resume to continue it")
    assert_one_error_line(
        invoke([*args, "-o", str(cut), "--resume", "--strands", "forward"]),
        "(options differ)",
    )
    res = invoke([*args, "-o", str(cut), "--resume"])
    assert res.exit_code == 0, res.output + str(res.exception)
    with np.load(whole) as a, np.load(cut) as b:
        assert a.files == b.files
        for name in a.files:
            assert a[name].tobytes() == b[name].tobytes(), name
    assert not embed_run.work_dir_for(cut).exists()


# ------------------------------------------------------------------------------ every command
def _command(name: str, inputs: dict[str, Path], out: Path) -> list[str]:
    """A small run of each command on the engine, writing ``out``."""
    ckpt, fasta = str(inputs["checkpoint"]), str(inputs["fasta"])
    if name == "score-variants":
        return _args(inputs, out)
    if name == "score-track":
        return ["score-track", "-c", ckpt, "-f", fasta, "-r", "chr1:1-40", "--context", "16",
                "-o", str(out)]  # fmt: skip
    return ["embed", "-c", ckpt, "--sequences", str(inputs["fasta"]), "-o", str(out)]


@pytest.mark.parametrize(
    ("name", "suffix"),
    [("score-variants", ".tsv"), ("score-track", ".bedGraph"), ("embed", ".npz")],
)
def test_every_command_on_the_engine_keeps_the_output_contract(
    inputs, tmp_path: Path, name: str, suffix: str
) -> None:
    """An occupied --out needs --force, a second run on the same --out is refused with the
    holder's pid, --resume with nothing interrupted is refused, an input is never the output."""
    out = tmp_path / f"out{suffix}"
    with folder_lock(out, "--out"):  # this process plays a first run still going
        assert_one_error_line(invoke(_command(name, inputs, out)), f"pid {os.getpid()}")
    assert_one_error_line(invoke([*_command(name, inputs, out), "--resume"]), "no interrupted")
    res = invoke(_command(name, inputs, out))
    assert res.exit_code == 0, res.output + str(res.exception)
    written = out.read_bytes()
    assert_one_error_line(invoke(_command(name, inputs, out)), "exists; pass --force")
    assert out.read_bytes() == written
    res = invoke([*_command(name, inputs, out), "--force"])
    assert res.exit_code == 0, res.output + str(res.exception)
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]  # no work folder, no lock
    # --out naming the file being read (the VCF, the FASTA, the sequences) is refused, --force
    # or not, before anything is read or written
    key = "vcf" if name == "score-variants" else "fasta"
    victim = tmp_path / f"input{suffix}"
    victim.write_bytes(inputs[key].read_bytes())
    as_input = _command(name, {**inputs, key: victim}, victim)
    assert_one_error_line(invoke([*as_input, "--force"]), "is also an input of this run")
    assert victim.read_bytes() == inputs[key].read_bytes()


@pytest.mark.parametrize(
    ("name", "suffix", "module", "saver"),
    [("score-track", ".bedGraph", "goatdna.inference.tracks", "save_arrays"),
     ("embed", ".npz", "goatdna.inference.embed_run", "_save_unit")],
)  # fmt: skip
def test_ctrl_c_ends_in_one_interrupted_line_and_resume_finishes_the_bytes(
    inputs, tmp_path: Path, monkeypatch, name: str, suffix: str, module: str, saver: str
) -> None:
    import importlib

    target = importlib.import_module(module)
    whole, cut = tmp_path / f"whole{suffix}", tmp_path / f"cut{suffix}"
    args = _command(name, inputs, whole)
    if name == "embed":  # 16 records per unit at batch size 1: 40 records make 3 units
        inputs = {**inputs, "fasta": tmp_path / "many.fa"}
        inputs["fasta"].write_text("".join(f">s{i}\n{CONTIG[i : i + 30]}\n" for i in range(40)))
        args = [*_command(name, inputs, whole), "--batch-size", "1"]
    assert invoke(args).exit_code == 0
    save = getattr(target, saver)
    saved: list[int] = []

    finished = 0 if name == "score-track" else 1  # the track of CONTIG is one block

    def stopped_after_one(*a, **k):
        if len(saved) == finished:
            raise KeyboardInterrupt  # what Python makes of Ctrl-C
        save(*a, **k)
        saved.append(1)

    monkeypatch.setattr(target, saver, stopped_after_one)
    cut_args = [cut if a == str(whole) else a for a in args]
    cut_args = [str(a) for a in cut_args]
    res = invoke(cut_args)
    assert res.exit_code == 130, res.output + repr(res.exception)
    last = [line for line in res.stderr.splitlines() if line.strip()][-1]
    assert last.startswith(f"interrupted: SIGINT: {name} stopped") and "--resume" in last, last
    monkeypatch.setattr(target, saver, save)
    res = invoke([*cut_args, "--resume"])
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert cut.read_bytes() == whole.read_bytes()


def test_a_full_disk_while_saving_a_unit_is_one_line_that_says_resume(
    inputs, tmp_path: Path, monkeypatch
) -> None:
    """score-track's blocks (any engine unit): the disk fills while a unit is saved: one
    `disk full` line naming it and `--resume`, no temporary left, and the resumed track is the
    bytes of an uninterrupted run."""
    import errno

    import goatdna.atomic

    whole, cut = tmp_path / "whole.bedGraph", tmp_path / "cut.bedGraph"
    assert invoke(_command("score-track", inputs, whole)).exit_code == 0
    real_open = open

    def full_for_units(path, mode="r", *args, **kwargs):
        handle = real_open(path, mode, *args, **kwargs)
        if "w" in mode and ".block-" in Path(path).name:  # a unit's temporary name

            def write(_data):
                raise OSError(errno.ENOSPC, "No space left on device", str(path))

            handle.write = write
        return handle

    monkeypatch.setattr(goatdna.atomic, "open", full_for_units, raising=False)
    res = invoke(_command("score-track", inputs, cut))
    assert res.exit_code == 2, res.output + repr(res.exception)
    last = [line for line in res.stderr.splitlines() if line.strip()][-1]
    assert last.startswith("error: disk full while writing") and "--resume" in last, last
    work = tmp_path / ".cut.bedGraph.goatdna-work"
    assert work.is_dir() and not [p for p in work.iterdir() if p.name.endswith(".tmp")]
    monkeypatch.undo()
    res = invoke([*_command("score-track", inputs, cut), "--resume"])
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert cut.read_bytes() == whole.read_bytes()


# ------------------------------------------------------------------------------ version stamp
def test_resume_across_goatdna_versions_is_refused(tmp_path: Path) -> None:
    """The work folder records the goatdna version that started it; `--resume` by another
    version (or of a folder from before the stamp) is one line naming both, whatever command."""
    import json

    from goatdna import __version__

    work = WorkDir(tmp_path / ".w", "demo", {"inputs": 1})
    work.open(resume=False)
    work.open(resume=True)  # the same version resumes
    document = json.loads((work.dir / "state.json").read_text())
    assert document["goatdna_version"] == __version__
    for stamped in ("0.0.1", None):
        if stamped is None:
            del document["goatdna_version"]
        else:
            document["goatdna_version"] = stamped
        (work.dir / "state.json").write_text(json.dumps(document))
        with pytest.raises(GoatDNAError) as err:
            work.open(resume=True)
        assert __version__ in str(err.value) and "--force" in str(err.value), err.value
        assert (stamped or "no version recorded") in str(err.value), err.value
    work.open(resume=False, force=True)  # starting over is allowed


def _classifier(folder: Path) -> Path:
    from goatdna.model.classifier import SequenceTaskConfig, SequenceTaskModel

    torch.manual_seed(4)
    config, task = tiny_config(), SequenceTaskConfig("classification", ("neg", "pos"))
    state = SequenceTaskModel(DNADecoder(config), task).state_dict()
    path = folder / "cls.ckpt"
    run_config = {"model": to_dict(config), "head": to_dict(task)}
    torch.save({"state_dict": state, "hyper_parameters": {"config": run_config}}, path)
    return path


RESUMABLE = {
    "attribute": lambda i, out: ["attribute", "-c", i["classifier"], "--sequences", i["fasta"],
                                 "--method", "saliency", "-o", out],
    "mutagenesis": lambda i, out: ["mutagenesis", "-c", i["checkpoint"], "--fasta", i["fasta"],
                                   "--region", "chr1:11-20", "--window", "12", "-o", out],
    "predict": lambda i, out: ["predict", "-c", i["classifier"], "--sequences", i["fasta"],
                               "-o", out],
    "score-variants": lambda i, out: _args(i, out),
    "score-track": lambda i, out: _command("score-track", i, out),
    "embed": lambda i, out: _command("embed", i, out),
}  # fmt: skip
SUFFIX = {"attribute": ".npz", "mutagenesis": ".tsv", "predict": ".csv",
          "score-variants": ".tsv", "score-track": ".bedGraph", "embed": ".npz"}  # fmt: skip


@pytest.mark.parametrize("name", sorted(RESUMABLE))
def test_every_resumable_command_refuses_work_of_another_version(
    inputs, tmp_path: Path, monkeypatch, name: str
) -> None:
    """A work folder left by a run (kept here by making its removal a no-op) resumes with this
    goatdna, and is refused in one line once its stamp names another version: mutagenesis and
    score-variants refused it before with "goatdna_version differ", the others resumed it."""
    import json

    inputs = {**inputs, "classifier": _classifier(tmp_path)}
    out = tmp_path / f"out{SUFFIX[name]}"
    args = [str(a) for a in RESUMABLE[name](inputs, out)]
    monkeypatch.setattr(WorkDir, "remove", lambda self: None)
    res = invoke(args)
    assert res.exit_code == 0, res.output + repr(res.exception)
    [work] = [p for p in tmp_path.iterdir() if p.name.endswith(".goatdna-work")]
    out.unlink() if out.is_file() else None
    res = invoke([*args, "--resume"])  # the same version: the kept work resumes
    assert res.exit_code == 0, res.output + repr(res.exception)
    out.unlink() if out.is_file() else None
    document = json.loads((work / "state.json").read_text())
    document["goatdna_version"] = "0.0.1"
    (work / "state.json").write_text(json.dumps(document))
    assert_one_error_line(invoke([*args, "--resume"]), "goatdna 0.0.1", str(work))
