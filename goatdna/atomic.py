"""Writing files so that a reader sees either the old file or the complete new one, never a part.

Every output of goatdna goes through a temporary name in the same folder (same filesystem, so the
final ``os.replace`` is atomic), is flushed and fsynced, and is renamed into place only when
complete; on any error the temporary file is removed. A full disk (``ENOSPC``/``EDQUOT``) becomes
one `DiskFullError` line that says what was being written and how much space it needs, instead of
a traceback. The output checks here run before any work, so a wrong ``--out`` fails in a second,
not after an hour.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from goatdna.errors import GoatDNAError

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class DiskFullError(GoatDNAError):
    """The disk (or quota) filled up while goatdna was writing; what was finished is kept.

    It keeps what was written and how much it needed, so a caller that learns more about what
    is left (a fresh run that had no checkpoint yet) can say another next step (`then`)."""

    def __init__(self, what: str | Path, needed: int | None, then: str) -> None:
        self.what, self.needed = what, needed
        free = free_bytes(what)
        need = f"it needs about {_size(needed)}" if needed else "it needs more space"
        have = f", {_size(free)} free there" if free is not None else ""
        super().__init__(f"disk full while writing {what} ({need}{have}); free space, then {then}")

    def then(self, then: str) -> DiskFullError:
        """The same line with another next step."""
        return DiskFullError(self.what, self.needed, then)


def is_disk_full(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno in DISK_FULL_ERRNOS


def free_bytes(path: str | Path) -> int | None:
    """Free bytes on the filesystem holding ``path`` (or its nearest existing ancestor)."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


def _size(n: int) -> str:
    if n < 1024:
        return f"{n:,} bytes"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} TiB"


def disk_full_error(what: str | Path, needed: int | None, then: str) -> DiskFullError:
    """One line: what was being written, how much it needs, what is free, what to do next."""
    return DiskFullError(what, needed, then)


UNWRITABLE_ERRNOS = {errno.EROFS: "read-only filesystem", errno.EACCES: "permission denied",
                     errno.EPERM: "permission denied"}  # fmt: skip
_OS_ERROR_CODE = re.compile(r"(?:os error|code:?)\s*(\d+)", re.IGNORECASE)


def os_error_of(err: BaseException, path: str | Path) -> OSError | None:
    """The `OSError` a writer's failure stands for, whatever library raised it; else None.

    Writers that are not Python's own file objects hide the errno: safetensors raises
    ``SafetensorError("... I/O error: No space left on device (os error 28)")``, torch.save's
    zip writer a ``RuntimeError`` from ``inline_container.cc`` with no errno at all (the short
    write it saw; read here as a full disk when the filesystem has under 1 MiB left, the only
    way it happens in practice). matplotlib, pyarrow (parquet) and numpy raise `OSError`s.
    """
    if isinstance(err, OSError):
        return err
    text = str(err)
    code = _OS_ERROR_CODE.search(text) if "error" in text.lower() else None
    if code is not None:
        number = int(code.group(1))
        return OSError(number, os.strerror(number), str(path))
    if isinstance(err, RuntimeError) and (
        "inline_container" in text or "PytorchStreamWriter" in text
    ):
        free = free_bytes(path)
        if free is not None and free < (1 << 20):
            return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    return None


def write_error(
    err: BaseException, path: str | Path, then: str, needed: int | None = None
) -> GoatDNAError | None:
    """THE translation of a failed write into goatdna's one line, for every writer (files,
    safetensors, torch.save, matplotlib, parquet, numpy): a full disk or quota is
    `disk_full_error`; a read-only filesystem or a permission refusal names the path and
    what to do. None when ``err`` is no such failure (the caller re-raises it)."""
    found = os_error_of(err, path)
    if found is None:
        return None
    if found.errno in DISK_FULL_ERRNOS:
        return disk_full_error(path, needed, then)
    reason = UNWRITABLE_ERRNOS.get(found.errno or 0)
    if reason is not None:
        return GoatDNAError(
            f"cannot write {path} ({reason}); choose a writable folder, then {then}"
        )
    return None


@contextmanager
def write_errors(path: str | Path, *, then: str = "rerun the command") -> Iterator[None]:
    """Run a write to ``path`` with `write_error`'s translation (for writers that do not go
    through `atomic_path`/`atomic_dir`, which apply it themselves)."""
    try:
        yield
    except GoatDNAError:
        raise
    except Exception as err:  # library errors of their own class too (SafetensorError)
        translated = write_error(err, path, then)
        if translated is None:
            raise
        raise translated from None


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _make_folders(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; return the ones made, deepest first (what
    a failed write removes again, so it leaves no empty folder behind)."""
    made = []
    probe = folder
    while not probe.is_dir() and probe != probe.parent:
        made.append(probe)
        probe = probe.parent
    if made:
        folder.mkdir(parents=True, exist_ok=True)
    return made


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:  # deepest first; one still holding something keeps its parents
        try:
            folder.rmdir()
        except OSError:
            return


def _new_temp_file(path: Path) -> Path:
    """A fresh name ``.NAME.<pid>-<random>.tmp`` beside ``path``, not created yet.

    The writer creates it (with the umask's usual mode; ``mkstemp`` would make it 0600). Not
    creating it here matters on ext4: a file created empty and then reopened with truncation
    is flushed specially on close, which makes deleting many of them slow (benchmarks/README.md,
    "Crash-safe writes").
    """
    # pid + 48 random bits: no other writer picks the same name (no existence check needed)
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(6)}.tmp")


@contextmanager
def atomic_path(
    path: str | Path, *, then: str = "rerun the command", durable: bool = True
) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it into place if the block succeeds.

    The temporary file is removed on any error, and so are the missing parent folders it made
    (no empty folder is left); a full disk or a read-only folder becomes one line
    (`write_error`; ``then`` says what to run afterwards). ``durable=False`` skips the fsyncs: still atomic
    for readers and against a killed process, only not against a power cut (for many small
    journal files, where an fsync each would cost more than the work they record).
    """
    path = Path(path)
    tmp = _new_temp_file(path)
    renamed = False
    made: list[Path] = []
    try:
        made = _make_folders(path.parent)
        yield tmp
        if durable:
            with open(tmp, "rb") as handle:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
        renamed = True
        if durable:
            _fsync_dir(path.parent)
    except GoatDNAError:
        raise
    except Exception as err:  # any writer's failure (torch.save, safetensors, ...): one line
        size = tmp.stat().st_size if tmp.exists() else None
        translated = write_error(err, path, then, size)
        if translated is None:
            raise
        raise translated from None
    finally:
        if not renamed:
            with suppress(OSError):  # a read-only folder says EROFS even for no file at all
                tmp.unlink(missing_ok=True)
            _remove_empty(made)


def commit_file(
    done: str | Path, path: str | Path, *, then: str = "rerun the command", durable: bool = True
) -> Path:
    """Rename ``done`` (a finished file written in place over time, e.g. a resumable partial
    output in the same filesystem) to ``path``: fsynced first, so the name never points at
    bytes still in flight, and the folder fsynced after, so the rename itself is durable."""
    done, path = Path(done), Path(path)
    try:
        if durable:
            with open(done, "rb") as handle:
                os.fsync(handle.fileno())
        os.replace(done, path)
        if durable:
            _fsync_dir(path.parent)
    except OSError as err:
        if is_disk_full(err):
            raise disk_full_error(path, None, then) from None
        raise
    return path


def atomic_write_bytes(
    path: str | Path, data: bytes, *, then: str = "rerun the command", durable: bool = True
) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder."""
    path = Path(path)
    try:
        with atomic_path(path, then=then, durable=durable) as tmp, open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
    except DiskFullError:
        raise disk_full_error(path, len(data), then) from None
    return path


def atomic_write_text(path: str | Path, text: str, *, then: str = "rerun the command") -> Path:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file in the same folder."""
    return atomic_write_bytes(path, text.encode("utf-8"), then=then)


@contextmanager
def atomic_dir(path: str | Path, *, then: str = "rerun the command") -> Iterator[Path]:
    """Yield a new empty folder beside ``path``; swap it into place if the block succeeds.

    A folder already at ``path`` (the caller decides whether it may go) is renamed aside, the
    new one renamed in, and only then the old one deleted, so ``path`` never holds a half-written
    folder. On any error the new folder is deleted, and so are the parent folders it made; a
    full disk or a read-only folder becomes one line (`write_error`).
    """
    path = Path(path)
    tmp = _new_temp_file(path)
    made: list[Path] = []
    swapped = False
    try:
        made = _make_folders(path.parent)
        tmp.mkdir()
        yield tmp
        if path.exists():
            old = path.with_name(f"{tmp.name}.old")
            os.replace(path, old)
            try:
                os.replace(tmp, path)
            except OSError:
                os.replace(old, path)  # put the earlier folder back
                raise
            shutil.rmtree(old)
        else:
            os.replace(tmp, path)
        swapped = True
        _fsync_dir(path.parent)
    except GoatDNAError:
        raise
    except Exception as err:  # any writer's failure inside the folder: one line
        translated = write_error(err, path, then)
        if translated is None:
            raise
        raise translated from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if not swapped:
            _remove_empty(made)


def _nearest_existing(path: Path) -> Path:
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def _probe_writable(folder: Path, option: str, path: Path) -> None:
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".goatdna-probe-"):
            pass
    except OSError as err:
        raise GoatDNAError(
            f"{option} {path}: cannot write in {folder} ({err.strerror or err}); "
            "choose a writable location"
        ) from None


def check_output_dir(path: str | Path, option: str = "--out") -> Path:
    """Fail now, with one line, if ``path`` cannot become a writable folder of outputs."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise GoatDNAError(f"{option} {path} is a file, not a folder: choose a folder path")
    base = _nearest_existing(path)
    if not base.is_dir():
        raise GoatDNAError(
            f"{option} {path}: {base} is a file, so no folder can be made below it; "
            "choose another path"
        )
    _probe_writable(base, option, path)
    return path


def check_output_file(path: str | Path, option: str = "--out") -> Path:
    """Fail now, with one line, if ``path`` cannot be written as a file."""
    path = Path(path)
    if path.is_dir():
        raise GoatDNAError(f"{option} {path} is a folder, not a file: give a file name")
    base = _nearest_existing(path.parent)
    if not base.is_dir():
        raise GoatDNAError(
            f"{option} {path}: {base} is a file, so the file cannot be written below it; "
            "choose another path"
        )
    _probe_writable(base, option, path)
    return path


def check_free_space(path: str | Path, needed: int, what: str, option: str = "--out") -> None:
    """Refuse, before any work, a run whose outputs cannot fit beside ``path``: ``needed`` is
    the caller's estimate of the most it will hold there at once (a checkpoint, its temporary
    copy while it is replaced, a feature cache). A full disk met later is still one line
    (`write_error`); this only spares hours of work that could never be saved."""
    free = free_bytes(path)
    if free is not None and free < needed:
        raise GoatDNAError(
            f"{option} {path}: {what} needs about {_size(needed)}, {_size(free)} free there; "
            f"free space or choose another {option}"
        )
