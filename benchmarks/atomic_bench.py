"""What crash-safe writing costs: goatdna.atomic against a bare write + rename, and the lock.

Side by side in one run, in one temporary folder on the filesystem of ``--dir``:

- plain: ``open(tmp, "wb").write(data); os.replace(tmp, path)`` (no fsync, what goatdna did
  before `goatdna.atomic`);
- atomic, durable=False: `atomic_write_bytes` without fsync (prepare's per-record journal);
- atomic, durable=True: with fsync of the file and its folder (manifests, configs, reports);
- pre-created temp: the temporary file created empty (O_EXCL) and reopened with truncation, the
  first version of `goatdna.atomic`, kept here because ext4 makes deleting such files slow;
- folder_lock: acquiring and releasing `goatdna.locking.folder_lock` (once per command).

Each row writes ``--files`` small files, then deletes the folder (``shutil.rmtree``): prepare
deletes its journal at the end, so both halves count.

    python benchmarks/atomic_bench.py [--files 2000] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from goatdna.atomic import atomic_write_bytes
from goatdna.locking import folder_lock

DATA = b'{"n_count": 0, "softmask_count": 12, "gc_count": 400, "sha256": "' + b"0" * 64 + b'"}'


def _plain(path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        handle.write(DATA)
    os.replace(tmp, path)


def _precreated(path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    with open(tmp, "wb") as handle:
        handle.write(DATA)
    os.replace(tmp, path)


def _time_files(
    root: Path, name: str, n: int, write: Callable[[Path], None]
) -> tuple[float, float]:
    folder = root / name
    folder.mkdir()
    start = time.perf_counter()
    for i in range(n):
        write(folder / f"{i}.json")
    written = time.perf_counter()
    shutil.rmtree(folder)
    return written - start, time.perf_counter() - written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="goatdna-atomic-bench-", dir=args.dir))
    n = args.files
    try:
        rows = [
            ("plain write + rename", _plain),
            ("atomic, durable=False", lambda p: atomic_write_bytes(p, DATA, durable=False)),
            ("atomic, durable=True", lambda p: atomic_write_bytes(p, DATA, durable=True)),
            ("pre-created temp (old)", _precreated),
        ]
        results = [
            (label, *_time_files(root, f"r{i}", n, fn)) for i, (label, fn) in enumerate(rows)
        ]
        base = results[0][1] + results[0][2]
        print(f"{n} files of {len(DATA)} bytes in {args.dir}")
        print("| method | write s | delete s | total s | ratio to plain |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for label, write, delete in results:
            total = write + delete
            print(f"| {label} | {write:.2f} | {delete:.2f} | {total:.2f} | {total / base:.2f} |")
        start = time.perf_counter()
        for _ in range(200):
            with folder_lock(root / "locked", "--out"):
                pass
        per = (time.perf_counter() - start) / 200
        print(f"| folder_lock acquire + release | | | {per * 1e3:.2f} ms each | |")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
