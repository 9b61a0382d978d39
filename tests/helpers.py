"""Helpers shared by the test modules: one home each, so a change of convention is one edit.

- `invoke`: run the `goatdna` CLI in-process (a subprocess would pay seconds of imports).
- `assert_one_error_line`: the house rule for bad input (one `error: ...` line, exit 2, no traceback).
- `assert_ok`: the command succeeded (exit 0; its output and exception in the message if not).
- `tiny_config`: the tiny decoder most tests build (~30 k parameters, instant on CPU).
- `tiny_train_overrides`: the `--set` items of a seconds-long `train` run of goat-tiny.yaml.
- `random_sequences`: seeded random 12-base ACGT sequences, the rows of small sequence tables.

- `printed`: what the commands' console prints of a library result (rich tables and lines), to
  compare a library call's result with the command's bytes.

tests/test_helpers.py fails when a test module grows its own copy of these again.
Test modules import them as ``from helpers import ...`` (pytest puts tests/ on sys.path).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from typer.testing import CliRunner, Result

from goatdna.model import ModelConfig

_RUNNER = CliRunner()


def invoke(args: Sequence[object], **kwargs: Any) -> Result:
    """`goatdna ARGS` in-process; each argument is passed as `str(arg)` (so paths may be given).

    A default `CliRunner()` (stdout and stderr captured apart: `result.stderr` is stderr alone,
    `result.output` both); `kwargs` go to `CliRunner.invoke` (e.g. ``env={"COLUMNS": "250"}``).
    """
    from goatdna.cli.app import app  # imported here: tests that only want `tiny_config` skip it

    return _RUNNER.invoke(app, [str(arg) for arg in args], **kwargs)


def assert_one_error_line(result: Result, *needles: str) -> str:
    """Assert the bad-input contract and return the error line.

    Exit code 2, no traceback (the only exception is the `SystemExit` of the exit), and the
    whole output (stdout and stderr) is exactly one non-blank line, on stderr, starting
    ``error: `` and containing every needle.
    """
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert lines[0] in result.stderr, (lines[0], result.stderr)
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def assert_ok(result: Result) -> None:
    """The command exited 0; otherwise the assertion shows what it printed and raised."""
    assert result.exit_code == 0, result.output + repr(result.exception)


def random_sequences(n: int, seed: int = 0, length: int = 12) -> list[str]:
    """``n`` seeded random ACGT sequences of ``length`` bases (Python's `random`, so a seed
    gives the same sequences everywhere)."""
    import random

    rng = random.Random(seed)
    return ["".join(rng.choice("ACGT") for _ in range(length)) for _ in range(n)]


def printed(*parts: Any, width: int = 200) -> str:
    """``parts`` (rich tables, strings with markup) printed, one after another, as a command
    prints them through `goatdna.console.output_console` when it is not a terminal and
    ``COLUMNS`` is ``width`` (so invoke the command with ``env={"COLUMNS": str(width)}``)."""
    import io

    from goatdna.console import output_console

    console = output_console(file=io.StringIO(), width=width)
    for part in parts:
        console.print(part)
    return console.file.getvalue()  # type: ignore[attr-defined]  # the StringIO given


TINY_TRAIN_OVERRIDES = (
    "model.n_layers=1",
    "model.d_model=32",
    "model.n_heads=2",
    "model.mlp_hidden=64",
    "model.goat_modes=4",
    "model.train_length=64",
    "data.seq_len=64",
    "data.micro_batch_size=4",
    "data.val_max_windows=8",
    "data.num_workers=0",
    "data.verify=false",
)
"""`--set` items that shrink configs/goat-tiny.yaml's run to seconds on one CPU thread."""
QUIET_CPU_TRAINER = (
    "trainer.progress_bar=false",
    "trainer.tensorboard=false",
    "trainer.accelerator=cpu",
)


def tiny_train_overrides(*items: str) -> list[str]:
    """`TINY_TRAIN_OVERRIDES`, then ``items`` (a test's own step counts), then no progress bar,
    no TensorBoard, CPU: the ``key=value`` list for ``--set`` or `load_run_config`."""
    return [*TINY_TRAIN_OVERRIDES, *items, *QUIET_CPU_TRAINER]


TINY_CONFIG: dict[str, Any] = {
    "positional": "goat",
    "n_layers": 1,
    "d_model": 32,
    "n_heads": 2,
    "mlp_hidden": 64,
    "goat_modes": 2,
    "train_length": 32,
}


def tiny_config(**overrides: Any) -> ModelConfig:
    """The tiny decoder of most tests (one layer, d_model 32, 2 heads, 2 GOAT modes, 32-base
    context); `overrides` replace any field (e.g. ``positional="rope"``, ``train_length=64``)."""
    return ModelConfig(**{**TINY_CONFIG, **overrides})


def randomized_decoder(config: ModelConfig) -> Any:
    """A `DNADecoder` of ``config`` in eval mode whose GOAT prior parameters all carry seeded
    noise (``0.3 * N(0, 1)`` added, seed 0): the zero init would hide a missing prior term."""
    import torch

    from goatdna.model import DNADecoder

    torch.manual_seed(0)
    model = DNADecoder(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".prior." in name:
                p.add_(0.3 * torch.randn_like(p))
    return model
