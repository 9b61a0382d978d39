"""Resumable work: one input fingerprint, one work folder, units saved with a checksum.

Every long goatdna command that can be interrupted (``score-variants``, ``score-track``,
``prepare``, ``embed``, ``predict``) cuts its work into units whose results depend only on the
inputs and the options, saves each finished unit, and on ``--resume`` skips the saved ones, so the
output is byte-identical to a run that never stopped. This module is the one implementation of the
pieces those commands share, so "what is an input's identity", "may this run continue that one"
and "is this saved unit intact" each have one answer:

- `input_stamp`: the identity of an input file (resolved path, size, mtime in ns). A changed
  file gets a new stamp, so a resumed run never mixes units computed from two versions of it.
- `WorkDir`: a folder beside the output holding ``state.json`` (the command, the stamps and the
  options) and the finished units. On ``--resume`` the saved state must equal this run's, else
  the run is refused with one line naming the keys that differ, and ``--resume`` with no folder
  at all is refused too; without ``--resume`` a folder of earlier work is refused unless
  ``--force`` starts over, and a folder that holds no goatdna state is never deleted. A new
  folder appears whole (built under a temporary name, then renamed).
- units: one file each, written through `goatdna.atomic` (temporary name, then rename) with the
  sha256 of its payload in a one-line header, so a unit cut short by a crash never appears under
  its name, and one damaged later (a bad disk, a stray edit) is found on resume: `WorkDir.pending`
  drops it and says so (it is computed again); `WorkDir.load` refuses it in one ``error:`` line.
- `claim_output`: an existing file at ``--out`` is never replaced without ``--force``, and an
  output that is one of the run's inputs is always refused.
- `claim_output_folder`: the same for a folder that a command writes whole and swaps in
  (`goatdna.atomic.atomic_dir`: ``motifs``, ``make-task``, ``embed``'s ``.zarr``, ``export``):
  never the current folder or one above it, never one that is or holds an input, and an existing
  one only when empty or, with ``--force``, when it holds only what the command writes there (a
  folder of anything else is never deleted).
- `output_lock`: one writer per output (`goatdna.locking.folder_lock`, held for the whole run by
  global rank 0), so a second run on the same ``--out`` is refused with the holder's pid.

Units are listed once, by global rank 0 (the caller runs `WorkDir.pending` inside
`goatdna.runtime.on_rank_zero`), and every rank takes its block of that one list. The module
imports no torch or numpy (``data_prep`` uses it): units are bytes, their callers choose the format.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from goatdna import __version__
from goatdna.atomic import atomic_write_bytes, atomic_write_text
from goatdna.errors import GoatDNAError, Interrupted
from goatdna.formats import json_text
from goatdna.locking import folder_lock

STATE_FILE = "state.json"
SETUP_SUFFIX = ".setup-"  # + pid: a work folder being built (`WorkDir.open`)
UNIT_MAGIC = b"goatdna-unit sha256="
FORMAT = 1

JSONValue = None | bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"]


@dataclass(frozen=True)
class InputStamp:
    """The identity of one input file: resolved path, size in bytes, mtime in nanoseconds."""

    path: str
    size: int
    mtime_ns: int

    def as_json(self) -> dict[str, JSONValue]:
        return {"path": self.path, "size": self.size, "mtime_ns": self.mtime_ns}

    def __str__(self) -> str:
        return f"{self.path} {self.size} {self.mtime_ns}"


def input_stamp(path: str | Path) -> InputStamp:
    """The stamp of ``path`` (the one definition: every resumable command and cache uses it)."""
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as err:
        raise GoatDNAError(f"{path}: cannot read ({err.strerror or err})") from None
    return InputStamp(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


def changed_keys(saved: Mapping[str, object], now: Mapping[str, object]) -> list[str]:
    """The top-level keys whose values differ between two states (missing counts as differing)."""
    return sorted(key for key in set(saved) | set(now) if saved.get(key) != now.get(key))


def claim_output(
    paths: Iterable[Path],
    force: bool,
    option: str = "--out",
    inputs: Iterable[str | Path | None] = (),
) -> None:
    """Refuse, in one line, an output path that is one of the run's ``inputs`` (always: writing
    it would destroy what is being read) or an existing file there unless ``force``."""
    read = {Path(p).resolve() for p in inputs if p is not None}
    for path in paths:
        if Path(path).resolve() in read:
            raise GoatDNAError(
                f"{option} {path} is also an input of this run; writing it would destroy the "
                "input: choose another path"
            )
        if path.exists() and not force:
            raise GoatDNAError(
                f"{option} {path} exists; pass --force to replace it, or choose another path"
            )


@dataclass(frozen=True)
class OutputFolder:
    """The ``--out`` folder a command may write, as `claim_output_folder` found it: ``earlier``
    when a folder is there already (empty, or this command's earlier output with ``--force``),
    which the new one replaces whole when it is complete (`goatdna.atomic.atomic_dir`)."""

    path: Path
    earlier: bool


def claim_output_folder(
    path: Path,
    force: bool,
    *,
    owns: Callable[[Path], bool],
    what: str,
    inputs: Iterable[str | Path | None] = (),
    option: str = "--out",
) -> OutputFolder:
    """THE rule for an output folder that is written whole and swapped in; one line if refused.

    Refused whatever ``force`` says: the current folder or one above it (``--out .``: swapping
    it would move the folder the shell stands in), and a folder that is, or holds, one of the
    run's ``inputs`` (``--attributions proj/attr.npz --out proj``: the input would go with the
    old folder). An existing folder is used when empty; otherwise it is replaced only with
    ``force`` and only when every entry in it is one ``owns`` (the files and folders this
    command writes there, named by the caller: ``what`` names the output in the message), so a
    folder of anything goatdna did not write is never deleted.
    """
    path = Path(path)
    where = path.resolve()
    here = Path.cwd().resolve()
    if where == here or where in here.parents:
        raise GoatDNAError(
            f"{option} {path} is the current folder or holds it; the {what} is written as a new "
            f"folder that replaces {option} whole: give a new folder's path below it"
        )
    for source in inputs:
        if source is None:
            continue
        read = Path(source).resolve()
        if read == where or where in read.parents:
            held = "is also" if read == where else f"holds {source},"
            raise GoatDNAError(
                f"{option} {path} {held} an input of this run; replacing the folder would "
                "destroy the input: choose another path"
            )
    if not path.is_dir():
        return OutputFolder(path, earlier=False)
    entries = sorted(path.iterdir())
    if entries and not force:
        raise GoatDNAError(
            f"{option} {path} exists; pass --force to replace it, or choose another path"
        )
    foreign = [entry.name for entry in entries if not owns(entry)]
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise GoatDNAError(
            f"{option} {path} holds files goatdna's {what} does not write ({shown}); only an "
            f"earlier {what} is replaced: move them away, or choose an empty or new folder"
        )
    return OutputFolder(path, earlier=True)


@contextmanager
def output_lock(out: Path | Sequence[Path], held: bool, option: str = "--out") -> Iterator[None]:
    """Hold the lock of ``out`` (or of each of several outputs) for the block where ``held``
    (global rank 0), else do nothing."""
    if not held:
        yield
        return
    unique: dict[Path, Path] = {}  # a path given twice is locked once (a second lock waits)
    for path in [out] if isinstance(out, Path) else out:
        unique.setdefault(Path(path).absolute(), Path(path))
    with ExitStack() as locks:
        for path in unique.values():
            locks.enter_context(folder_lock(path, option))
        yield


def encode_unit(payload: bytes) -> bytes:
    """A unit file's bytes: ``goatdna-unit sha256=<hex>\\n`` then the payload."""
    return UNIT_MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def decode_unit(data: bytes) -> bytes | None:
    """The payload of a unit file's bytes, or None if the header or the checksum is wrong."""
    header, sep, payload = data.partition(b"\n")
    if not sep or not header.startswith(UNIT_MAGIC):
        return None
    if hashlib.sha256(payload).hexdigest().encode() != header[len(UNIT_MAGIC) :]:
        return None
    return payload


class WorkDir:
    """The work folder of one run: its state (what the run was asked) and its finished units.

    ``command`` names the command in messages and in the state (a folder of another command's
    work is not this one's); ``state`` holds the input stamps and the options, JSON values only,
    compared key by key on ``--resume``. ``unit_name(i)`` gives unit ``i``'s file name.

    The state file also records the goatdna version that started the work, and ``--resume``
    by another version is refused (`_check`): units computed by two versions' code would be
    mixed into one output with nothing to tell them apart. This is the one rule for every
    command that resumes from a work folder (the inference commands through
    `goatdna.inference.loop.run_units`, and `prepare`).
    """

    def __init__(
        self,
        folder: Path,
        command: str,
        state: Mapping[str, JSONValue],
        unit_name: Callable[[int], str] = lambda i: f"unit-{i:06d}.bin",
    ) -> None:
        self.dir = folder
        self.command = command
        self.state = dict(state)
        self.unit_name = unit_name

    # -- state -----------------------------------------------------------------------------
    def _document(self) -> dict[str, JSONValue]:
        return {
            "goatdna_work": self.command,
            "format": FORMAT,
            "goatdna_version": __version__,
            "state": self.state,
        }

    def saved_state(self) -> dict[str, JSONValue] | None:
        """The saved document if the folder holds this module's state, else None."""
        try:
            document = json.loads((self.dir / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(document, dict) or "goatdna_work" not in document:
            return None
        return document

    def open(
        self,
        resume: bool,
        force: bool = False,
        setup: Callable[[Path], None] = lambda _folder: None,
    ) -> None:
        """Create the folder, or check it for ``resume``; one ``GoatDNAError`` line if refused.

        Without ``resume`` an earlier run's folder is refused (its finished units would be lost)
        unless ``force`` says to start over; ``resume`` with no earlier folder is refused too
        (nothing was interrupted, so the user's belief about what is on disk is wrong). A folder
        without goatdna state is refused either way, never deleted.

        A new folder is built under a temporary name, ``setup(folder)`` fills it with whatever
        the command needs beside its units (e.g. `prepare`'s preallocated split files), and it
        is renamed into place with its state, so a kill during set-up leaves no folder that a
        later ``--resume`` could take for a complete one.
        """
        self._remove_stale_setups()
        if self.dir.exists():
            saved = self.saved_state()
            if saved is None:
                raise GoatDNAError(
                    f"{self.dir} exists but holds no goatdna {self.command} state; "
                    "move it away or choose another --out"
                )
            if resume:
                self._check(saved)
                return
            if not force:
                raise GoatDNAError(
                    f"{self.dir}: an interrupted {self.command} run left its finished work "
                    "here; pass --resume to continue it, or --force (or delete the folder) "
                    "to start over"
                )
            self.remove()
        elif resume:
            raise GoatDNAError(
                f"--resume: no interrupted {self.command} run to continue ({self.dir} does not "
                "exist); run without --resume"
            )
        building = self.dir.with_name(f"{self.dir.name}{SETUP_SUFFIX}{os.getpid()}")
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir(parents=True)
        try:
            atomic_write_text(
                building / STATE_FILE, json_text(self._document(), indent=1, sort_keys=True, end="")
            )
            setup(building)
            os.replace(building, self.dir)
        except BaseException:  # a full disk, a bad setup: no half-built folder stays behind
            shutil.rmtree(building, ignore_errors=True)
            raise

    def _remove_stale_setups(self) -> None:
        """Folders a killed `open` left half set up (they hold goatdna state: never a user's)."""
        if not self.dir.parent.is_dir():
            return
        for stale in self.dir.parent.glob(f"{self.dir.name}{SETUP_SUFFIX}*"):
            if WorkDir(stale, self.command, {}).saved_state() is not None:
                shutil.rmtree(stale, ignore_errors=True)

    def _check(self, saved: Mapping[str, JSONValue]) -> None:
        if saved.get("goatdna_work") != self.command or saved.get("format") != FORMAT:
            raise GoatDNAError(
                f"{self.dir}: holds {saved.get('goatdna_work')} work of format "
                f"{saved.get('format')}, not {self.command}'s; delete it to start over"
            )
        version = saved.get("goatdna_version")
        if version != __version__:
            then = f"goatdna {version}" if version else "an earlier goatdna (no version recorded)"
            raise GoatDNAError(
                f"{self.dir}: --resume: this work was started by {then}, and this is goatdna "
                f"{__version__}; units of two versions are not mixed in one output: rerun "
                "without --resume, with --force, to start over (or finish it with that version)"
            )
        before = saved.get("state")
        differ = changed_keys(before if isinstance(before, dict) else {}, self.state)
        if differ:
            raise GoatDNAError(
                f"{self.dir}: --resume with different inputs or options than the interrupted "
                f"run ({', '.join(differ)} differ); rerun with the same ones, or delete the "
                "folder to start over"
            )

    @property
    def then(self) -> str:
        """What to run after a full disk, for this folder's finished units and for the final
        output written from them alike: ``--resume`` (a plain rerun is refused, or with
        ``--force`` throws the finished work away)."""
        return f"rerun with --resume to continue {self.command}"

    # -- units -----------------------------------------------------------------------------
    def unit_path(self, index: int) -> Path:
        return self.dir / self.unit_name(index)

    def save(self, index: int, payload: bytes, durable: bool = True) -> None:
        """Save finished unit ``index`` atomically, with the checksum of its payload."""
        atomic_write_bytes(
            self.unit_path(index),
            encode_unit(payload),
            then=self.then,
            durable=durable,
        )

    def pending(
        self, indices: Sequence[int], message: Callable[[str], None] = lambda _text: None
    ) -> tuple[list[int], list[int]]:
        """(finished, unfinished) of ``indices``; a damaged unit file is removed, said, redone."""
        finished, unfinished = [], []
        for index in indices:
            path = self.unit_path(index)
            if not path.is_file():
                unfinished.append(index)
                continue
            try:
                intact = decode_unit(path.read_bytes()) is not None
            except OSError:
                intact = False
            if intact:
                finished.append(index)
            else:
                message(f"{path}: damaged (checksum does not match); computing it again")
                path.unlink(missing_ok=True)
                unfinished.append(index)
        return finished, unfinished

    def load(self, index: int) -> bytes:
        """The payload of finished unit ``index``; a missing or damaged file is one error line."""
        path = self.unit_path(index)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise GoatDNAError(
                f"{self.dir}: unit {index} ({path.name}) was not computed (a rank stopped "
                "early?); rerun with --resume"
            ) from None
        except OSError as err:
            raise GoatDNAError(f"{path}: cannot read ({err.strerror or err})") from None
        payload = decode_unit(data)
        if payload is None:
            raise GoatDNAError(
                f"{path}: damaged unit file (checksum does not match); rerun with --resume to "
                "compute it again"
            )
        return payload

    def remove(self) -> None:
        """Delete the folder, only if it holds goatdna state (never a user's folder)."""
        if self.dir.exists() and self.saved_state() is None:
            raise GoatDNAError(f"{self.dir} holds no goatdna {self.command} state; not deleting it")
        shutil.rmtree(self.dir, ignore_errors=True)


def work_dir_for(out: Path) -> Path:
    """The hidden work folder beside ``out`` where a resumable command keeps finished units."""
    return out.parent / f".{out.name}.goatdna-work"


class _Terminated(BaseException):
    """SIGTERM as an exception (a BaseException, like KeyboardInterrupt: no ``except
    Exception`` on the way up swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def stops_with_resume_hint(command: str, work: Path) -> Iterator[None]:
    """A SIGINT (Ctrl-C) or SIGTERM during the block ends the command with one line,
    ``interrupted: SIGTERM: ...; rerun the same command with --resume``, and exit status 130 or
    143, as ``goatdna train`` does, instead of a traceback or a silent exit: the units it
    finished are in ``work`` and a ``--resume`` continues from them."""
    previous = None
    if threading.current_thread() is threading.main_thread():

        def terminate(signum: int, _frame: object) -> None:
            raise _Terminated(signum)

        previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    except (KeyboardInterrupt, _Terminated) as stop:
        signum = stop.signum if isinstance(stop, _Terminated) else signal.SIGINT
        kept = (
            f"the work it finished is kept in {work}: rerun the same command with --resume to "
            "continue"
            if work.is_dir()
            else "it had saved no work yet: rerun the same command"
        )
        raise Interrupted(
            f"{signal.Signals(signum).name}: {command} stopped; {kept}", signum
        ) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
