"""benchmarks/byte_identity.py: its normalisation removes only the listed volatile values, and
its comparison reports a changed output (so the "all identical" it prints can fail)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import byte_identity  # noqa: E402


def _pair(tmp_path: Path, name: str, base: str | bytes, head: str | bytes) -> tuple[Path, Path]:
    paths = []
    for side, text in (("base", base), ("head", head)):
        path = tmp_path / side / "out" / "step" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        paths.append(path)
    return paths[0], paths[1]


def _row(tmp_path: Path) -> byte_identity.Row:
    step = byte_identity.Step("step", [])
    return byte_identity.compare(step, tmp_path / "base", tmp_path / "head", (0, 0))


@pytest.mark.parametrize(
    ("name", "base", "head", "same"),
    [
        ("s.json", '{"loss": 1.5, "wall_seconds": 3.1}', '{"loss": 1.5, "wall_seconds": 9.0}', True),
        ("s.json", '{"loss": 1.5, "wall_seconds": 3.1}', '{"loss": 1.6, "wall_seconds": 3.1}', False),
        ("m.csv", "step,loss,elapsed_s\n1,2.0,0.5\n", "step,loss,elapsed_s\n1,2.0,0.9\n", True),
        ("m.csv", "step,loss,elapsed_s\n1,2.0,0.5\n", "step,loss,elapsed_s\n1,2.1,0.5\n", False),
        ("r.md", "| a | tokens_per_s |\n|---|---|\n| 1 | 40 |\n",
         "| a | tokens_per_s |\n|---|---|\n| 1 | 90 |\n", True),
        ("r.md", "| a | tokens_per_s |\n|---|---|\n| 1 | 40 |\n",
         "| a | tokens_per_s |\n|---|---|\n| 2 | 40 |\n", False),
        ("r.html", "<p>Generated 2026-01-01 10:00 UTC</p>", "<p>Generated 2026-02-03 11:30 UTC</p>",
         True),
        ("c.yaml", "inputs:\n  backbone_sha256: aa\n  seed: 1\n",
         "inputs:\n  backbone_sha256: bb\n  seed: 1\n", True),
        ("c.yaml", "inputs:\n  backbone_sha256: aa\n  seed: 1\n",
         "inputs:\n  backbone_sha256: aa\n  seed: 2\n", False),
        ("g.png", b"\x89PNG one", b"\x89PNG two", False),  # no normaliser: bytes only
    ],
)  # fmt: skip
def test_only_the_volatile_values_are_ignored(
    tmp_path: Path, name: str, base: str, head: str, same: bool
) -> None:
    _pair(tmp_path, name, base, head)
    row = _row(tmp_path)
    assert row.files == 1
    assert (row.different == []) is same, row.different
    assert row.normalised == (1 if same else 0)


def test_a_checkpoint_is_compared_by_its_tensors_less_the_clock(tmp_path: Path) -> None:
    def ckpt(weight: float, seconds: float) -> bytes:
        path = tmp_path / "x.ckpt"
        torch.save(
            {"state_dict": {"w": torch.full((2,), weight)}, "loop": {"elapsed_seconds": seconds}},
            path,
        )
        return path.read_bytes()

    _pair(tmp_path / "clock", "best.ckpt", ckpt(1.0, 0.5), ckpt(1.0, 0.7))
    assert _row(tmp_path / "clock").different == []
    _pair(tmp_path / "weights", "best.ckpt", ckpt(1.0, 0.5), ckpt(1.0 + 1e-7, 0.5))
    assert _row(tmp_path / "weights").different == ["best.ckpt"]


def test_a_missing_file_or_a_failed_command_is_not_identical(tmp_path: Path) -> None:
    _pair(tmp_path, "a.txt", "x", "x")
    (tmp_path / "head" / "out" / "step" / "b.txt").write_text("new")
    row = _row(tmp_path)
    assert row.different == ["b.txt (only in head)"]
    step = byte_identity.Step("step", [])
    failed = byte_identity.compare(step, tmp_path / "base", tmp_path / "head", (0, 2))
    assert failed.failed == "exit 0 / 2"


def test_every_command_of_the_cli_is_run() -> None:
    from goatdna.cli.commands import COMMANDS

    names = {c.__name__.replace("_", "-") for c in COMMANDS}
    assert names <= {step.args[0] for step in byte_identity.STEPS}
    assert json.loads(json.dumps([s.__dict__ for s in byte_identity.STEPS]))  # the driver's input


def test_an_exported_source_file_must_equal_its_own_trees_file(tmp_path: Path) -> None:
    """`goatdna export` ships goatdna/model's .py files verbatim: a docstring edit in the tree
    changes the export, and that is accepted only when each side is its own tree's file."""
    old, new = '"""Vocabulary, old words."""\n', '"""Vocabulary, new words."""\n'
    base, head = _pair(tmp_path, "vocab.py", old, new)
    for side, text in (("base", old), ("head", new)):
        (tmp_path / side / "src" / "goatdna" / "model").mkdir(parents=True)
        (tmp_path / side / "src" / "goatdna" / "model" / "vocab.py").write_text(text)
        (tmp_path / side / "logs").mkdir()
        digests = byte_identity.source_digests(tmp_path / side / "src")
        (tmp_path / side / "logs" / "sources.json").write_text(json.dumps(digests))
    row = _row(tmp_path)
    assert (row.source, row.different) == (1, [])
    head.write_text('"""Vocabulary, words no tree has."""\n')  # an export that is not the source
    assert _row(tmp_path).different == ["vocab.py"]
