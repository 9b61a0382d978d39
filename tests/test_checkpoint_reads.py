"""Checkpoints are unpickled in one place: `goatdna.checkpoint.read_torch_file` is the only
call of ``torch.load`` in goatdna (always ``weights_only=True``), so no module reads a file its
own way and none can read one with ``weights_only=False``."""

from __future__ import annotations

import ast
from pathlib import Path

import goatdna

PACKAGE = Path(goatdna.__file__).parent


def _torch_load_calls(tree: ast.AST) -> list[int]:
    """Lines calling ``torch.load`` (or a ``load`` imported from torch)."""
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "torch"
        for alias in node.names
        if alias.name == "load"
    }
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "load"
            and isinstance(func.value, ast.Name)
            and func.value.id == "torch"
        ) or (isinstance(func, ast.Name) and func.id in imported):
            lines.append(node.lineno)
    return lines


def test_torch_load_is_called_in_one_place() -> None:
    calls = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := _torch_load_calls(ast.parse(path.read_text(), str(path))))
    }
    assert list(calls) == ["checkpoint.py"], calls
    assert len(calls["checkpoint.py"]) == 1, calls


def test_the_scan_finds_a_call() -> None:
    """The scan sees both spellings (so the test above can fail)."""
    assert _torch_load_calls(ast.parse("import torch\ntorch.load('x')")) == [2]
    assert _torch_load_calls(ast.parse("from torch import load as l\nl('x')")) == [2]
