"""Byte identity: every goatdna command's outputs from two source trees, compared file by file.

A refactor that promises "behaviour unchanged" (issue 42) is held to it here: each tree (a git
ref, or the working tree) is exported in turn to the SAME temporary path, and runs the SAME
list of commands, with the same arguments, from the same working directory, on the same inputs
(the demo's embedded synthetic genome, and a 200 kb slice of the real chr20 FASTA plus its 1000
Genomes VCF from ../shared/data). Every file the commands write, and the stdout of the commands
whose output is stdout, is hashed (sha256) and compared. Because paths are the same for both
trees, absolute paths in outputs compare equal and need no normalisation.

A few outputs hold values that differ between two runs of the SAME tree (wall-clock times,
throughput, dates, host names); those files are compared after the normalisation listed in
`VOLATILE_KEYS` / `VOLATILE_LINES` (each with its reason), and the table says so. Everything
else must match byte for byte.

    python benchmarks/byte_identity.py --base 73b7e12 --head HEAD
    python benchmarks/byte_identity.py --base main                 # the working tree as head
    python benchmarks/byte_identity.py --base HEAD --head HEAD     # the determinism check

Prints one row per command (files compared, identical / normalised / different) and exits 1
when any file differs or any command fails in either tree (a failure would make the comparison
vacuous). ``--keep DIR`` keeps both trees' outputs for a closer look (``diff -r``).

Each command runs in a child forked from one Python that has imported torch and Lightning
once (about 6 s a process otherwise); ``--fresh-process`` runs each in a new interpreter
instead, slower but with nothing shared. Either way a child starts from the same state in both
trees. Runtime: about 100 s per tree on 2 idle CPU cores (3-6 minutes for both when busy).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
CHR20_FASTA = SHARED / "grch37_chr20_1000001-2000000.fa.gz"
CHR20_VCF = SHARED / "1kgp3_chr20_1000001-2000000.sites.vcf.gz"
SLICE = 200_000  # bases of chr20 the real-data commands see: prepare in seconds, ~150 SNVs
OFFSET = 1_000_000  # the FASTA's base 1 is chr20:1,000,001
WORKTREE = "WORKTREE"  # --head/--base value: the files as they are now, committed or not

# ------------------------------------------------------------------------------ the commands
TINY = [  # a 1-layer, 32-base decoder: a train step or a forward pass in milliseconds
    "model.n_layers=1", "model.d_model=32", "model.n_heads=2", "model.mlp_hidden=64",
    "model.goat_modes=2", "model.train_length=32", "data.seq_len=32",
    "data.micro_batch_size=4", "data.val_max_windows=4", "optim.warmup_steps=1",
    "trainer.eval_every=2", "trainer.ckpt_every=2", "trainer.log_every=1",
    "trainer.progress_bar=false", "trainer.max_steps=2",
]  # fmt: skip
SETS = [x for item in TINY for x in ("--set", item)]
CONFIG = "../src/configs/goat-tiny.yaml"  # the tree's own config (the trees sit at ../src)
LM = "out/train/run/checkpoints/best.ckpt"
CLS = "out/finetune-probe/ft/checkpoints/best.ckpt"
FA = "inputs/chr20.fa"
REGION = "chr20:5001-5200"


@dataclass(frozen=True)
class Step:
    """One command line. It writes under out/<name>/ (made empty before it runs); ``stdout``:
    the command's output is what it prints, so its stdout is compared too."""

    name: str
    args: list[str]
    stdout: bool = False


def _ft(mode: str, *extra: str) -> Step:
    return Step(f"finetune-{mode}", ["finetune", "-c", LM, "--train", "out/make-task/task/train.csv",
                                     "--val", "out/make-task/task/val.csv", "--test",
                                     "out/make-task/task/test.csv", "--out", f"out/finetune-{mode}/ft",
                                     "--no-progress", "--mode", mode, "--epochs", "1",
                                     "--batch-size", "8", "--seed", "0", *extra])  # fmt: skip


STEPS: list[Step] = [
    Step("demo", ["demo", "--out", "out/demo/demo", "--steps", "2", "--genome-length", "60000",
                  "--prompts", "2", "--max-eval-tokens", "64", "--threads", "1",
                  "--context-lengths", "32", *SETS[:-2]]),
    Step("prepare-synthetic", ["prepare", "--synthetic", "--synthetic-length", "40000",
                               "--synthetic-contigs", "2", "--workers", "1",
                               "--out", "out/prepare-synthetic/shards"]),
    Step("prepare", ["prepare", FA, "--workers", "1", "--out",
                     "out/prepare/shards"]),
    Step("info", ["info", "out/prepare/shards"], stdout=True),
    Step("train", ["train", "--config", CONFIG, *SETS, "--data", "out/prepare/shards", "--out",
                   "out/train/run"]),
    Step("model-info", ["model-info", CONFIG, "--seq-len", "1024"], stdout=True),
    Step("generate", ["generate", "-c", LM, "--prompt", "ACGTACGTTGCA", "--max-new-tokens", "24",
                      "--num-samples", "2", "--seed", "3", "--out", "out/generate/g.json"]),
    Step("generate-stdout", ["generate", "-c", LM, "--prompt-fasta", FA, "--region",
                             "chr20:101-140", "--max-new-tokens", "16", "--temperature", "0"],
         stdout=True),
    Step("evaluate", ["evaluate", "-c", LM, "-d", "out/prepare/shards", "--context-lengths", "32",
                      "--max-eval-tokens", "256", "--out", "out/evaluate/ev"]),
    Step("report", ["report", "--run", "out/train/run", "-d", "out/prepare/shards", "--out",
                    "out/report/report", "--context-lengths", "32", "--max-eval-tokens", "128",
                    "--prompts", "2", "--num-samples", "1", "--recall-trials", "0", "--threads",
                    "1"]),
    Step("export", ["export", "-c", LM, "--out", "out/export/hf"]),
    Step("probe-recall", ["probe-recall", "-c", LM, "-d", "out/prepare/shards", "--trials", "2",
                          "--distances", "5", "--segment", "10", "-o", "out/probe-recall/recall"]),
    Step("make-variant-task", ["make-variant-task", "-f", FA, "--positives", "6", "--seed", "1",
                               "-o", "out/make-variant-task/vt.tsv"]),
    Step("score-variants", ["score-variants", "-c", LM, "--fasta", FA, "--vcf",
                            "inputs/variants.vcf", "--window", "16", "--accelerator", "cpu",
                            "--calibrate", "--null-size", "2", "--null",
                            "out/score-variants/null.npz", "--out", "out/score-variants/s.tsv"]),
    Step("score-variants-vcf", ["score-variants", "-c", LM, "--fasta", FA, "--vcf",
                                "inputs/variants.vcf", "--window", "16", "--accelerator", "cpu",
                                "--out", "out/score-variants-vcf/s.vcf.gz"]),
    Step("score-variants-task", ["score-variants", "-c", LM, "--fasta", FA, "--vcf",
                                 "out/make-variant-task/vt.tsv", "--window", "16",
                                 "--accelerator", "cpu", "--out",
                                 "out/score-variants-task/s.parquet"]),
    Step("eval-variants", ["eval-variants", "--scores", "out/score-variants-task/s.parquet",
                           "--label", "label", "--bootstrap", "50", "--seed", "2", "--out",
                           "out/eval-variants/metrics.json", "--plots",
                           "out/eval-variants/plots"]),
    Step("score-track", ["score-track", "-c", LM, "--fasta", FA, "--region", REGION,
                         "--accelerator", "cpu", "--out", "out/score-track/t.bedGraph"]),
    Step("score-track-bw", ["score-track", "-c", LM, "--fasta", FA, "--region", REGION,
                            "--accelerator", "cpu", "--out", "out/score-track-bw/t.bw"]),
    Step("check-precision", ["check-precision", "-c", LM, "--fasta", FA, "--windows", "2",
                             "--precision", "32-true", "--accelerator", "cpu", "--out",
                             "out/check-precision/c.json"]),
    Step("mutagenesis", ["mutagenesis", "-c", LM, "--fasta", FA, "--region", "chr20:5001-5012",
                         "--window", "16", "--accelerator", "cpu", "--out",
                         "out/mutagenesis/ism.tsv", "--out", "out/mutagenesis/ism.npz"]),
    Step("attention", ["attention", "-c", LM, "--sequence", "ACGTTGCA" * 4, "--out",
                       "out/attention/a.npz"]),
    Step("attribute", ["attribute", "-c", LM, "--sequences", "inputs/seqs.fa", "--method",
                       "saliency", "--no-progress", "--accelerator", "cpu", "--out",
                       "out/attribute/a.npz"]),
    Step("attribute-bed", ["attribute", "-c", LM, "--fasta", FA, "--bed", "inputs/regions.bed",
                           "--method", "saliency", "--no-progress", "--accelerator", "cpu",
                           "--out", "out/attribute-bed/a.npz", "--out",
                           "out/attribute-bed/a.bedGraph"]),
    Step("motifs", ["motifs", "--attributions", "inputs/attributions.npz", "--leiden-runs", "1",
                    "--out", "out/motifs/motifs"]),
    Step("embed", ["embed", "-c", LM, "--sequences", "inputs/seqs.fa", "--accelerator", "cpu",
                   "--out", "out/embed/e.npz"]),
    Step("make-task", ["make-task", "--data", "out/prepare/shards", "--out", "out/make-task/task",
                       "--label", "gc", "--window", "48", "--max-train", "24", "--max-eval",
                       "8", "--seed", "0"]),
    _ft("probe"),
    _ft("full"),
    _ft("lora", "--lora-rank", "2"),
    Step("export-finetuned", ["export", "-c", CLS, "--out", "out/export-finetuned/hf"]),
    Step("predict", ["predict", "-c", CLS, "--sequences", "out/make-task/task/test.csv",
                     "--no-progress", "--accelerator", "cpu", "--out", "out/predict/p.csv"]),
]  # fmt: skip

# ------------------------------------------------------------------------------ normalisation
# Values that differ between two runs of the SAME tree: measurements of the machine or the
# clock, not results. Each name is dropped wherever it occurs as a key of a JSON object, a YAML
# mapping or a checkpoint's dict (any depth), or as a column header of a CSV/TSV file or of a
# Markdown/HTML table. Nothing else is dropped.
VOLATILE_KEYS: dict[str, str] = {
    "tokens_per_s": "throughput: wall-clock tokens per second (train summary, metrics.csv, report)",
    "mfu": "model FLOPs utilisation: tokens_per_s over peak_flops",
    "mfu_note": "why mfu is null: it quotes the measured rates (a busy machine's peak)",
    "peak_flops": "the FLOP rate measured on this machine (start and end of the run)",
    "peak_memory_bytes": "the process's peak memory (allocator and import order)",
    "peak_memory_gb": "the same, in the report's tables",
    "wall_seconds": "wall-clock seconds of a run (summary.json)",
    "elapsed_s": "wall-clock seconds since the start (metrics.csv)",
    "elapsed_seconds": "the same, kept in a checkpoint's loop state to resume the clock",
    "mtime_ns": "an input file's modification time (the report's inputs.json, the null's"
    " fingerprint in score-variants' null.npz)",
    "backbone_sha256": "the sha256 of the backbone .ckpt file, which holds elapsed_seconds",
}
# Rows of the report's Markdown/HTML tables dropped by their first cell: measured, not computed.
VOLATILE_ROWS: dict[str, str] = {
    "training tokens/s": "the paper comparison's throughput row (and its change in %)",
    "peak memory, GB": "the paper comparison's peak memory row (and its change in %)",
}
# Keys dropped only in files of this name.
VOLATILE_FILE_KEYS: dict[str, dict[str, str]] = {
    "probe_features.pt": {"key": "the probe cache's key: a hash over backbone_sha256"},
}
# Text replaced by <volatile> in text files (.txt .log .csv .tsv .html .md .yaml .stdout).
VOLATILE_TEXT: dict[str, str] = {
    r"\d{4}-\d\d-\d\d \d\d:\d\d UTC": "the report's 'Generated <date> UTC' line",
}
# Files whose names hold a time stamp, host and pid: paired by the name with that part removed.
VOLATILE_NAMES: dict[str, str] = {
    r"(events\.out\.tfevents)\.\d+\.[^/]+$": "TensorBoard's file name: time, host, pid",
}
# TensorBoard event files are compared as their events, with each event's wall_time cleared
# and the scalars named in VOLATILE_KEYS dropped; checkpoints (.ckpt, .pt) as their loaded
# contents (tensors by dtype, shape and bytes), less VOLATILE_KEYS.
TEXT_SUFFIXES = {".txt", ".log", ".csv", ".tsv", ".html", ".md", ".yaml", ".yml", ".stdout"}


def paired_name(rel: str) -> str:
    for pattern in VOLATILE_NAMES:
        rel = re.sub(pattern, r"\1.<volatile>", rel)
    return rel


def _drop_keys(value: object, keys: set[str]) -> object:
    if isinstance(value, dict):
        return {k: _drop_keys(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list | tuple):
        return [_drop_keys(v, keys) for v in value]
    return value


def _canonical(value: object) -> object:
    """A checkpoint's contents as JSON-able data: tensors and arrays by dtype, shape and the
    sha256 of their bytes, so equal contents give equal text."""
    import numpy as np
    import torch

    if isinstance(value, torch.Tensor):
        data = value.detach().cpu().contiguous()
        raw = data.reshape(-1).view(torch.uint8).numpy().tobytes() if data.numel() else b""
        return ["tensor", str(data.dtype), list(data.shape), hashlib.sha256(raw).hexdigest()]
    if isinstance(value, np.ndarray):
        return [
            "array",
            str(value.dtype),
            list(value.shape),
            hashlib.sha256(value.tobytes()).hexdigest(),
        ]
    if isinstance(value, dict):
        return [["key", repr(k), _canonical(v)] for k, v in value.items()]
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return repr(value)


def _tfevents(raw: bytes) -> bytes:
    from tensorboard.compat.proto import event_pb2

    events, at = [], 0
    while at + 12 <= len(raw):
        length = int.from_bytes(raw[at : at + 8], "little")
        event = event_pb2.Event.FromString(raw[at + 12 : at + 12 + length])
        at += 12 + length + 4
        event.wall_time = 0
        kept = [v for v in event.summary.value if v.tag.split("/")[-1] not in VOLATILE_KEYS]
        if event.HasField("summary"):
            if not kept:
                continue
            del event.summary.value[:]
            event.summary.value.extend(kept)
        events.append(event.SerializeToString(deterministic=True))
    return b"\n".join(events)


def _table(text: str, sep: str) -> str:
    import csv
    import io

    rows = list(csv.reader(io.StringIO(text), delimiter=sep))
    if not rows:
        return text
    keep = [i for i, name in enumerate(rows[0]) if name not in VOLATILE_KEYS]
    return "\n".join(sep.join(row[i] for i in keep if i < len(row)) for row in rows)


def _markdown(text: str) -> str:
    out: list[str] = []
    drop: set[int] = set()
    previous = ""
    for line in text.splitlines():
        in_table, first_row = line.startswith("|"), not previous.startswith("|")
        previous = line
        if not in_table:
            out.append(line)
            continue
        cells = line.strip().strip("|").split("|")
        if first_row:  # a table's header
            drop = {i for i, c in enumerate(cells) if c.strip() in VOLATILE_KEYS}
        if cells[0].strip().startswith(tuple(VOLATILE_ROWS)):
            continue
        out.append("|".join(c for i, c in enumerate(cells) if i not in drop))
    return "\n".join(out)


def _html(text: str) -> str:
    def table(match: re.Match[str]) -> str:
        body = match.group(0)
        heads = [h.strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", body, re.S)]
        drop = {i for i, h in enumerate(heads) if h in VOLATILE_KEYS}

        def row(tr: re.Match[str]) -> str:
            cells = re.findall(r"<td[^>]*>(.*?)</td>", tr.group(0), re.S)
            if cells and cells[0].strip().startswith(tuple(VOLATILE_ROWS)):
                return ""
            return "<tr>" + "|".join(c for i, c in enumerate(cells) if i not in drop) + "</tr>"

        return re.sub(r"<tr>(?:(?!</tr>).)*<td.*?</tr>", row, body, flags=re.S)

    return re.sub(r"<table.*?</table>", table, text, flags=re.S)


def _torch_file(path: Path, keys: set[str]) -> bytes | None:
    import torch

    try:  # outputs this script's own runs wrote: trusted, so full unpickling is fine
        data = torch.load(path, map_location="cpu", weights_only=False)
    except Exception:  # noqa: BLE001 - not a torch file: no normaliser
        return None
    return json.dumps(_canonical(_drop_keys(data, keys))).encode()


def _npz(path: Path, keys: set[str]) -> bytes:
    import numpy as np

    with np.load(path, allow_pickle=False) as arrays:
        data: dict[str, object] = {name: arrays[name] for name in arrays.files}
    for name, array in list(data.items()):  # a JSON text in an array: a fingerprint of inputs
        if isinstance(array, np.ndarray) and array.dtype.kind == "U" and array.size == 1:
            with contextlib.suppress(ValueError):
                data[name] = _drop_keys(json.loads(str(array.item())), keys)
    return json.dumps(_canonical(data)).encode()


def normalised(path: Path) -> bytes | None:
    """The file's contents with the volatile parts above removed, or None (no normaliser)."""
    suffix, raw = path.suffix.lower(), path.read_bytes()
    if suffix == ".gz" and Path(path.stem).suffix.lower() in TEXT_SUFFIXES | {".json"}:
        suffix, raw = Path(path.stem).suffix.lower(), gzip.decompress(raw)
    keys = set(VOLATILE_KEYS) | set(VOLATILE_FILE_KEYS.get(path.name, {}))
    if path.name.startswith("events.out.tfevents."):
        return _tfevents(raw)
    if suffix in {".ckpt", ".pt"}:
        return _torch_file(path, keys)
    if suffix == ".npz":
        return _npz(path, keys)
    if suffix == ".json":
        try:
            return json.dumps(_drop_keys(json.loads(raw), keys), sort_keys=True).encode()
        except ValueError:
            return None
    if suffix not in TEXT_SUFFIXES:
        return None
    text = raw.decode(errors="replace")
    for pattern in VOLATILE_TEXT:
        text = re.sub(pattern, "<volatile>", text)
    if suffix in {".yaml", ".yml"}:
        import yaml

        return json.dumps(_drop_keys(yaml.safe_load(text), keys), sort_keys=True).encode()
    if suffix in {".csv", ".tsv"}:
        text = _table(text, "," if suffix == ".csv" else "\t")
    elif suffix == ".md":
        text = _markdown(text)
    elif suffix == ".html":
        text = _html(text)
    return text.encode()


# ------------------------------------------------------------------------------ inputs
def make_inputs(folder: Path) -> None:
    """The real-data inputs, made by this script (not by goatdna) so both trees read the same
    bytes: chr20's first 200 kb as a plain FASTA named chr20, its 1000 Genomes SNVs and short
    indels (REF checked against the slice), three sequences, two BED regions and a seeded
    random attribution file for `motifs`."""
    import numpy as np

    folder.mkdir(parents=True)
    with gzip.open(CHR20_FASTA, "rt") as handle:
        bases = "".join(line.strip() for line in handle if not line.startswith(">"))[:SLICE]
    (folder / "chr20.fa").write_text(
        ">chr20\n" + "".join(bases[i : i + 60] + "\n" for i in range(0, len(bases), 60))
    )
    header = ["##fileformat=VCFv4.2", f"##contig=<ID=chr20,length={SLICE}>",
              "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]  # fmt: skip
    records, indels = [], 0
    with gzip.open(CHR20_VCF, "rt") as handle:
        for line in handle:
            if line.startswith("#"):
                continue
            chrom, pos, vid, ref, alt = line.split("\t")[:5]
            start = int(pos) - OFFSET
            if start + len(ref) > SLICE:
                break
            if not re.fullmatch("[ACGT]+", ref) or not re.fullmatch("[ACGT,]+", alt):
                continue
            if bases[start - 1 : start - 1 + len(ref)] != ref:
                continue
            is_indel = len(ref) != 1 or any(len(a) != 1 for a in alt.split(","))
            if is_indel and indels >= 4:
                continue
            indels += is_indel
            records.append(f"chr20\t{start}\t{vid}\t{ref}\t{alt}\t.\t.\t.")
            if len(records) >= 40:
                break
    (folder / "variants.vcf").write_text("\n".join(header + records) + "\n")
    (folder / "seqs.fa").write_text(
        "".join(f">s{i}\n{bases[1000 + 500 * i : 1032 + 500 * i]}\n" for i in range(3))
    )
    (folder / "regions.bed").write_text("chr20\t1000\t1032\tr1\nchr20\t3000\t3040\tr2\n")
    rng = np.random.default_rng(0)
    n, length = 40, 24
    tokens = rng.integers(0, 4, size=(n, length))
    one_hot = np.eye(4, dtype=np.float32)[tokens]
    hypothetical = rng.normal(0, 1, size=(n, length, 4)).astype(np.float32)
    np.savez(folder / "attributions.npz", attributions=hypothetical * one_hot,
             hypothetical=hypothetical, names=np.array([f"s{i}" for i in range(n)]),
             sequences=np.array(["".join("ACGT"[t] for t in row) for row in tokens]))  # fmt: skip


# ------------------------------------------------------------------------------ the trees
def export_tree(ref: str, dest: Path) -> None:
    """``ref``'s files (git archive), or for WORKTREE the files git sees now (tracked and
    untracked-not-ignored, as they are on disk), into ``dest``."""
    dest.mkdir(parents=True)
    if ref == WORKTREE:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO, check=True, capture_output=True,
        ).stdout.decode()  # fmt: skip
        for name in filter(None, listed.split("\0")):
            source = REPO / name
            if source.is_file():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, dest / name)
        return
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref], cwd=REPO, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


DRIVER = r"""
import json, os, sys, time
steps = json.load(open(sys.argv[1]))
fresh = sys.argv[2] == "1"
if not fresh:
    import torch, pytorch_lightning  # noqa: F401  once, before the forks
    import goatdna.cli.app  # noqa: F401
results = {}
for step in steps:
    name, args = step["name"], step["args"]
    os.makedirs(os.path.join("out", name), exist_ok=True)
    out_log, err_log = f"logs/{name}.stdout", f"logs/{name}.stderr"
    began = time.time()
    if fresh:
        import subprocess
        with open(out_log, "wb") as o, open(err_log, "wb") as e:
            code = subprocess.run([sys.executable, "-c",
                                   "import sys; from goatdna.cli.app import main; "
                                   "sys.argv[0] = 'goatdna'; main()", *args],
                                  stdout=o, stderr=e).returncode
    else:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                o = os.open(out_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                e = os.open(err_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(o, 1); os.dup2(e, 2)
                sys.argv = ["goatdna", *args]
                from goatdna.cli.app import main
                try:
                    main()
                    code = 0
                except SystemExit as exit_:
                    code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
            except BaseException:
                import traceback; traceback.print_exc()
            finally:
                sys.stdout.flush(); sys.stderr.flush()
                os._exit(code)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    results[name] = {"rc": code, "seconds": round(time.time() - began, 1)}
    print(f"  {name:24s} rc={code} {results[name]['seconds']:6.1f} s", flush=True)
json.dump(results, open("logs/results.json", "w"))
"""


def environment(src: Path) -> dict[str, str]:
    """One thread, CPU only, fixed hash seed, UTC, no colour: the same for both trees."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOATDNA", "SLURM"))}
    env.update(
        PYTHONPATH=str(src), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0",
        CUDA_VISIBLE_DEVICES="", TZ="UTC", MPLBACKEND="Agg", SOURCE_DATE_EPOCH="0",
        COLUMNS="120", NO_COLOR="1", TERM="dumb", PYTHONDONTWRITEBYTECODE="1",
        TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
    )  # fmt: skip
    return env


def run_tree(ref: str, root: Path, steps: list[Step], fresh: bool) -> dict[str, dict]:
    """Export ``ref`` to root/src, run every step in root/work, move out/ and logs/ to
    root/results/<label>. The same paths for both trees, so absolute paths agree."""
    src, work = root / "src", root / "work"
    shutil.rmtree(src, ignore_errors=True)
    for name in ("out", "logs"):
        shutil.rmtree(work / name, ignore_errors=True)
    export_tree(ref, src)
    (work / "logs").mkdir(parents=True)
    (work / "logs" / "sources.json").write_text(json.dumps(source_digests(src)))
    (work / "steps.json").write_text(json.dumps([s.__dict__ for s in steps]))
    subprocess.run(
        [sys.executable, "-c", DRIVER, "steps.json", "1" if fresh else "0"],
        cwd=work, env=environment(src), check=True,
    )  # fmt: skip
    return json.loads((work / "logs" / "results.json").read_text())


# ------------------------------------------------------------------------------ comparison
def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


SHIPPED_SOURCE = ("goatdna/model", "goatdna/hf")
"""`goatdna export` ships these folders' .py files verbatim as the folder's remote code: an
exported .py is the tree's own source, which a refactor may edit (a docstring, say). Such a file
is held to a different rule: each side must be byte-equal to a source file of its OWN tree."""


def source_digests(src: Path) -> dict[str, list[str]]:
    """sha256 -> names of the .py files under `SHIPPED_SOURCE` in the exported tree ``src``."""
    digests: dict[str, list[str]] = {}
    for folder in SHIPPED_SOURCE:
        for path in sorted((src / folder).glob("*.py")):
            digests.setdefault(_sha(path), []).append(path.name)
    return digests


def _is_own_source(path: Path, root: Path) -> bool:
    listing = root / "logs" / "sources.json"
    if path.suffix != ".py" or not listing.is_file():
        return False
    return path.name in json.loads(listing.read_text()).get(_sha(path), [])


def _files(folder: Path) -> dict[str, Path]:
    if not folder.exists():
        return {}
    return {
        paired_name(p.relative_to(folder).as_posix()): p
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@dataclass
class Row:
    name: str
    files: int = 0
    identical: int = 0
    normalised: int = 0
    source: int = 0
    different: list[str] = field(default_factory=list)
    failed: str = ""


def compare(step: Step, base: Path, head: Path, rcs: tuple[int, int]) -> Row:
    row = Row(step.name)
    if rcs != (0, 0):
        row.failed = f"exit {rcs[0]} / {rcs[1]}"
    a, b = _files(base / "out" / step.name), _files(head / "out" / step.name)
    if step.stdout:
        a["<stdout>"] = base / "logs" / f"{step.name}.stdout"
        b["<stdout>"] = head / "logs" / f"{step.name}.stdout"
    for rel in sorted(set(a) | set(b)):
        row.files += 1
        if rel not in a or rel not in b:
            row.different.append(f"{rel} ({'only in head' if rel not in a else 'only in base'})")
        elif _sha(a[rel]) == _sha(b[rel]):
            row.identical += 1
        elif (na := normalised(a[rel])) is not None and na == normalised(b[rel]):
            row.normalised += 1
        elif _is_own_source(a[rel], base) and _is_own_source(b[rel], head):
            row.source += 1
        else:
            row.different.append(rel)
    if not row.files and not row.failed:
        row.failed = "wrote nothing"
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="main", help="git ref (or WORKTREE); default: main")
    parser.add_argument("--head", default=WORKTREE, help="git ref or WORKTREE (the default)")
    parser.add_argument("--only", action="append", default=[], help="run only these steps "
                        "(repeatable; give the steps they read from too)")  # fmt: skip
    parser.add_argument("--keep", type=Path, help="copy both trees' outputs here")
    parser.add_argument("--fresh-process", action="store_true",
                        help="a new interpreter per command instead of a fork")  # fmt: skip
    parser.add_argument("--list", action="store_true", help="print the command lines and exit")
    parser.add_argument("--compare", type=Path, metavar="KEPT",
                        help="compare a folder written by --keep again, without running")  # fmt: skip
    args = parser.parse_args(argv)
    steps = [s for s in STEPS if not args.only or s.name in args.only]
    if args.list:
        for step in steps:
            print(step.name.ljust(22), "goatdna", " ".join(step.args))
        return 0
    if args.compare:
        results = {
            label: json.loads((args.compare / label / "logs" / "results.json").read_text())
            for label in ("base", "head")
        }
        return table(steps, args.compare / "base", args.compare / "head", results)
    if not CHR20_FASTA.is_file() or not CHR20_VCF.is_file():
        print(f"error: the sample data is missing under {SHARED}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="goatdna-bytes-") as tmp:
        root = Path(tmp)
        make_inputs(root / "work" / "inputs")
        results = {}
        for label, ref in (("base", args.base), ("head", args.head)):
            began = time.time()
            print(f"{label}: {ref}", flush=True)
            results[label] = run_tree(ref, root, steps, args.fresh_process)
            keep = root / "results" / label
            keep.mkdir(parents=True)
            for name in ("out", "logs"):
                shutil.move(str(root / "work" / name), keep / name)
            print(f"{label}: {time.time() - began:.0f} s", flush=True)
        if args.keep:
            shutil.copytree(root / "results", args.keep, dirs_exist_ok=True)
        return table(steps, root / "results" / "base", root / "results" / "head", results)


def table(steps: list[Step], base: Path, head: Path, results: dict[str, dict]) -> int:
    """Compare, print one row per command, and return the exit status (1: not identical)."""
    rows = []
    for step in steps:
        rcs = (results["base"][step.name]["rc"], results["head"][step.name]["rc"])
        rows.append(compare(step, base, head, rcs))
    print(f"\n{'command':24s} {'files':>5s}  result")
    bad = 0
    for row in rows:
        if row.failed or row.different:
            bad += 1
            what = "FAILED " + row.failed if row.failed else "DIFFERENT"
            if row.different:
                what += ": " + ", ".join(row.different[:6])
                what += f" (+{len(row.different) - 6})" if len(row.different) > 6 else ""
        else:
            what = "identical"
            what += f" ({row.normalised} after normalisation)" if row.normalised else ""
            what += f" ({row.source} shipped source = its tree's)" if row.source else ""
        print(f"{row.name:24s} {row.files:5d}  {what}")
    total = sum(r.files for r in rows)
    print(
        f"\n{len(rows)} commands, {total} files: "
        + (f"{bad} not identical" if bad else "all identical")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
