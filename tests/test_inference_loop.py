"""`goatdna.inference.loop.run_units`, the one resumable unit loop, on its own: ranks share the
pending units, a stopped run resumes with only the missing units computed, and rank 0 writes;
and a scan that keeps that loop in `goatdna/inference/loop.py` alone (the end of this file).

The commands' own tests (test_inference_*.py, test_workdir.py) hold their outputs to the bytes of
an uninterrupted run; these pin the loop's contract with a compute that records what it did.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np
import pytest

import goatdna
from goatdna.inference.loop import Arrays, FinishedUnits, run_units, save_arrays
from goatdna.workdir import WorkDir


class _Rank:
    """A stand-in for a launched Fabric: rank ``rank`` of ``world``, played in this process.

    Rank 0 publishes what it broadcasts in ``shared``; ``at_barrier`` runs when this rank reaches
    the barrier (rank 0 plays the other ranks there, so they see its listing first).
    """

    def __init__(self, rank: int, world: int, shared: dict,
                 at_barrier: Callable[[], None] = lambda: None) -> None:  # fmt: skip
        self.global_rank, self.world_size, self.shared = rank, world, shared
        self.at_barrier = at_barrier

    def broadcast(self, obj, src: int = 0):
        if self.global_rank == 0:
            self.shared["broadcast"] = obj
        return self.shared["broadcast"]

    def barrier(self) -> None:
        self.at_barrier()

    def autocast(self):
        return nullcontext()


class _Stop(Exception):
    pass


def _work(tmp_path: Path) -> WorkDir:
    return WorkDir(tmp_path / ".work", "demo", {"inputs": 1}, lambda i: f"unit-{i:06d}.npz")


def _compute(seen: list[int], stop_after: int | None = None):
    """Unit ``u`` is the array [u, u*u]; ``stop_after`` units are yielded, then it stops."""

    def compute(units: list[int], advance: Callable[[int], None]) -> Iterator[tuple[int, Arrays]]:
        for unit in units:
            if stop_after is not None and len(seen) == stop_after:
                raise _Stop
            seen.append(unit)
            yield unit, [np.array([unit, unit * unit])]
            advance(1)

    return compute


def _write(done: FinishedUnits) -> list[list[int]]:
    return [done.load(u)[0].tolist() for u in range(done.n_units)]


def _run(fabric, work: WorkDir, compute, resume: bool = False, **kw):
    return run_units(fabric, work, 7, compute, _write, resume=resume, force=False, **kw)


EXPECTED = [[u, u * u] for u in range(7)]


def test_two_ranks_share_the_units_and_rank_zero_writes_them_in_order(tmp_path: Path) -> None:
    work, shared = _work(tmp_path), {}
    seen0: list[int] = []
    seen1: list[int] = []
    other: list[object] = []

    def play_rank_one() -> None:
        other.append(_run(_Rank(1, 2, shared), work, _compute(seen1)))

    result = _run(_Rank(0, 2, shared, play_rank_one), work, _compute(seen0))
    assert result == EXPECTED and other == [None]
    assert seen0 == [0, 1, 2, 3] and seen1 == [4, 5, 6]  # contiguous blocks of the listing
    assert not work.dir.exists()  # rank 0 removed the work folder after writing


def test_a_stopped_run_resumes_computing_only_the_missing_units(tmp_path: Path) -> None:
    work = _work(tmp_path)
    fabric = _Rank(0, 1, {})
    seen: list[int] = []
    saved: list[int] = []
    with pytest.raises(_Stop):
        _run(fabric, work, _compute(seen, stop_after=3), crash_at=lambda _p, n: saved.append(n),
             crash="demo.unit_saved")  # fmt: skip
    assert saved == [1, 2, 3]  # the crash point counts the units this process saved
    assert sorted(p.name for p in work.dir.glob("unit-*")) == [
        f"unit-00000{i}.npz" for i in range(3)
    ]
    listed: list[tuple[list[int], list[int]]] = []
    seen = []
    result = _run(fabric, work, _compute(seen), resume=True,
                  listed=lambda f, p: listed.append((f, p)))  # fmt: skip
    assert seen == [3, 4, 5, 6] and listed == [([0, 1, 2], [3, 4, 5, 6])]
    assert result == EXPECTED


def test_without_split_every_rank_computes_each_unit_and_rank_zero_saves(tmp_path: Path) -> None:
    work, shared = _work(tmp_path), {}
    seen1: list[int] = []
    saves: list[tuple[int, int]] = []

    def save(rank: int):
        def saver(work: WorkDir, unit: int, arrays: Arrays) -> None:
            saves.append((rank, unit))
            save_arrays(work, unit, arrays)

        return saver

    def play_rank_one() -> None:
        _run(_Rank(1, 2, shared), work, _compute(seen1), split=False, save=save(1))

    seen0: list[int] = []
    result = _run(_Rank(0, 2, shared, play_rank_one), work, _compute(seen0), split=False,
                  save=save(0))  # fmt: skip
    assert seen0 == seen1 == list(range(7)) and result == EXPECTED
    assert saves == [(0, u) for u in range(7)]


def test_a_run_that_saved_nothing_leaves_no_folder_only_when_asked(tmp_path: Path) -> None:
    fabric = _Rank(0, 1, {})
    for drop in (True, False):
        work = _work(tmp_path / str(drop))
        with pytest.raises(_Stop):
            _run(fabric, work, _compute([], stop_after=0), drop_unsaved=drop)
        assert work.dir.exists() is not drop
    work = _work(tmp_path / "one")
    with pytest.raises(_Stop):  # one unit saved: kept for --resume
        _run(fabric, work, _compute([], stop_after=1), drop_unsaved=True)
    assert work.dir.exists()


def test_the_computes_own_context_ends_before_the_error_leaves(tmp_path: Path) -> None:
    events: list[str] = []

    @contextmanager
    def bar() -> Iterator[None]:
        events.append("open")
        try:
            yield
        finally:
            events.append("closed")  # a progress bar's clean-up, say

    def compute(units: list[int], _advance: Callable[[int], None]) -> Iterator[tuple[int, Arrays]]:
        with bar():
            for unit in units:
                yield unit, [np.zeros(1)]

    def broken(_work: WorkDir, _unit: int, _arrays: Arrays) -> None:
        raise _Stop

    try:
        _run(_Rank(0, 1, {}), _work(tmp_path), compute, save=broken)
    except _Stop:
        events.append("raised")
    assert events == ["open", "closed", "raised"]


# ------------------------------------------------------------------------------ one home
# Issue 42.1 found the resumable loop (stamps -> WorkDir -> rank-0 lock -> pending -> rank_block
# -> progress -> save unit -> crash point -> barrier -> rank-0 write -> cleanup) written six
# times, in attribute_run, mutagenesis_run, predict, variant_run, tracks and embed_run (+
# cli/embed.py). A command now gives run_units its work folder, its per-unit compute and its
# writer, nothing else; a command that opens a work folder, lists its pending units, shares them
# out or waits at the barrier itself fails here. The package scanned is the imported
# ``goatdna``, so running this file with another checkout first on PYTHONPATH checks that tree.
PACKAGE = Path(goatdna.__file__).resolve().parent
HOME = "inference/loop.py"
SCANNED = ("inference", "cli")

LOOP_CALLS = {
    "pending": "lists a work folder's unfinished units (WorkDir.pending)",
    "barrier": "waits for the ranks before rank 0 writes",
    "on_rank_zero": "shares rank 0's unit listing with the other ranks",
}
"""Calls (functions or methods, by name) that only the unit loop makes."""

ALLOWED: dict[str, str] = {}
"""Modules still holding a loop of their own, with the reason (none left)."""


def offenders(package: Path) -> list[str]:
    """``module:line: call`` for each loop call outside `HOME`, or a work folder opened there
    (``.open(..., force=...)``, as `WorkDir.open` is called)."""
    found = []
    for folder in SCANNED:
        for path in sorted((package / folder).rglob("*.py")):
            name = path.relative_to(package).as_posix()
            if name == HOME or name in ALLOWED:
                continue
            for node in ast.walk(ast.parse(path.read_text(), name)):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                opens_work = called == "open" and any(k.arg == "force" for k in node.keywords)
                if called in LOOP_CALLS or opens_work:
                    found.append(f"{name}:{node.lineno}: {called}()")
    return found


def test_the_resumable_unit_loop_has_one_home() -> None:
    found = offenders(PACKAGE)
    assert not found, (
        "the resumable unit loop belongs in goatdna/inference/loop.py (run_units); pass it your "
        "compute and writer instead:\n" + "\n".join(found)
    )


def test_the_home_holds_the_loop() -> None:
    """The scan looks for the right calls: the home module makes each of them."""
    tree = ast.parse((PACKAGE / HOME).read_text())
    made = {
        n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
    }
    assert set(LOOP_CALLS) | {"open", "rank_block", "remove"} <= made
