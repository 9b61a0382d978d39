"""One flag per concept across every command, the shared table printer, and decoding threads."""

from __future__ import annotations

import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest
import typer
from helpers import invoke
from rich.console import Console

from goatdna.analysis.report_frames import fmt as format_cell
from goatdna.cli.app import app
from goatdna.cli.commands import COMMANDS
from goatdna.cli.common import OPTION_NAMES, frame_table, print_frame

REPO = Path(__file__).resolve().parents[1]
CLICK_APP = typer.main.get_command(app)
# Spellings retired by issue 12: none may come back as a visible flag of any command.
RETIRED = {"--samples", "--max-tokens", "--run-dir"}


def _visible_options() -> dict[str, dict[str, tuple[str, ...]]]:
    """{command: {parameter name: its flags}} for every visible option of every command."""
    found: dict[str, dict[str, tuple[str, ...]]] = {}
    for name, command in CLICK_APP.commands.items():
        found[name] = {
            p.name: tuple(p.opts + p.secondary_opts)
            for p in command.params
            if p.param_type_name == "option" and not getattr(p, "hidden", False)
        }
    return found


def test_every_command_is_registered_from_the_plain_list() -> None:
    names = [func.__name__.replace("_", "-") for func in COMMANDS]
    assert list(CLICK_APP.commands) == names
    assert len(names) == len(set(names))


def test_one_flag_set_per_concept_across_commands() -> None:
    by_parameter: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    owner_of_flag: dict[str, set[str]] = defaultdict(set)
    for options in _visible_options().values():
        for parameter, flags in options.items():
            by_parameter[parameter].add(flags)
            for flag in flags:
                owner_of_flag[flag.split("/")[0]].add(parameter)
    # the same parameter is spelled the same everywhere ...
    assert {p: f for p, f in by_parameter.items() if len(f) > 1} == {}
    # ... no flag (long or short) means two different things ...
    assert {f: p for f, p in owner_of_flag.items() if len(p) > 1} == {}
    # ... and the shared concepts use exactly common.OPTION_NAMES
    for concept, names in OPTION_NAMES.items():
        flags = {f for f in by_parameter.get(concept, set())}
        expected = tuple(n for name in names for n in name.split("/"))
        assert flags <= {expected}, concept
    assert RETIRED.isdisjoint(owner_of_flag)


def test_readers_take_checkpoint_and_writers_take_out() -> None:
    options = _visible_options()
    readers = [c for c, opts in options.items() if "checkpoint" in opts]
    assert {"evaluate", "generate", "embed", "export", "finetune", "predict", "probe-recall",
            "score-track", "score-variants"} <= set(readers)  # fmt: skip
    for command, opts in options.items():
        assert all(
            flags == ("--checkpoint", "-c") for p, flags in opts.items() if "checkpoint" in p
        )
        if "out" in opts:
            assert opts["out"] == ("--out", "-o"), command
        assert "-c" not in opts.get("config", ()), command  # train: -c is never the config
    writers = {"demo", "prepare", "train", "generate", "evaluate", "report", "export", "embed",
               "probe-recall", "score-variants", "score-track", "make-task", "finetune", "predict",
               "check-precision", "mutagenesis", "eval-variants", "make-variant-task",
               "attention", "attribute", "motifs"}  # fmt: skip
    assert writers == {c for c, opts in options.items() if "out" in opts}


@pytest.mark.parametrize("command", sorted(CLICK_APP.commands))
def test_help_lists_the_shared_names(command: str) -> None:
    result = invoke([command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for flag in RETIRED:
        assert f"{flag} " not in result.output
    for parameter, flags in _visible_options()[command].items():
        assert flags[0].split("/")[0] in result.output, (command, parameter)


# Commands that run a model on several devices (Fabric ranks), on one device, and those that run
# none (export and model-info load weights only on the CPU or the meta device; demo trains its
# two tiny models on the CPU by design, so that it runs the same everywhere).
MULTI_DEVICE = {"train", "finetune", "embed", "predict", "score-variants", "score-track",
                "mutagenesis", "attribute"}  # fmt: skip
ONE_DEVICE = {"evaluate", "generate", "report", "probe-recall", "check-precision", "attention"}
NO_MODEL = {"demo", "prepare", "info", "model-info", "export", "make-task", "eval-variants",
            "make-variant-task", "motifs"}  # fmt: skip


def _all_flags(command: str) -> set[str]:
    """Every flag of a command, hidden ones included (a hidden alias is still a second spelling)."""
    return {
        flag.split("/")[0]
        for p in CLICK_APP.commands[command].params
        if p.param_type_name == "option"
        for flag in p.opts + p.secondary_opts
    }


def test_one_device_vocabulary_across_commands() -> None:
    """Every command is classified (a new one must be), none takes --device or --run-dir, and
    every command that runs a model takes the shared --accelerator/--devices (multi-device ones
    also --num-nodes), declared once in cli/common.py."""
    assert set(CLICK_APP.commands) == MULTI_DEVICE | ONE_DEVICE | NO_MODEL
    assert not (MULTI_DEVICE & ONE_DEVICE or (MULTI_DEVICE | ONE_DEVICE) & NO_MODEL)
    for command in CLICK_APP.commands:
        flags = _all_flags(command)
        assert "--device" not in flags and "--run-dir" not in flags, command
        if command in MULTI_DEVICE:
            assert {"--accelerator", "--devices", "--num-nodes"} <= flags, command
        elif command in ONE_DEVICE:
            assert {"--accelerator", "--devices"} <= flags, command
            assert "--num-nodes" not in flags, command
        else:
            assert not flags & {"--accelerator", "--devices", "--num-nodes"}, command


def test_device_options_are_declared_once() -> None:
    """The device options of every command are the shared `Annotated` aliases of common.py;
    train's and finetune's, which set config keys, are the library's one `ConfigFlag` each."""
    import inspect
    import typing

    from goatdna.cli import common
    from goatdna.training.config import ACCELERATOR_FLAG, DEVICES_FLAG, NUM_NODES_FLAG, TRAIN_FLAGS
    from goatdna.training.finetune_config import FINETUNE_FLAGS

    shared = {
        id(typing.get_args(getattr(common, alias))[1])
        for alias in dir(common)
        if alias.endswith("Opt") and typing.get_origin(getattr(common, alias)) is typing.Annotated
    }
    device_flags = {flag.name: flag for flag in (ACCELERATOR_FLAG, DEVICES_FLAG, NUM_NODES_FLAG)}
    for flags in (TRAIN_FLAGS, FINETUNE_FLAGS):
        assert all(any(f is flag for f in flags) for flag in device_flags.values())
    for func in COMMANDS:
        hints = typing.get_type_hints(func, include_extras=True)
        parameters = inspect.signature(func).parameters
        for name in ("accelerator", "devices", "num_nodes"):
            if name not in parameters:
                continue
            if name not in hints:  # built from a config flag (`common.config_flags`)
                info = typing.get_args(parameters[name].annotation)[1]
                assert info.help == device_flags[name].help_text, (func.__name__, name)
            else:
                info = typing.get_args(hints[name])[1]
                assert id(info) in shared, (func.__name__, name)


def test_one_device_commands_refuse_two(tiny_runs: dict[str, Path]) -> None:
    ckpt = str(tiny_runs["goat"] / "checkpoints" / "best.ckpt")
    for devices in ("2", "0,1", "-1"):
        result = invoke(["generate", "-c", ckpt, "-p", "ACGT", "--devices", devices])
        assert result.exit_code == 2, result.output
        assert "error: --devices" in result.output and "one device" in result.output


def test_train_needs_out(tmp_path: Path) -> None:
    none = invoke(["train", "-d", str(tmp_path)])
    assert none.exit_code == 2 and "--out" in none.output
    old = invoke(["train", "-d", str(tmp_path), "--run-dir", str(tmp_path)])
    assert old.exit_code == 2 and "--run-dir" in old.output  # no such option


def test_help_imports_neither_torch_nor_lightning_nor_pandas() -> None:
    code = (
        "import sys; from goatdna.cli.app import app; "
        "print(sorted(m for m in ('torch', 'pytorch_lightning', 'lightning', 'pandas') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    assert out.strip() == "[]"


# ----------------------------------------------------------------------------- tables


def test_format_cell_follows_report_md() -> None:
    assert format_cell(1234567) == "1,234,567"
    assert format_cell(0.123456) == "0.1235"
    assert format_cell(float("nan")) == "n/a"
    assert format_cell(math.inf) == "n/a"
    assert format_cell(None) == "n/a"
    assert format_cell(True) == "yes"
    assert format_cell(12345.6, ",.0f") == "12,346"
    assert format_cell("goat") == "goat"


def test_frame_table_renders_every_cell_with_its_format() -> None:
    frame = pd.DataFrame(
        {
            "model": ["goat", "[red]rope[/x]"],
            "params": [1_234_567, 89],
            "val_nll": [1.234567, float("nan")],
            "tokens_per_s": [12345.6, 7.0],
            "extrapolation": [True, False],
        }
    )
    table = frame_table(frame, "summary", {"tokens_per_s": ",.0f"})
    assert [str(c.header) for c in table.columns] == list(frame.columns)
    assert [c.justify for c in table.columns] == ["left", "right", "right", "right", "left"]
    cells = [[str(cell) for cell in c.cells] for c in table.columns]
    assert cells == [
        ["goat", "[red]rope[/x]"],
        ["1,234,567", "89"],
        ["1.2346", "n/a"],
        ["12,346", "7"],
        ["yes", "no"],
    ]
    console = Console(record=True, width=120)
    print_frame(frame, "summary", {"tokens_per_s": ",.0f"}, console)
    text = console.export_text()
    assert "1,234,567" in text and "12,346" in text and "summary" in text
    assert "[red]rope[/x]" in text  # names are shown as written, not read as markup
    assert "NaN" not in text and "nan" not in text


# ----------------------------------------------------------------------------- threads


def test_decoding_threads_are_the_callers_choice_and_restored() -> None:
    import torch

    from goatdna.analysis.generate import SamplingOptions, generate_continuations, torch_threads
    from goatdna.model import DNADecoder, ModelConfig

    torch.manual_seed(0)
    config = ModelConfig(positional="rope", n_layers=1, d_model=32, n_heads=2, mlp_hidden=64,
                         train_length=32)  # fmt: skip
    model = DNADecoder(config)
    before = torch.get_num_threads()
    seen: list[int] = []
    options = SamplingOptions(max_new_tokens=3, temperature=0)
    default = generate_continuations(
        model, ["ACGT"], options, lambda n: seen.append(torch.get_num_threads())
    )
    assert set(seen) == {before} and torch.get_num_threads() == before  # None: left alone
    seen.clear()
    other = 1 if before != 1 else 2
    chosen = generate_continuations(
        model, ["ACGT"], options, lambda n: seen.append(torch.get_num_threads()), threads=other
    )
    assert set(seen) == {other} and torch.get_num_threads() == before
    assert chosen == default
    with pytest.raises(RuntimeError), torch_threads(other):
        raise RuntimeError("restored even on error")
    assert torch.get_num_threads() == before


def test_generate_threads_option_leaves_torch_unchanged(tiny_runs: dict[str, Path]) -> None:
    import torch

    before = torch.get_num_threads()
    ckpt = str(tiny_runs["goat"] / "checkpoints" / "best.ckpt")
    args = ["generate", "-c", ckpt, "-p", "ACGTACGT", "--max-new-tokens", "5", "-n", "2"]
    result = invoke([*args, "--threads", "1"])
    assert result.exit_code == 0, result.output
    assert result.output.count(">") == 2
    assert torch.get_num_threads() == before
    bad = invoke([*args, "--threads", "0"])
    assert bad.exit_code == 2 and "--threads" in bad.output


def test_wide_tables_are_not_cut_in_logs() -> None:
    """Output that is not a terminal (a log, a pipe) gets the table's natural width: no "…"."""
    import io

    from rich.console import Console

    columns = {f"a_long_metric_name_{i}": [1.23456789, 2.5] for i in range(12)}
    frame = pd.DataFrame({"model": ["goat", "rope"], **columns})
    buf = io.StringIO()
    print_frame(frame, "summary", None, Console(file=buf, width=80))
    text = buf.getvalue()
    assert "…" not in text and "a_long_metric_name_11" in text and "1.2346" in text


def test_piped_output_keeps_long_lines_and_wide_tables_whole(monkeypatch) -> None:
    """Not a terminal (a pipe, a log): no hard wrap at rich's assumed 80 columns, tables at their
    natural width; a terminal, or COLUMNS, still sets the width."""
    import io

    from rich.table import Table

    from goatdna.console import output_console

    monkeypatch.delenv("COLUMNS", raising=False)
    line = "wrote " + "/a_long_folder_name" * 10 + "/evaluation.json"
    table = Table(title="wide")
    for i in range(12):
        table.add_column(f"a_long_metric_name_{i}")
    table.add_row(*(f"{i}.2345" for i in range(12)))
    buf = io.StringIO()
    piped = output_console(file=buf)
    piped.print(line)
    piped.print(table)
    text = buf.getvalue()
    assert text.splitlines()[0] == line
    assert "…" not in text and "a_long_metric_name_11" in text and "11.2345" in text
    screen = io.StringIO()
    output_console(file=screen, force_terminal=True, width=80, color_system=None).print(line)
    wrapped = screen.getvalue().splitlines()
    assert len(wrapped) > 1 and max(map(len, wrapped)) <= 80, wrapped
    monkeypatch.setenv("COLUMNS", "100")
    assert output_console(file=io.StringIO()).width == 100


def test_a_command_piped_prints_its_long_line_whole(synthetic_shards: Path, monkeypatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    result = invoke(["info", str(synthetic_shards)])
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith(str(synthetic_shards)) and first.endswith("split mode tail-fraction")
    assert len(first) > 80, first
