"""`prepare_genome`: FASTA -> validated token shards, resumable, optionally in parallel.

How a run is laid out on disk, so that it can be killed at any moment and resumed:

* ``DIR/.prepare/`` is the run's work folder (`goatdna.workdir.WorkDir`, the engine every
  resumable command shares): its ``state.json`` is the plan, which fixes the records and their
  offsets before any base is written, and ``--resume`` refuses to continue a plan made from
  another source or other options, naming what differs.
* Several FASTA files (`goatdna.data_prep.sources`) are planned one by one and their records
  laid out one source after the other in the same split files.
* Each split is written into ``DIR/.prepare/{split}.bin.partial``, preallocated to its final
  length when the work folder is set up; a worker writes a record at its offset with ``pwrite``,
  so records are independent.
* Records are the units of work: when one is complete, its unit file
  ``DIR/.prepare/record-{index}.json`` (its counts and sha256, with the file's own checksum)
  appears, atomically. Resume redoes only records without an intact unit file.
* At the end the partial files are renamed to ``DIR/{split}.bin``, then ``manifest.json`` is
  written (temp name + rename) and ``.prepare`` removed. A ``.bin`` or manifest that exists is
  complete, and a resumed run ends byte-identical to an uninterrupted one (nothing depends on
  timing or on which process wrote a record).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from goatdna import __version__
from goatdna.atomic import (
    DiskFullError,
    atomic_write_bytes,
    check_output_dir,
    commit_file,
    disk_full_error,
    is_disk_full,
)
from goatdna.data_prep.options import PrepareOptions
from goatdna.data_prep.progress import Reporter
from goatdna.data_prep.record_digest import PIPELINE_STEP, RecordDigest
from goatdna.data_prep.shards import (
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST_NAME,
    Record,
    ShardedGenome,
    manifest_bytes,
    split_file_name,
    token_table_manifest,
)
from goatdna.data_prep.sources import (
    bed_contig_resolver,
    check_contig_lists,
    options_for_source,
    source_names,
    unique_names,
)
from goatdna.data_prep.splits import SPLITS, PlannedRecord, plan_splits, select_contigs
from goatdna.data_prep.synthetic import (
    SyntheticGenomeConfig,
    synthetic_fasta_bytes,
    write_bytes_if_changed,
)
from goatdna.errors import GoatDNAError
from goatdna.faults import crash_point, crash_point_add
from goatdna.formats import json_text
from goatdna.io.fasta import FastaSource, open_fasta
from goatdna.locking import folder_lock
from goatdna.runtime import die_with_parent
from goatdna.workdir import SETUP_SUFFIX, WorkDir, input_stamp

WORK_DIR_NAME = ".prepare"


@dataclass(frozen=True)
class RecordTask:
    index: int
    record: PlannedRecord  # named as the contig is in its FASTA
    offset: int
    source: int  # index of its FASTA in the run's sources
    name: str  # the record's name in the dataset (source:contig when renamed)


@dataclass(frozen=True)
class SourcePlan:
    """One FASTA of the run: its name, what was kept of it and how it is split."""

    name: str
    fasta: Path
    reader: FastaSource
    mode: str
    records: tuple[PlannedRecord, ...]
    renamed: dict[str, str]  # contig -> record name, for contigs other sources also have


@dataclass(frozen=True)
class RecordStats:
    n_count: int
    softmask_count: int
    gc_count: int
    sha256: str


RESUME_HINT = "rerun the same command with --resume (it keeps every finished record)"


def _atomic_write(path: Path, data: bytes, durable: bool = True) -> None:
    atomic_write_bytes(path, data, then=RESUME_HINT, durable=durable)


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as handle:
        while block := handle.read(1 << 23):
            digest.update(block)
    return digest.hexdigest()


class _SourceHasher:
    """sha256 of the source file in a background thread (hashlib releases the GIL).

    ``start()`` is called once worker processes exist: forking a process that runs threads
    is unsafe, so the thread must not be alive when the pool forks.
    """

    def __init__(self, path: Path, cache: Path | None) -> None:
        self.path = path
        self.cache = cache
        self.result: str | None = None
        self.error: BaseException | None = None
        stamp = input_stamp(path)
        self.stamp = {"size": stamp.size, "mtime_ns": stamp.mtime_ns}
        if cache is not None and cache.is_file():
            try:
                saved = json.loads(cache.read_text())
                if saved.get("stamp") == self.stamp:
                    self.result = saved["sha256"]
            except (OSError, ValueError, KeyError):
                pass
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.result is None and self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            self.result = _sha256_file(self.path)
        except BaseException as err:  # surfaced by get()
            self.error = err

    def get(self) -> str:
        self.start()
        if self._thread is not None:
            self._thread.join()
        if self.error is not None:
            raise GoatDNAError(f"cannot read {self.path}: {self.error}")
        assert self.result is not None
        if self.cache is not None and self.cache.parent.is_dir():
            _atomic_write(
                self.cache,
                json_text(
                    {"stamp": self.stamp, "sha256": self.result}, indent=None, end=""
                ).encode(),
            )
        return self.result


def _pwrite_all(fd: int, data: bytes, offset: int, path: Path | None = None) -> None:
    view = memoryview(data)
    try:
        while view:
            written = os.pwrite(fd, view, offset)
            view = view[written:]
            offset += written
    except OSError as err:
        if is_disk_full(err):
            raise disk_full_error(path or "a split file", len(view), RESUME_HINT) from None
        raise


def process_record(
    source: FastaSource,
    task: RecordTask,
    partial: Path,
    chunk_bases: int,
    advance: Callable[[str, int], None] | None = None,
) -> RecordStats:
    """Read, validate, translate, hash and write one record at its offset in its split file.

    A record of more than one chunk is hashed and counted in a helper thread while the next
    chunk is read (`RecordDigest`); the bytes, counts and sha256 do not depend on the chunking.
    """
    step = min(chunk_bases, PIPELINE_STEP)
    reader = source.open_reader()
    contig = source.contig(task.record.name)
    fd = os.open(partial, os.O_WRONLY)
    try:
        with RecordDigest(background=task.record.length > step) as digest:
            pos = task.record.start
            while pos < task.record.end:
                end = min(task.record.end, pos + step)
                tokens = reader.read_tokens(contig, pos, end)
                _pwrite_all(fd, tokens, task.offset + pos - task.record.start, partial)
                crash_point_add("prepare.bases_written", len(tokens))
                digest.add(tokens)
                if advance is not None:
                    advance(task.name, end - pos)
                pos = end
            n_count, soft_count, gc_count, sha256 = digest.finish()
    finally:
        os.close(fd)
        reader.close()
    return RecordStats(n_count, soft_count, gc_count, sha256)


# Worker-process side of the pool: progress goes back through a queue.
_WORKER_QUEUE = None


def _worker_init(queue, parent_pid: int | None = None) -> None:
    global _WORKER_QUEUE
    if parent_pid is not None:
        die_with_parent(parent_pid)
    _WORKER_QUEUE = queue
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C


def _worker_advance(name: str, n: int) -> None:
    if _WORKER_QUEUE is not None:
        _WORKER_QUEUE.put((name, n))


def _worker_process(source, task, partial, chunk_bases) -> tuple[int, RecordStats]:
    return task.index, process_record(source, task, partial, chunk_bases, _worker_advance)


# ---------------------------------------------------------------------------------------------


def _plan_tasks(plans: Sequence[SourcePlan]) -> tuple[list[RecordTask], dict[str, int]]:
    offsets = dict.fromkeys(SPLITS, 0)
    tasks: list[RecordTask] = []
    for source, plan in enumerate(plans):
        for rec in plan.records:
            name = plan.renamed.get(rec.name, rec.name)
            tasks.append(RecordTask(len(tasks), rec, offsets[rec.split], source, name))
            offsets[rec.split] += rec.length
    return tasks, offsets


def _plan_document(plans: Sequence[SourcePlan], multi: bool, tasks: Sequence[RecordTask]) -> dict:
    records = [[t.name, t.record.split, t.record.start, t.record.end, t.offset] for t in tasks]
    if not multi:
        stamp = input_stamp(plans[0].fasta)
        return {
            "format_version": FORMAT_VERSION,
            "source": {
                "name": plans[0].fasta.name,
                "size": stamp.size,
                "mtime_ns": stamp.mtime_ns,
            },
            "split_mode": plans[0].mode,
            "records": records,
        }
    sources = []
    for plan in plans:
        stamp = input_stamp(plan.fasta)
        sources.append(
            {
                "name": plan.name,
                "file": plan.fasta.name,
                "size": stamp.size,
                "mtime_ns": stamp.mtime_ns,
                "split_mode": plan.mode,
            }
        )
    return {
        "format_version": FORMAT_VERSION,
        "sources": sources,
        "records": [[*row, t.source] for row, t in zip(records, tasks, strict=True)],
    }


def _dataset_files(out_dir: Path) -> list[Path]:
    names = [MANIFEST_NAME, WORK_DIR_NAME] + [split_file_name(s) for s in SPLITS]
    return [out_dir / n for n in names]


def _remove_dataset(out_dir: Path) -> None:
    for path in _dataset_files(out_dir):
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    for tmp in [out_dir / (MANIFEST_NAME + ".tmp"), *out_dir.glob(f".{MANIFEST_NAME}.*.tmp")]:
        tmp.unlink(missing_ok=True)


def _source_identities(existing: dict) -> list[tuple]:
    """(name, file, size, sha256, split mode) of each source a manifest was made from."""
    if "sources" in existing:
        return [
            (s.get("name"), s.get("file"), s.get("size"), s.get("sha256"), s.get("split_mode"))
            for s in existing["sources"]
        ]
    src = existing.get("source", {})
    return [(None, src.get("name"), src.get("size"), src.get("sha256"), existing.get("split_mode"))]


def _same_dataset(
    existing: dict, plans: Sequence[SourcePlan], shas: Sequence[str], multi: bool, tasks
) -> bool:
    new_sources = [
        (p.name if multi else None, p.fasta.name, p.fasta.stat().st_size, sha, p.mode)
        for p, sha in zip(plans, shas, strict=True)
    ]
    if _source_identities(existing) != new_sources:
        return False
    old = [
        (r["name"], r["split"], r["start"], r["end"], r.get("source"))
        for r in existing.get("records", [])
    ]
    new = [
        (
            t.name,
            t.record.split,
            t.record.start,
            t.record.end,
            plans[t.source].name if multi else None,
        )
        for t in tasks
    ]
    return old == new


def _check_out_dir(out_dir: Path, options: PrepareOptions, fastas: Sequence[Path]) -> str:
    """Classify DIR: 'new', 'complete' (has a manifest) or 'interrupted' (has .prepare)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise GoatDNAError(f"--out {out_dir} exists and is not a directory: choose another path")
    if not out_dir.exists():
        return "new"
    if options.force:
        return "new"  # the old dataset is removed once the new run has been planned
    if (out_dir / MANIFEST_NAME).is_file():
        return "complete"
    if (out_dir / WORK_DIR_NAME).is_dir():
        if not options.resume:
            raise GoatDNAError(
                f"{out_dir} holds an interrupted `goatdna prepare`: add --resume to finish it "
                "or --force to start over"
            )
        return "interrupted"
    allowed = {"cache"} | {  # a work folder a killed run was still setting up (WorkDir clears it)
        p.name for p in out_dir.glob(f"{WORK_DIR_NAME}{SETUP_SUFFIX}*")
    }
    for fasta in fastas:
        if fasta.parent.resolve() == out_dir.resolve():  # e.g. prepare_synthetic's synthetic.fa
            allowed |= {fasta.name, fasta.name + ".fai", fasta.name + ".gzi"}
    stray = sorted(p.name for p in out_dir.iterdir() if p.name not in allowed)
    if stray:
        raise GoatDNAError(
            f"--out {out_dir} is not empty and holds no goatdna dataset ({stray[0]}, ...): "
            "choose an empty or new directory, or add --force to write into it"
        )
    return "new"


def prepare_dataset(
    fasta: Sequence[Path] | None,
    out_dir: Path,
    options: PrepareOptions,
    synthetic: SyntheticGenomeConfig | None = None,
    reporter: Reporter | None = None,
) -> ShardedGenome:
    """``goatdna prepare``: ``fasta`` (`prepare_genome`), or with ``synthetic`` and no FASTA the
    embedded synthetic genome (`prepare_synthetic`), into shards in ``out_dir``.

    The combinations the command refuses are refused here, before anything is read or written;
    their messages name the command's flags.
    """
    if options.force and options.resume:
        raise GoatDNAError("--force and --resume exclude each other: choose one")
    if synthetic is not None:
        if fasta:
            raise GoatDNAError("give either a FASTA file or --synthetic, not both")
        if options.source_names is not None:
            raise GoatDNAError("--source-names needs FASTA files: it does not apply to --synthetic")
        return prepare_synthetic(out_dir, synthetic, options, reporter)
    if not fasta:
        raise GoatDNAError("missing FASTA argument: pass a FASTA file, or --synthetic")
    return prepare_genome(fasta, out_dir, options, reporter)


def prepare_genome(
    fasta: Path | Sequence[Path],
    out_dir: Path,
    options: PrepareOptions | None = None,
    reporter: Reporter | None = None,
) -> ShardedGenome:
    """Turn ``fasta`` (one FASTA, or several: see `goatdna.data_prep.sources`) into
    ``out_dir/{train,val,test}.bin`` + ``manifest.json``; return the reader.

    Raises GoatDNAError for any input the user must fix; never leaves a half-written output.
    """
    options = options or PrepareOptions()
    fastas = [Path(fasta)] if isinstance(fasta, (str, Path)) else [Path(f) for f in fasta]
    if not fastas:
        raise GoatDNAError("missing FASTA argument: pass one or more FASTA files")
    out_dir = Path(out_dir)
    check_output_dir(out_dir, "--out")
    with folder_lock(out_dir, "--out"):
        return _prepare_locked(fastas, out_dir, options, reporter)


def _index_files(fasta: Path) -> list[Path]:
    return [Path(f"{fasta}.fai"), Path(f"{fasta}.gzi")]


def _prepare_locked(
    fastas: list[Path], out_dir: Path, options: PrepareOptions, reporter: Reporter | None
) -> ShardedGenome:
    own_reporter = reporter is None
    reporter = reporter or Reporter(enabled=options.progress)
    created_out = not out_dir.exists()
    fresh_work = options.force or not (out_dir / WORK_DIR_NAME).exists()
    new_indexes = [p for f in fastas for p in _index_files(f) if not p.exists()]
    try:
        try:
            return _prepare(fastas, out_dir, options, reporter)
        except OSError as err:  # e.g. the gzip cache or an index filling the disk
            if is_disk_full(err):
                where = err.filename or out_dir
                raise disk_full_error(where, None, RESUME_HINT) from None
            raise
    except GoatDNAError as err:
        # Bad input: leave nothing behind that looks like a dataset or a resumable run.
        # (A killed process cannot get here, so its work directory stays for --resume; a
        # full disk keeps the records it finished, for --resume.)
        reporter.close()
        work = out_dir / WORK_DIR_NAME
        keep = isinstance(err, DiskFullError) and any(work.glob(RECORD_UNITS))
        if not keep:
            for index in new_indexes:  # an index we made for an input we then rejected
                index.unlink(missing_ok=True)
            if created_out:
                shutil.rmtree(out_dir, ignore_errors=True)
            elif fresh_work:
                shutil.rmtree(work, ignore_errors=True)
        raise
    finally:
        if own_reporter:
            reporter.close()


def _prepare(  # noqa: C901, PLR0915 (the plan -> work -> commit sequence reads in one place)
    fastas: list[Path], out_dir: Path, options: PrepareOptions, reporter: Reporter
) -> ShardedGenome:
    if options.chunk_bases < 1:
        raise GoatDNAError("chunk_bases must be >= 1")
    multi = len(fastas) > 1 or options.source_names is not None
    names = source_names(fastas, options.source_names)
    state = _check_out_dir(out_dir, options, fastas)
    if state == "complete":
        for fasta in fastas:
            if not fasta.is_file():
                raise GoatDNAError(f"FASTA file {fasta} does not exist: check the path")
        existing = json.loads((out_dir / MANIFEST_NAME).read_text())
        files = [(i[1], i[2]) for i in _source_identities(existing)]
        if files != [(f.name, f.stat().st_size) for f in fastas]:
            raise GoatDNAError(
                f"--out {out_dir} already holds a different dataset (from "
                f"{', '.join(str(f[0]) for f in files)}): add --force to overwrite it, or "
                "choose another directory"
            )
    cache_dir = options.cache_dir or (out_dir / "cache")
    plans = _plan_sources(fastas, names, multi, options, cache_dir, reporter)
    tasks, split_lengths = _plan_tasks(plans)
    plan_doc = _plan_document(plans, multi, tasks)
    if state == "complete":
        shas = [_SourceHasher(p.fasta, None).get() for p in plans]
        if _same_dataset(existing, plans, shas, multi, tasks):
            shutil.rmtree(out_dir / WORK_DIR_NAME, ignore_errors=True)
            reporter.message(f"{out_dir} already holds this dataset: nothing to do")
            return ShardedGenome(out_dir)
        raise GoatDNAError(
            f"--out {out_dir} already holds a dataset made from other input or options: "
            "add --force to overwrite it, or choose another directory"
        )

    if options.force:
        _remove_dataset(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = WorkDir(out_dir / WORK_DIR_NAME, "prepare", plan_doc, _record_unit_name)
    # state "interrupted" means --resume (a plain run was refused above); --resume with
    # nothing interrupted is refused by the engine
    work.open(options.resume, setup=lambda folder: _allocate_partials(folder, split_lengths))
    if state == "interrupted":
        reporter.message(f"resuming the interrupted run in {out_dir}")

    hashers = [
        _SourceHasher(
            p.fasta, work.dir / (f"source_sha256.{i}.json" if multi else "source_sha256.json")
        )
        for i, p in enumerate(plans)
    ]

    def start_hashers() -> None:
        for hasher in hashers:
            hasher.start()

    stats = _run_tasks([p.reader for p in plans], tasks, work, options, reporter, start_hashers)
    shas = [h.get() for h in hashers]
    manifest = _manifest(plans, shas, multi, tasks, stats, split_lengths)
    _finalize(out_dir, work, manifest)
    return ShardedGenome(out_dir)


def _plan_sources(
    fastas: list[Path],
    names: list[str],
    multi: bool,
    options: PrepareOptions,
    cache_dir: Path,
    reporter: Reporter,
) -> list[SourcePlan]:
    """Open every FASTA and plan its records; contig lists and hold-outs apply per source."""
    readers = [
        open_fasta(
            fasta,
            cache_dir / name if multi else cache_dir,
            reporter.message,
            reporter.bytes_progress,
        )
        for fasta, name in zip(fastas, names, strict=True)
    ]
    if not multi:
        kept = select_contigs(readers[0].contigs, options, reporter.message)
        plan = plan_splits(kept, readers[0].contigs, options, reporter.message)
        return [SourcePlan(names[0], fastas[0], readers[0], plan.mode, plan.records, {})]
    contigs = {name: {c.name for c in r.contigs} for name, r in zip(names, readers, strict=True)}
    check_contig_lists(options, contigs)
    planned = []
    for name, fasta, reader in zip(names, fastas, readers, strict=True):
        scoped = options_for_source(options, name, contigs)
        resolver = bed_contig_resolver(name, contigs) if options.split_bed else None

        def message(text: str, where: str = f"{name} ({fasta.name})") -> None:
            reporter.message(f"{where}: {text}")

        try:
            kept = select_contigs(reader.contigs, scoped, message)
            plan = plan_splits(kept, reader.contigs, scoped, message, resolver)
        except GoatDNAError as err:
            raise GoatDNAError(f"source {name} ({fasta}): {err}") from None
        planned.append((name, fasta, reader, plan))
    renamed = unique_names(contigs, {name: plan.records for name, _, _, plan in planned})
    clashes = sorted({c for names_ in renamed.values() for c in names_})
    if clashes:
        shown = ", ".join(clashes[:5]) + (
            f", ... ({len(clashes)} in all)" if len(clashes) > 5 else ""
        )
        reporter.message(
            f"contig names found in more than one FASTA are stored as source:contig "
            f"(e.g. {names[0]}:{clashes[0]}): {shown}"
        )
    return [
        SourcePlan(name, fasta, reader, plan.mode, plan.records, renamed[name])
        for name, fasta, reader, plan in planned
    ]


def _allocate_partials(work: Path, split_lengths: dict[str, int]) -> None:
    """Create the split files at full length, reserving the disk space up front where the
    filesystem can (``posix_fallocate``), so a disk too small fails now, with the size needed."""
    total = sum(split_lengths.values())
    for split in SPLITS:
        path = work / (split_file_name(split) + ".partial")
        with open(path, "wb") as handle:
            length = split_lengths[split]
            try:
                if length and hasattr(os, "posix_fallocate"):
                    os.posix_fallocate(handle.fileno(), 0, length)
                handle.truncate(length)
            except OSError as err:
                if is_disk_full(err):
                    raise disk_full_error(work, total, "rerun the command") from None
                if err.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                    raise
                handle.truncate(length)  # no preallocation on this filesystem: sparse file


RECORD_UNITS = "record-*.json"


def _record_unit_name(index: int) -> str:
    return f"record-{index:06d}.json"


def _load_done(
    work: WorkDir, tasks: Sequence[RecordTask], message: Callable[[str], None]
) -> dict[int, RecordStats]:
    """The stats of the records whose unit file is intact (a damaged one is said and redone)."""
    finished, _ = work.pending([t.index for t in tasks], message)
    done: dict[int, RecordStats] = {}
    for index in finished:
        try:
            done[index] = RecordStats(**json.loads(work.load(index)))
        except (ValueError, TypeError):  # intact bytes, not our record: redo it
            work.unit_path(index).unlink(missing_ok=True)
    return done


def _run_tasks(
    sources: Sequence[FastaSource],
    tasks: Sequence[RecordTask],
    work: WorkDir,
    options: PrepareOptions,
    reporter: Reporter,
    start_threads: Callable[[], None],
) -> dict[int, RecordStats]:
    """Process the records not yet journaled; ``start_threads`` runs once workers exist."""
    done = _load_done(work, tasks, reporter.message)
    pending = [t for t in tasks if t.index not in done]
    finished_here = 0

    totals: dict[str, int] = {}
    completed: dict[str, int] = {}
    for t in tasks:
        totals[t.name] = totals.get(t.name, 0) + t.record.length
        if t.index in done:
            completed[t.name] = completed.get(t.name, 0) + t.record.length

    def begin() -> None:  # threads (hashing, progress refresh) only after the pool has forked
        start_threads()
        reporter.start_contigs(totals, completed)

    def mark_done(task: RecordTask, stat: RecordStats) -> None:
        nonlocal finished_here
        done[task.index] = stat
        # one unit per record (34k for a HyenaDNA BED): no fsync each
        work.save(task.index, json_text(stat.__dict__, indent=None, end="").encode(), durable=False)
        finished_here += 1
        crash_point("prepare.record_journaled", finished_here)

    def partial(task: RecordTask) -> Path:
        return work.dir / (split_file_name(task.record.split) + ".partial")

    if options.workers is not None and options.workers < 1:
        raise GoatDNAError(f"--workers must be >= 1, got {options.workers}")
    workers = options.workers or min(4, os.cpu_count() or 1)
    workers = min(workers, len(pending)) if pending else 1
    if workers == 1:
        begin()
        for task in pending:
            stat = process_record(
                sources[task.source], task, partial(task), options.chunk_bases, reporter.advance
            )
            mark_done(task, stat)
    else:
        _run_pool(sources, pending, workers, options, reporter, partial, mark_done, begin)
    reporter.stop_contigs()
    return done


def _run_pool(sources, pending, workers, options, reporter, partial, mark_done, begin) -> None:
    import multiprocessing as mp
    import queue as queue_mod

    context = mp.get_context("fork" if hasattr(os, "fork") else "spawn")
    progress_queue = context.Queue()
    by_index = {t.index: t for t in pending}
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=_worker_init,
        initargs=(progress_queue, os.getpid()),
    ) as pool:
        futures = {
            pool.submit(_worker_process, sources[t.source], t, partial(t), options.chunk_bases)
            for t in pending
        }
        begin()  # with "fork", every worker process exists after the first submit
        try:
            while futures:
                finished, futures = wait(futures, timeout=0.2, return_when=FIRST_COMPLETED)
                _drain(progress_queue, reporter, queue_mod)
                for fut in finished:
                    index, stat = fut.result()  # re-raises a worker's GoatDNAError
                    mark_done(by_index[index], stat)
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise
        _drain(progress_queue, reporter, queue_mod)


def _drain(progress_queue, reporter: Reporter, queue_mod) -> None:
    while True:
        try:
            name, n = progress_queue.get_nowait()
        except queue_mod.Empty:
            return
        reporter.advance(name, n)


def _manifest(
    plans: Sequence[SourcePlan],
    shas: Sequence[str],
    multi: bool,
    tasks: Sequence[RecordTask],
    stats: dict[int, RecordStats],
    split_lengths: dict[str, int],
) -> dict:
    records = []
    for t in tasks:
        s = stats[t.index]
        records.append(
            Record(
                name=t.name,
                split=t.record.split,
                start=t.record.start,
                end=t.record.end,
                offset=t.offset,
                length=t.record.length,
                n_count=s.n_count,
                softmask_count=s.softmask_count,
                gc_count=s.gc_count,
                sha256=s.sha256,
                source=plans[t.source].name if multi else "",
            ).to_dict()
        )
    splits = {}
    for split in SPLITS:
        recs = [r for r in records if r["split"] == split]
        splits[split] = {
            "file": split_file_name(split),
            "length": split_lengths[split],
            "records": len(recs),
            "n_count": sum(r["n_count"] for r in recs),
            "softmask_count": sum(r["softmask_count"] for r in recs),
            "gc_count": sum(r["gc_count"] for r in recs),
        }
    described = [
        {
            "name": p.name,
            "file": p.fasta.name,
            "size": p.fasta.stat().st_size,
            "sha256": sha,
            "compression": p.reader.compression,
            "split_mode": p.mode,
            "renamed": p.renamed,
        }
        for p, sha in zip(plans, shas, strict=True)
    ]
    modes = {p.mode for p in plans}
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "created_by": f"goatdna {__version__}",
        **(
            {"sources": described}
            if multi
            else {
                "source": {
                    "name": described[0]["file"],
                    **{k: described[0][k] for k in ("size", "sha256", "compression")},
                }
            }
        ),
        "token_table": token_table_manifest(),
        "split_mode": modes.pop() if len(modes) == 1 else "per-source",
        "splits": splits,
        "records": records,
    }


def _finalize(out_dir: Path, work: WorkDir, manifest: dict) -> None:
    for split in SPLITS:
        partial = work.dir / (split_file_name(split) + ".partial")
        final = out_dir / split_file_name(split)
        if partial.exists():
            commit_file(partial, final, then=RESUME_HINT)
        elif not final.is_file() or final.stat().st_size != manifest["splits"][split]["length"]:
            raise GoatDNAError(f"{partial} is missing: rerun with --force")
    _atomic_write(out_dir / MANIFEST_NAME, manifest_bytes(manifest))
    work.remove()


SYNTHETIC_FASTA_NAME = "synthetic.fa"


def prepare_synthetic(
    out_dir: Path,
    config: SyntheticGenomeConfig | None = None,
    options: PrepareOptions | None = None,
    reporter: Reporter | None = None,
) -> ShardedGenome:
    """Write ``out_dir/synthetic.fa`` (deterministic for the seed) and prepare it into out_dir."""
    config = config or SyntheticGenomeConfig()
    options = options or PrepareOptions()
    out_dir = Path(out_dir)
    check_output_dir(out_dir, "--out")
    with folder_lock(out_dir, "--out"):
        return _prepare_synthetic_locked(out_dir, config, options, reporter)


def _prepare_synthetic_locked(
    out_dir: Path,
    config: SyntheticGenomeConfig,
    options: PrepareOptions,
    reporter: Reporter | None,
) -> ShardedGenome:
    fasta = out_dir / SYNTHETIC_FASTA_NAME
    data = synthetic_fasta_bytes(config)
    has_data = (out_dir / MANIFEST_NAME).is_file() or (out_dir / WORK_DIR_NAME).is_dir()
    if has_data and not options.force and not _same_bytes(fasta, data):
        raise GoatDNAError(
            f"--out {out_dir} already holds a dataset from another synthetic genome (other seed "
            "or size): add --force to overwrite it, or choose another directory"
        )
    write_bytes_if_changed(fasta, data)
    return _prepare_locked([fasta], out_dir, options, reporter)


def _same_bytes(path: Path, data: bytes) -> bool:
    return path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data
