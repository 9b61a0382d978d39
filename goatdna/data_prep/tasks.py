"""A labelled task from prepared shards, so fine-tuning can be tried with no download.

`make_window_task` tiles every record of each split into non-overlapping windows (default
200 nt; windows never cross a record, hence never a split; windows holding an N are skipped) and
labels each window by

- ``repeat``: 1 when at least half of its bases are soft-masked (lowercase in the source FASTA,
  the repeat annotation), else 0;
- ``gc``: ``low`` / ``mid`` / ``high`` GC content, cut at the tertiles of the train split's
  windows (so the classes are about equally common in train);
- ``motif``: a known-truth task for attribution: each window is ``motif`` or ``background`` at
  random (half each); a ``motif`` window receives each PWM of ``motifs`` (a MEME minimal-format
  file) with probability ``plant_rate`` (at least one), as a sequence drawn column by column from
  the PWM, on a random strand (the reverse complement half of the time), at a random place
  that overlaps no other planted instance. A ``planted`` column lists each instance as
  ``name:start:strand`` (0-based start). With ``decoys="shuffled"`` (the default) each
  ``background`` window receives, by the same draws (rate, at least one, strand, place), a
  *decoy* of each chosen PWM: an instance drawn from it whose letters are then permuted (redrawn
  while any half of it still reads as any half of the PWM on either strand, `reads_as`), listed
  in a ``decoys`` column. The two classes then have the same base composition, so a model must
  read the motifs' order to tell them apart: without decoys the planted letters themselves
  separate the classes (on the synthetic genome a planted ``CACGTG`` adds a CpG the genome
  depletes), a shortcut that attributions show as single C/G bases instead of motifs. With
  ``decoys="none"`` ``background`` windows are left as the genome has them.

Sequences are written in upper case: the soft-mask *is* the repeat label, so keeping the case
would hand it to any model. Each split is subsampled (fixed seed) to at most ``max_rows``, with
the classes as balanced as the windows allow. The output folder holds ``train.csv``,
``val.csv``, ``test.csv`` (columns ``id,sequence,label``; ``id`` is ``record:start-end``,
1-based inclusive source coordinates) and ``task.json`` (what was done, the class counts and the
shards' manifest sha256). A smoke test of the pipeline, not a benchmark of biology.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from goatdna.atomic import atomic_dir
from goatdna.configfile import SEED, SHARE, bounded, check_bounds
from goatdna.data_prep.shards import ShardedGenome
from goatdna.data_prep.window_search import is_n
from goatdna.errors import GoatDNAError
from goatdna.formats import json_text
from goatdna.io.tokens import REPEAT_FLAG, TOKEN_MASK, UPPER_DECODE, C, G
from goatdna.workdir import claim_output_folder, output_lock

TASK_SPLITS = ("train", "val", "test")
TASK_FILES = frozenset({*(f"{split}.csv" for split in TASK_SPLITS), "task.json"})
"""What `make_window_task` writes in its folder: ``--force`` replaces a folder of these only."""


LABELS = ("repeat", "gc", "motif")
PLANTED_CLASSES = ("background", "motif")
DECOYS = ("shuffled", "none")


@dataclass
class WindowTaskOptions:
    label: Literal["repeat", "gc", "motif"] = "repeat"
    window: int = 200
    max_train: int = 2000
    """Rows kept in train.csv (classes balanced as far as the windows allow)."""
    max_eval: int = 500
    """Rows kept in val.csv and in test.csv each."""
    seed: int = bounded(0, SEED)
    motifs: str | None = None
    """``motif`` labels: the MEME minimal-format file of the PWMs to plant."""
    plant_rate: float = bounded(0.5, SHARE)
    """``motif`` labels: the probability each PWM is planted in a ``motif`` window."""
    decoys: Literal["shuffled", "none"] = "shuffled"
    """``motif`` labels: ``shuffled`` plants a letter-permuted instance of each chosen PWM in a
    ``background`` window (composition-matched classes); ``none`` leaves those windows alone."""


@dataclass(frozen=True)
class PlantedMotif:
    """One PWM to plant: its name and its (w, 4) probabilities in A C G T columns."""

    name: str
    pwm: np.ndarray


def read_meme_motifs(path: str | Path, option: str = "--motifs") -> list[PlantedMotif]:
    """The motifs of a MEME minimal-format file, rows normalised.

    Biopython's ``minimal`` reader checks the file and names the motifs; the probabilities are
    taken as the file writes them (`_meme_matrices`), as Biopython rounds each to a count of
    ``nsites`` (20 where a file gives none: 0.02 became 0). An RNA alphabet (``ACGU``, as RNA
    motif databases write it) is read as DNA, U as T. A row of zeros is refused by name: it has
    no letter to draw (Biopython's own normalising divided by zero there)."""
    from Bio import motifs as bio_motifs

    try:
        with open(path) as handle:
            text = handle.read()
        found = list(bio_motifs.parse(io.StringIO(text), "minimal"))
        matrices = _meme_matrices(text)
        if [len(rows) for rows in matrices] != [motif.length for motif in found]:
            raise ValueError("its letter-probability matrices do not match their MOTIF lines")
    except OSError as err:
        raise GoatDNAError(f"{option} {path}: cannot read it ({err.strerror})") from None
    except Exception as err:  # Biopython raises ValueError and friends on a malformed file
        raise GoatDNAError(
            f"{option} {path}: not a MEME minimal-format motif file ({err}); see "
            "https://meme-suite.org/meme/doc/meme-format.html"
        ) from None
    out = []
    for motif, rows in zip(found, matrices, strict=True):
        pwm = np.array(rows, dtype=np.float64).reshape(-1, 4)  # A C G T(U) columns
        if pwm.size == 0 or (pwm < 0).any() or not np.isfinite(pwm).all():
            raise GoatDNAError(f"{option} {path}: motif {motif.name!r} has no valid probabilities")
        empty = np.flatnonzero(pwm.sum(axis=1) == 0)
        if empty.size:
            raise GoatDNAError(
                f"{option} {path}: motif {motif.name!r} row {int(empty[0]) + 1} (of {len(pwm)}) "
                "is all zeros; give each row of its letter-probability matrix a positive "
                "probability"
            )
        out.append(PlantedMotif(str(motif.name), pwm / pwm.sum(axis=1, keepdims=True)))
    if not out:
        raise GoatDNAError(f"{option} {path}: holds no MOTIF; give at least one PWM")
    return out


def _meme_matrices(text: str) -> list[list[list[float]]]:
    """Each MOTIF's letter-probability rows as written, read by Biopython's rules (the rows after
    the ``letter-probability matrix:`` line: ``w=`` of them, or up to a line without 4 numbers)."""
    lines = iter(text.splitlines())
    matrices = []
    for line in lines:
        if not line.startswith("MOTIF"):
            continue
        header = next((x for x in lines if x.startswith("letter-probability matrix:")), "")
        width = int(header.split("w=")[1].split()[0]) if "w=" in header else None
        rows: list[list[float]] = []
        for row in lines:
            fields = row.split()
            if len(fields) != 4:
                break
            rows.append([float(x) for x in fields])
            if width and len(rows) == width:
                break
        matrices.append(rows)
    return matrices


def plant_motifs(block: np.ndarray, motifs: list[PlantedMotif], rate: float,
                 rng: np.random.Generator, *, shuffle: bool = False) -> list[str]:  # fmt: skip
    """Plant ``motifs`` into the plain tokens ``block`` (w,) in place (see the module docstring);
    returns the ``name:start:strand`` of each instance. ``shuffle``: plant decoys instead, each
    instance's letters permuted (`shuffled_instance`)."""
    chosen = [m for m in motifs if rng.random() < rate] or [motifs[int(rng.integers(len(motifs)))]]
    pwms = [m.pwm for m in motifs]  # a decoy must read as none of them (`shuffled_instance`)
    reach = max(-(-len(pwm) // 2) for pwm in pwms) - 1  # genome letters a decoy's edge can join
    taken = np.zeros(block.size, dtype=bool)
    placed = []
    for motif in chosen:
        width = motif.pwm.shape[0]
        for _ in range(100):  # rejection: a place that overlaps no earlier instance
            start = int(rng.integers(0, block.size - width + 1))
            if not taken[start : start + width].any():
                break
        else:
            continue
        draws = rng.random((width, 1))  # a column's letter: where its draw falls in the cumsum
        letters = np.minimum((draws >= np.cumsum(motif.pwm, axis=1)).sum(axis=1), 3)
        letters = letters.astype(np.uint8)
        strand = "-" if rng.random() < 0.5 else "+"
        if strand == "-":
            letters = (3 - letters)[::-1]  # A C G T = 0 1 2 3: the complement is 3 - b
        if shuffle:  # the letters around it count: a decoy's edge plus the genome can read
            left = block[max(0, start - reach) : start]
            right = block[start + width : start + width + reach]
            letters = shuffled_instance(letters, pwms, rng, left, right)
        block[start : start + width] = letters
        taken[start : start + width] = True
        placed.append(f"{motif.name}:{start}:{strand}")
    return placed


def reads_as(letters: np.ndarray, pwm: np.ndarray) -> bool:
    """Whether any half of ``letters`` reads as any half of ``pwm`` (w, 4) on either strand: some
    ``ceil(w / 2)`` consecutive letters each more likely under the aligned PWM columns (at any
    offset) than under a uniform background. A decoy must not: a full-width score alone lets
    a decoy keep half a motif (``CACGT`` of ``CACGTG``), which a model learns and TF-MoDISco
    then reports in the class where nothing was planted.

    Dynamic programming along the diagonals of (column, letter) pairs, linear in the PWM's width
    and in ``len(letters)``: a table of every word of ``half`` letters (4 ** half entries) took
    1 TiB for a 40-column JASPAR matrix, and its base-4 word codes overflow int64 wider still."""
    half = -(-len(pwm) // 2)
    if len(letters) < half:
        return False
    codes = np.asarray(letters, dtype=np.intp)
    for motif in (pwm, pwm[::-1, ::-1]):  # the reverse complement: A C G T = 0 1 2 3
        fits = motif[:, codes] > 0.25  # (w, n): column c's letter beats the background at p
        # run[p]: how many letters up to p fit the columns up to c, aligned (a diagonal's run)
        run = fits[0].astype(np.int64)
        for c in range(1, len(motif)):
            if (run >= half).any():
                return True
            run = np.concatenate(([1], run[:-1] + 1)) * fits[c]
        if (run >= half).any():
            return True
    return False


def shuffled_instance(letters: np.ndarray, pwms: list[np.ndarray], rng: np.random.Generator,
                      left: np.ndarray, right: np.ndarray) -> np.ndarray:  # fmt: skip
    """A permutation of ``letters`` (the same letter counts) in which no half reads as any half
    of any of ``pwms`` (`reads_as`; all the task's motifs: ``CACGTG``'s letters can spell
    ``AGCT``, half of ``GATAAGCT``), also across its edges into the letters ``left`` and
    ``right`` of it; redrawn up to 1000 times, else the last draw is kept (as for letters that
    cannot be reordered away from the motifs)."""
    out = rng.permutation(letters)
    for _ in range(1000):
        around = np.concatenate([left, out, right])
        if not any(reads_as(around, pwm) for pwm in pwms):
            break
        out = rng.permutation(letters)
    return out


def _motifs_to_plant(options: WindowTaskOptions) -> list[PlantedMotif]:
    """The PWMs a ``motif`` task plants (checked before any work); none for other labels."""
    if options.decoys not in DECOYS:
        raise GoatDNAError(f"--decoys {options.decoys!r}: choose one of {', '.join(DECOYS)}")
    if options.label != "motif":
        if options.motifs is not None:
            raise GoatDNAError("--motifs: only --label motif plants motifs")
        return []
    if options.motifs is None:
        raise GoatDNAError("--label motif: give the PWMs to plant with --motifs FILE.meme")
    planted = read_meme_motifs(options.motifs)
    widest = max(m.pwm.shape[0] for m in planted)
    if widest > options.window:
        raise GoatDNAError(
            f"--motifs {options.motifs}: a motif of {widest} bases is wider than --window "
            f"{options.window}"
        )
    return planted


def _windows(genome: ShardedGenome, split: str, window: int) -> tuple[np.ndarray, list[str]]:
    """(tokens with flags (n, window) uint8, ids) for every N-free tiled window of a split."""
    tokens = genome.tokens(split)
    rows: list[np.ndarray] = []
    ids: list[str] = []
    for record in genome.records(split):
        count = record.length // window
        if count == 0:
            continue
        block = np.asarray(tokens[record.offset : record.offset + count * window]).reshape(
            count, window
        )
        keep = ~is_n(block).any(axis=1)
        rows.append(block[keep])
        for k in np.flatnonzero(keep):
            start = record.start + int(k) * window
            ids.append(f"{record.name}:{start + 1}-{start + window}")
    if not rows:
        return np.zeros((0, window), dtype=np.uint8), []
    return np.concatenate(rows), ids


def _balanced_pick(labels: np.ndarray, limit: int, rng: np.random.Generator) -> np.ndarray:
    """Indices (sorted, so files keep genome order) of at most ``limit`` rows, classes balanced."""
    classes = np.unique(labels)
    pools = [rng.permutation(np.flatnonzero(labels == c)) for c in classes]
    quota = limit // max(1, len(classes))
    taken = [pool[:quota] for pool in pools]
    spare = limit - sum(t.size for t in taken)
    rest = rng.permutation(np.concatenate([pool[quota:] for pool in pools]))[: max(0, spare)]
    return np.sort(np.concatenate([*taken, rest]))


def make_window_task(
    data_dir: str | Path, out_dir: str | Path, options: WindowTaskOptions, *, force: bool = False
) -> dict:
    """Write train/val/test CSVs and task.json into ``out_dir``; returns the task.json content."""
    if options.window < 8:
        raise GoatDNAError(f"--window {options.window}: use at least 8 nt")
    if options.max_train < 2 or options.max_eval < 2:
        raise GoatDNAError("--max-train and --max-eval must be at least 2")
    check_bounds(options, GoatDNAError)  # seed, plant_rate
    planted = _motifs_to_plant(options)
    genome = ShardedGenome(data_dir)
    out = Path(out_dir)
    with output_lock(out, True):  # one writer of --out: a second run is refused
        claim_output_folder(out, force, owns=lambda entry: entry.name in TASK_FILES,
                            what="task", inputs=[data_dir, options.motifs])  # fmt: skip
        files, info = _task_files(genome, data_dir, options, planted)
        _write_task(out, files)
    return info


def _task_files(
    genome: ShardedGenome,
    data_dir: str | Path,
    options: WindowTaskOptions,
    planted: list[PlantedMotif],
) -> tuple[dict[str, str], dict]:
    """The task's files (name -> text) and its task.json content."""
    windows = {}
    for split in TASK_SPLITS:
        if split not in genome.split_names():
            raise GoatDNAError(
                f"{data_dir}: split {split!r} is empty; prepare the data with val and test "
                "hold-outs (e.g. --val-fraction/--test-fraction)"
            )
        windows[split] = _windows(genome, split, options.window)
        if not windows[split][1]:
            raise GoatDNAError(
                f"{data_dir}: split {split!r} has no N-free window of {options.window} nt"
            )

    thresholds: list[float] = []
    if options.label == "gc":
        train_gc = _gc(windows["train"][0])
        thresholds = [float(q) for q in np.quantile(train_gc, [1 / 3, 2 / 3])]
        names = np.array(["low", "mid", "high"])
    rng = np.random.default_rng(options.seed)
    texts: dict[str, str] = {}
    counts: dict[str, dict[str, int]] = {}
    for split in TASK_SPLITS:
        block, ids = windows[split]
        if options.label == "repeat":
            masked = ((block & REPEAT_FLAG) != 0).mean(axis=1)
            labels = np.where(masked >= 0.5, "1", "0")
        elif options.label == "motif":
            labels = np.array(PLANTED_CLASSES)[rng.integers(0, 2, size=len(ids))]
        else:
            labels = names[np.searchsorted(thresholds, _gc(block), side="right")]
        limit = options.max_train if split == "train" else options.max_eval
        pick = _balanced_pick(labels, limit, rng)
        values, freq = np.unique(labels[pick], return_counts=True)
        counts[split] = {str(v): int(c) for v, c in zip(values, freq, strict=True)}
        if split == "train" and len(values) < 2:
            raise GoatDNAError(
                f"{data_dir}: every train window has the label {values[0]!r}; try --label gc"
            )
        plain = block[pick] & TOKEN_MASK  # (rows, window)
        extra = _plant(plain, labels[pick], planted, options, rng) if planted else {}
        rows = [ids[row] for row in pick], [str(labels[row]) for row in pick]
        texts[split] = _split_csv(*rows, plain, extra)

    info = {
        "task": f"window-{options.label}",
        "options": asdict(options),
        "gc_thresholds": thresholds,
        "counts": counts,
        "data_dir": str(data_dir),
        "data_manifest_sha256": genome.manifest_sha256,
    }
    files = {f"{split}.csv": texts[split] for split in TASK_SPLITS}
    return {**files, "task.json": json_text(info)}, info


def _plant(plain: np.ndarray, labels: np.ndarray, planted: list[PlantedMotif],
           options: WindowTaskOptions, rng: np.random.Generator) -> dict[str, list[list[str]]]:  # fmt: skip
    """Plant motifs in place into the ``motif`` rows of ``plain`` (rows, window) and, with
    shuffled decoys, decoys into the others; returns the CSV's extra columns (``planted``, and
    ``decoys``), each row's instances as ``name:start:strand``."""
    shuffle = options.decoys == "shuffled"
    instances: list[list[str]] = []
    decoys: list[list[str]] = []
    for k, label in enumerate(labels):
        is_motif = label == "motif"
        placed = (
            plant_motifs(plain[k], planted, options.plant_rate, rng, shuffle=not is_motif)
            if is_motif or shuffle
            else []
        )
        instances.append(placed if is_motif else [])
        decoys.append([] if is_motif else placed)
    return {"planted": instances, "decoys": decoys} if shuffle else {"planted": instances}


def _write_task(out: Path, files: dict[str, str]) -> None:
    """The folder appears whole, or not at all (a full disk leaves nothing behind); an existing
    one (empty, or an earlier task with --force) is swapped out only once the new one is whole,
    so no reader sees a train.csv of one task beside a task.json of another."""
    with atomic_dir(out) as folder:
        for name, text in files.items():
            with open(folder / name, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())  # durable before the folder is renamed into place


def _split_csv(ids: list[str], labels: list[str], plain: np.ndarray,
               extra: dict[str, list[list[str]]]) -> str:  # fmt: skip
    """One split's CSV text: ``id,sequence,label`` (and ``planted``, ``decoys`` for a motif
    task: each row's instances joined by ``;``)."""
    letters = UPPER_DECODE[plain]  # (rows, window) ASCII, upper case
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["id", "sequence", "label", *extra])
    for k, (name, label) in enumerate(zip(ids, labels, strict=True)):
        cells = [name, letters[k].tobytes().decode("ascii"), label]
        writer.writerow(cells + [";".join(column[k]) for column in extra.values()])
    return buf.getvalue()


def _gc(block: np.ndarray) -> np.ndarray:
    tokens = block & TOKEN_MASK
    return ((tokens == C) | (tokens == G)).mean(axis=1)
