"""Every command that writes a file or folder, driven onto a full and onto a read-only filesystem.

The contract (`goatdna.atomic.write_error`): a write that fails because the disk is full
(ENOSPC) or the folder is read-only (EROFS) ends in ONE ``error: ...`` line on stderr, no
traceback, exit status 2, and leaves nothing the command wrote behind (no partial output, no
temporary file, no empty folder, no lock file, no work folder). Both filesystems are real
tmpfs mounts (root only; skipped where mounting is refused): a 64 KiB one filled to the last
byte before the command runs, and a read-only one (as root, chmod stops no write; ro does).

Each runs twice: as it is (most commands then stop at their first check: the --out probe, the
lock file's holder line, the free-space estimate of train/finetune/export), and "past the
checks", where those let the command through (a lock file gets the one page its line needs,
the probe and the estimate say nothing), so that its own writers meet ENOSPC or EROFS.

Commands left out, because they write nothing: ``info`` and ``model-info`` print tables only
(``info --verify`` re-hashes and prints); ``generate`` without ``--out`` prints FASTA to stdout.
"""

from __future__ import annotations

import csv
import gzip
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import invoke

pytestmark = pytest.mark.usefixtures("one_thread")

REPO = Path(__file__).resolve().parents[1]
TINY = [  # a 1-layer, 32-base decoder: a train step or a forward pass in milliseconds
    "model.n_layers=1", "model.d_model=32", "model.n_heads=2", "model.mlp_hidden=64",
    "model.goat_modes=2", "model.train_length=32", "data.seq_len=32",
    "data.micro_batch_size=4", "data.val_max_windows=4", "optim.warmup_steps=1",
    "trainer.eval_every=2", "trainer.ckpt_every=2", "trainer.log_every=1",
    "trainer.progress_bar=false", "trainer.max_steps=2",
]  # fmt: skip
SETS = [x for item in TINY for x in ("--set", item)]
Inputs = dict[str, Any]  # the paths of `inputs`, and the name of the FASTA's first contig


# ------------------------------------------------------------------------------ inputs
@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Inputs:
    """Small inputs of every kind, made once: shards and their FASTA, a 2-step run, a probe
    fine-tune, a window task, sequences, variants, a scores table and attributions."""
    import torch

    from goatdna.data_prep import PrepareOptions, SyntheticGenomeConfig, prepare_synthetic
    from goatdna.training import load_run_config, train

    folder = tmp_path_factory.mktemp("write_error_inputs")
    shards = folder / "shards"
    genome = SyntheticGenomeConfig(total_length=120_000, n_contigs=2, seed=0)
    prepare_synthetic(shards, genome, PrepareOptions(workers=1, progress=False))
    fasta = shards / "synthetic.fa"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run = folder / "run"
        train(load_run_config(REPO / "configs" / "goat-tiny.yaml", TINY), shards, run)
    finally:
        torch.set_num_threads(threads)
    lm = run / "checkpoints" / "best.ckpt"
    task = folder / "task"
    _ok(["make-task", "--data", shards, "--out", task, "--label", "gc", "--window", "48",
         "--max-train", "30", "--max-eval", "12"])  # fmt: skip
    ft = folder / "ft"
    _ok(["finetune", "-c", lm, "--train", task / "train.csv", "--val", task / "val.csv",
         "--out", ft, "--no-progress", "--mode", "probe", "--epochs", "1"])  # fmt: skip

    with (task / "test.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))[:6]
    table = folder / "table.csv"
    table.write_text("sequence,label\n" + "".join(f"{r['sequence']},{r['label']}\n" for r in rows))
    seqs = folder / "seqs.fa"
    seqs.write_text("".join(f">s{i}\n{r['sequence'][:24]}\n" for i, r in enumerate(rows[:3])))

    name, bases = _first_record(fasta)
    fasta_gz = folder / "ref.fa.gz"  # plain gzip: decompressed once into a cache folder
    fasta_gz.write_bytes(gzip.compress(fasta.read_bytes(), mtime=0))
    bed = folder / "regions.bed"
    bed.write_text(f"{name}\t100\t148\tr1\n{name}\t300\t340\tr2\n")
    picks = [p for p in range(200, 2000, 90) if bases[p - 1].upper() in "ACGT"][:12]
    alt = {"A": "C", "C": "G", "G": "T", "T": "A"}
    vcf = folder / "v.vcf"
    vcf.write_text(
        "##fileformat=VCFv4.2\n"
        f"##contig=<ID={name},length={len(bases)}>\n"
        "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
        + "".join(
            f"{name}\t{p}\tv{p}\t{bases[p - 1].upper()}\t{alt[bases[p - 1].upper()]}\t.\t.\t.\n"
            for p in picks
        )
    )
    rng = np.random.default_rng(0)
    scores = folder / "scores.tsv"
    lines = ["chrom\tpos\tref\talt\tllr\tstatus\tlabel"]
    for i, p in enumerate(picks * 2):
        ref = bases[p - 1].upper()
        lines.append(f"{name}\t{p + i}\t{ref}\t{alt[ref]}\t{rng.normal():.4f}\tok\t{i % 2}")
    scores.write_text("\n".join(lines) + "\n")

    n, length = 40, 24
    tokens = rng.integers(0, 4, size=(n, length))
    one_hot = np.eye(4, dtype=np.float32)[tokens]
    hypothetical = rng.normal(0, 1, size=(n, length, 4)).astype(np.float32)
    attributions = folder / "attr.npz"
    np.savez(attributions, attributions=hypothetical * one_hot, hypothetical=hypothetical,
             sequences=np.array(["".join("ACGT"[t] for t in row) for row in tokens]),
             names=np.array([f"s{i}" for i in range(n)]))  # fmt: skip
    return {
        "shards": shards, "fasta": fasta, "run": run, "lm": lm, "task": task,
        "cls": ft / "checkpoints" / "best.ckpt", "table": table, "seqs": seqs, "vcf": vcf,
        "scores": scores, "attributions": attributions, "contig": name,
        "fasta_gz": fasta_gz, "bed": bed,
    }  # fmt: skip


def _first_record(fasta: Path) -> tuple[str, str]:
    name, parts = "", []
    with fasta.open() as handle:
        for line in handle:
            if line.startswith(">"):
                if name:
                    break
                name = line[1:].split()[0]
            else:
                parts.append(line.strip())
    return name, "".join(parts)


def _ok(args: list[object]) -> None:
    result = invoke(args)
    assert result.exit_code == 0, (args[0], result.output, result.exception)


# ------------------------------------------------------------------------------ the commands
Args = Callable[[Inputs, Path], list[object]]


def _region(i: Inputs, end: int) -> str:
    return f"{i['contig']}:101-{100 + end}"


COMMANDS: dict[str, Args] = {
    "demo": lambda i, m: ["demo", "--out", m / "demo", "--steps", "2", "--genome-length",
                          "60000", "--prompts", "2", "--max-eval-tokens", "64", "--threads",
                          "1", "--context-lengths", "32", *SETS[:-2]],
    "prepare-synthetic": lambda i, m: ["prepare", "--synthetic", "--synthetic-length", "30000",
                                       "--synthetic-contigs", "1", "--workers", "1",
                                       "--out", m / "shards"],
    "prepare-fasta": lambda i, m: ["prepare", i["fasta"], "--workers", "1", "--out", m / "shards"],
    "prepare-gzip": lambda i, m: ["prepare", i["fasta_gz"], "--workers", "1", "--out",
                                  m / "shards"],
    "train": lambda i, m: ["train", "--config", REPO / "configs" / "goat-tiny.yaml", *SETS,
                           "--data", i["shards"], "--out", m / "run"],
    "finetune-full": lambda i, m: ["finetune", "-c", i["lm"], "--train", i["task"] / "train.csv",
                                   "--val", i["task"] / "val.csv", "--out", m / "ft",
                                   "--no-progress", "--mode", "full", "--epochs", "1"],
    "finetune-probe": lambda i, m: ["finetune", "-c", i["lm"], "--train", i["task"] / "train.csv",
                                    "--val", i["task"] / "val.csv", "--out", m / "ft",
                                    "--no-progress", "--mode", "probe", "--epochs", "1"],
    "export": lambda i, m: ["export", "-c", i["lm"], "--out", m / "exp"],
    "export-finetuned": lambda i, m: ["export", "-c", i["cls"], "--out", m / "exp"],
    "generate-fasta": lambda i, m: ["generate", "-c", i["lm"], "--prompt", "ACGTACGTTGCA",
                                    "--max-new-tokens", "16", "--out", m / "g.fa"],
    "generate-json": lambda i, m: ["generate", "-c", i["lm"], "--prompt", "ACGTACGTTGCA",
                                   "--max-new-tokens", "16", "--out", m / "g.json"],
    "evaluate": lambda i, m: ["evaluate", "-c", i["lm"], "-d", i["shards"], "--context-lengths",
                              "32", "--max-eval-tokens", "256", "--out", m / "ev"],
    "report": lambda i, m: ["report", "--run", i["run"], "-d", i["shards"], "--out", m / "report",
                            "--context-lengths", "32", "--max-eval-tokens", "128", "--prompts",
                            "2", "--num-samples", "1", "--recall-trials", "0", "--threads", "1"],
    "embed-npz": lambda i, m: ["embed", "-c", i["lm"], "--sequences", i["table"], "--out",
                               m / "e.npz"],
    "embed-parquet": lambda i, m: ["embed", "-c", i["lm"], "--sequences", i["table"], "--out",
                                   m / "e.parquet"],
    "embed-zarr": lambda i, m: ["embed", "-c", i["lm"], "--sequences", i["table"], "--out",
                                m / "e.zarr"],
    "probe-recall": lambda i, m: ["probe-recall", "-c", i["lm"], "-d", i["shards"], "--trials",
                                  "2", "--distances", "5", "--segment", "10", "-o", m / "recall"],
    "score-variants-tsv": lambda i, m: ["score-variants", "-c", i["lm"], "--fasta", i["fasta"],
                                        "--vcf", i["vcf"], "--window", "16", "--out", m / "s.tsv"],
    "score-variants-parquet": lambda i, m: ["score-variants", "-c", i["lm"], "--fasta",
                                            i["fasta"], "--vcf", i["vcf"], "--window", "16",
                                            "--out", m / "s.parquet"],
    "score-variants-vcf": lambda i, m: ["score-variants", "-c", i["lm"], "--fasta", i["fasta"],
                                        "--vcf", i["vcf"], "--window", "16", "--out",
                                        m / "s.vcf.gz"],
    "score-variants-gzip": lambda i, m: ["score-variants", "-c", i["lm"], "--fasta",
                                         i["fasta_gz"], "--vcf", i["vcf"], "--window", "16",
                                         "--out", m / "s.tsv"],
    "score-variants-calibrated": lambda i, m: ["score-variants", "-c", i["lm"], "--fasta",
                                               i["fasta"], "--vcf", i["vcf"], "--window", "16",
                                               "--calibrate", "--null-size", "2",
                                               "--out", m / "s.tsv"],
    "score-variants-null": lambda i, m: ["score-variants", "-c", i["lm"], "--fasta", i["fasta"],
                                         "--vcf", i["vcf"], "--window", "16", "--null-size",
                                         "2", "--null", m / "null.npz", "--out", m / "s.tsv"],
    "eval-variants-tsv": lambda i, m: ["eval-variants", "--scores", i["scores"], "--bootstrap",
                                       "0", "--out", m / "metrics.tsv"],
    "eval-variants-json": lambda i, m: ["eval-variants", "--scores", i["scores"], "--bootstrap",
                                        "0", "--out", m / "metrics.json"],
    "eval-variants-plots": lambda i, m: ["eval-variants", "--scores", i["scores"], "--bootstrap",
                                         "0", "--plots", m / "plots"],
    "score-track-bw": lambda i, m: ["score-track", "-c", i["lm"], "--fasta", i["fasta"],
                                    "--region", _region(i, 200), "--out", m / "t.bw"],
    "score-track-bedgraph": lambda i, m: ["score-track", "-c", i["lm"], "--fasta", i["fasta"],
                                          "--region", _region(i, 200), "--out", m / "t.bedGraph"],
    "check-precision": lambda i, m: ["check-precision", "-c", i["lm"], "--fasta", i["fasta"],
                                     "--windows", "2", "--precision", "32-true", "--accelerator",
                                     "cpu", "--out", m / "c.json"],
    **{
        f"mutagenesis-{suffix}": (
            lambda i, m, s=suffix: ["mutagenesis", "-c", i["lm"], "--fasta", i["fasta"],
                                    "--region", _region(i, 12), "--window", "16",
                                    "--out", m / f"ism.{s}"]
        )
        for suffix in ("tsv", "parquet", "npz", "png", "bw", "bedGraph")
    },  # fmt: skip
    "attention-npz": lambda i, m: ["attention", "-c", i["lm"], "--sequence", "ACGTTGCA" * 4,
                                   "--out", m / "a.npz"],
    "attention-png": lambda i, m: ["attention", "-c", i["lm"], "--sequence", "ACGTTGCA" * 4,
                                   "--out", m / "a.png"],
    "attribute": lambda i, m: ["attribute", "-c", i["lm"], "--sequences", i["seqs"],
                               "--method", "saliency", "--no-progress", "--out", m / "a.npz"],
    "attribute-bed-bw": lambda i, m: ["attribute", "-c", i["lm"], "--fasta", i["fasta"],
                                      "--bed", i["bed"], "--method", "saliency",
                                      "--no-progress", "--out", m / "a.npz", "--out", m / "a.bw"],
    "mutagenesis-gzip": lambda i, m: ["mutagenesis", "-c", i["lm"], "--fasta", i["fasta_gz"],
                                      "--region", _region(i, 12), "--window", "16",
                                      "--out", m / "ism.tsv"],
    "motifs": lambda i, m: ["motifs", "--attributions", i["attributions"], "--leiden-runs", "1",
                            "--out", m / "motifs"],
    "make-task": lambda i, m: ["make-task", "--data", i["shards"], "--out", m / "task", "--label",
                               "gc", "--window", "48", "--max-train", "30", "--max-eval", "12"],
    "make-variant-task-tsv": lambda i, m: ["make-variant-task", "-f", i["fasta"], "--positives",
                                           "4", "-o", m / "vt.tsv"],
    "make-variant-task-parquet": lambda i, m: ["make-variant-task", "-f", i["fasta"],
                                               "--positives", "4", "-o", m / "vt.parquet"],
    "predict": lambda i, m: ["predict", "-c", i["cls"], "--sequences", i["table"],
                             "--no-progress", "--out", m / "p.csv"],
}  # fmt: skip


# ------------------------------------------------------------------------------ the mounts
def _mount(where: Path, options: str) -> None:
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0 or not os.path.ismount(where):
        pytest.skip("cannot mount a tmpfs here")


def _fill(where: Path) -> None:
    """Write a filler file until the filesystem has no byte left."""
    block = b"\0" * 4096
    try:
        with open(where / "filler", "wb") as handle:
            while True:
                handle.write(block)
                handle.flush()
    except OSError:
        pass
    assert os.statvfs(where).f_bavail == 0


def _past_the_checks(where: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk stays full, but each lock file gets the one page its holder line takes, and
    the free-space estimates (train, finetune, export) let the work start: so the command
    reaches its own writers, which a full disk then stops."""
    import importlib

    import goatdna.atomic
    import goatdna.locking

    for name in ("goatdna.workdir", "goatdna.analysis.report", "goatdna.data_prep.prepare",
                 "goatdna.training.loop", "goatdna.training.run", "goatdna.hf.export"):  # fmt: skip
        with suppress(ImportError):  # goatdna.hf needs the [hf] extra
            importlib.import_module(name)  # the modules that import the two by name
    lock, estimate = goatdna.locking.folder_lock, goatdna.atomic.check_free_space
    filler = where / "filler"

    @contextmanager
    def lock_with_room(folder: Path, option: str) -> Iterator[Path]:
        os.truncate(filler, max(0, filler.stat().st_size - 4096))  # a page for the pid line
        with lock(folder, option) as path:
            yield path

    for module in list(sys.modules.values()):
        if not getattr(module, "__name__", "").startswith("goatdna"):
            continue
        if getattr(module, "folder_lock", None) is lock:
            monkeypatch.setattr(module, "folder_lock", lock_with_room)
        if getattr(module, "check_free_space", None) is estimate:
            monkeypatch.setattr(module, "check_free_space", lambda *a, **k: None)


@pytest.fixture(params=["full", "full-past-checks", "read-only", "read-only-past-checks"])
def mount(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    where = tmp_path / f"tmpfs-{uuid.uuid4().hex[:6]}"
    if request.param.startswith("read-only"):
        _mount(where, "ro,size=64k")
        if request.param == "read-only-past-checks":  # the writers meet EROFS themselves
            monkeypatch.setattr("goatdna.atomic._probe_writable", lambda *a: None)
    else:
        _mount(where, "size=64k")
        _fill(where)
        if request.param == "full-past-checks":
            _past_the_checks(where, monkeypatch)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)  # lazy: a held fd


def _tree(root: Path) -> set[str]:
    """Every file and folder under ``root`` (hidden ones too), relative."""
    found = set()
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            found.add(os.path.relpath(os.path.join(folder, name), root))
    return found


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_write_onto_a_full_or_read_only_filesystem_is_one_line(
    command: str, mount: Path, inputs: Inputs
) -> None:
    before = _tree(mount)
    result = invoke([str(a) for a in COMMANDS[command](inputs, mount)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{command}: {result.output}") from result.exception
    assert result.exit_code == 2, (command, result.exit_code, result.output)
    said = result.output + result.stderr
    assert "Traceback" not in said and "Aborted" not in said, said
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1] == errors[0], result.stderr  # it ends so
    assert _tree(mount) == before, (command, sorted(_tree(mount) - before))
