"""One definition (issue 42.1): the resumable, sharded unit loop lives in
`goatdna.inference.loop.run_units`; a command that opens a work folder, lists its pending
units, shares them out or waits at the barrier itself fails here.

Issue 42 found that loop (stamps -> WorkDir -> rank-0 lock -> pending -> rank_block -> progress
-> save unit -> crash point -> barrier -> rank-0 write -> cleanup) written six times, in
attribute_run, mutagenesis_run, predict, variant_run, tracks and embed_run (+ cli/embed.py). A
command now gives run_units its work folder, its per-unit compute and its writer, nothing else.

The package scanned is the imported ``goatdna`` (``goatdna.__file__``), so running this file with
another checkout first on ``PYTHONPATH`` checks that tree.
"""

from __future__ import annotations

import ast
from pathlib import Path

import goatdna

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
