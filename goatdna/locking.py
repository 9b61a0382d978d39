"""One writer per output folder: an exclusive ``fcntl.flock`` held for a whole command.

Two ``prepare`` runs into one ``--out``, two ``train`` runs on one run directory (``--out``) or two ``report``
runs into one folder would interleave their files. The lock file lies beside the folder
(``PARENT/.NAME.goatdna.lock``), not inside it, so it survives a report folder being swapped in
and never shows up as a stray file of a dataset or run. It holds the pid and command line of its
owner, so the second process can say who is writing. The kernel drops the lock when the owner
exits, however it exits (``kill -9`` included), so a stale lock file never blocks anyone; the owner
removes the file when it is done.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from goatdna.atomic import _make_folders, _remove_empty, write_error
from goatdna.errors import GoatDNAError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks, run unguarded
    fcntl = None  # type: ignore[assignment]


def lock_path(folder: str | Path) -> Path:
    folder = Path(folder).absolute()
    return folder.parent / f".{folder.name}.goatdna.lock"


def _holder(path: Path) -> str:
    try:
        text = path.read_text().strip()
    except OSError:
        text = ""
    pid, _, command = text.partition(" ")
    if not pid.isdigit():
        return "another goatdna process"
    return f"another goatdna process (pid {pid}: {command or '?'})"


@contextmanager
def folder_lock(folder: str | Path, option: str) -> Iterator[Path]:
    """Hold the exclusive lock of ``folder`` for the block; fail at once if another has it.

    ``option`` names the flag in the error (``--out``). Yields the lock file path.
    """
    folder = Path(folder)
    path = lock_path(folder)
    if fcntl is None:  # pragma: no cover
        yield path
        return
    made: list[Path] = []  # parent folders made here: removed again at the end if empty
    while True:
        try:
            # (again on each round: a previous owner may have removed a folder it had made)
            made += _make_folders(path.parent)
        except OSError as err:
            _remove_empty(made)
            raise GoatDNAError(
                f"{option} {folder}: cannot create {path.parent} ({err.strerror or err}); "
                "choose another path"
            ) from None
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            _remove_empty(made)
            raise GoatDNAError(
                f"{option} {folder}: cannot create the lock file {path} "
                f"({err.strerror or err}); choose a writable location"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            _remove_empty(made)
            raise GoatDNAError(
                f"{option} {folder} is in use by {_holder(path)}; wait for it to finish, or "
                "choose another folder"
            ) from None
        # The previous owner may have removed the file between our open and our flock: then
        # we hold a lock on a file nobody else can see; start again on the current one.
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        try:
            os.ftruncate(fd, 0)
            command = " ".join([Path(sys.argv[0]).name if sys.argv else "python", *sys.argv[1:]])
            os.pwrite(fd, f"{os.getpid()} {command}\n".encode(), 0)
        except OSError as err:  # a full disk: nothing of the command could be written either
            translated = write_error(err, folder, "rerun the command")
            if translated is None:
                raise
            raise translated from None
        yield path
    finally:
        with suppress(OSError):
            path.unlink()
        fcntl.flock(fd, fcntl.LOCK_UN)  # forked children share this lock: release it for all
        os.close(fd)
        _remove_empty(made)  # a run refused after the lock leaves no empty parent folder
