"""Every numeric option of every command has one declared range (cli/common.py), and a command
line mistake is one ``error:`` line with exit 2: no traceback, no Click box. --help shows what
each flag takes: nothing after a switch, the choices of a fixed set, never a Python type."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
import typer
from helpers import invoke

from goatdna.cli.app import app
from goatdna.cli.common import NUMERIC_RANGES, Bounds, with_declared_ranges

CLICK_APP = typer.main.get_command(app)
HUGE = {int: "1" + "0" * 30, float: "1e400"}  # past int64; float overflow reads as inf


def _numeric_options() -> list[tuple[str, str, type]]:
    found = []
    for name, command in CLICK_APP.commands.items():
        for param in command.params:
            annotation = param.type_descriptor.annotation
            if param.param_type_name == "option" and annotation in (int, float):
                found.append((name, max(param.opts, key=len), annotation))
    return found


def _no_traceback(result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code in (0, 1, 2), result.output
    if result.exit_code:
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert lines and lines[-1].startswith("error: "), result.output
        assert "╭" not in result.output and "Traceback" not in result.output, result.output


def test_every_numeric_option_sweeps_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0, -1 and a huge value for each numeric option of each command (~90 options): refused in
    one line before any work where out of range; in range, the command meets its missing inputs
    (demo: configs that do not exist) and stops with its own one line."""
    options = _numeric_options()
    assert len(options) > 80
    missing = str(tmp_path / "nope")
    # the click command built once, not per run: ~330 runs in seconds
    monkeypatch.setattr("typer.testing._get_command", lambda _: CLICK_APP)
    for command, flag, kind in options:
        base = [command]
        if command == "demo":
            base += ["--goat-config", missing, "--rope-config", missing, "-o", str(tmp_path)]
        for value in ("0", "-1", HUGE[kind], "nan"):
            if kind is int and value == "nan":
                continue
            result = invoke([*base, flag, value])
            _no_traceback(result)
            assert result.exit_code == 2, (command, flag, value, result.output)
            if value in (HUGE[kind], "nan"):  # never in range
                assert f"error: {flag} " in result.output, result.output
                assert ": must be " in result.output, result.output


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["eval-variants", "--scores", "x.tsv", "--seed", "-1"], "--seed"),
        (["make-variant-task", "-f", "x.fa", "-o", "t.tsv", "--seed", "-1"], "--seed"),
        (["check-precision", "-c", "x", "-f", "x.fa", "--batch-size", "0"], "--batch-size"),
        (["check-precision", "-c", "x", "-f", "x.fa", "--batch-size", "-2"], "--batch-size"),
        (["check-precision", "-c", "x", "-f", "x.fa", "--max-nll-diff", "nan"], "--max-nll-diff"),
        (["check-precision", "-c", "x", "-f", "x.fa", "--max-nll-diff", "-1"], "--max-nll-diff"),
        (["check-precision", "-c", "x", "-f", "x.fa", "--min-spearman", "2"], "--min-spearman"),
        (["train", "-d", "x"], "'--out'"),  # a missing required option: one line too
        (["train", "-d", "x", "-o", "y", "--no-such-flag"], "--no-such-flag"),
    ],
)
def test_command_line_mistakes_are_one_line(args: list[str], names: str) -> None:
    result = invoke(args)
    _no_traceback(result)
    assert result.exit_code == 2 and names in result.output, result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1


def test_a_numeric_option_without_a_declared_range_is_refused() -> None:
    def new_command(frobs: typing.Annotated[int, typer.Option("--frobs")] = 1) -> None:
        """A command whose author forgot the range."""

    with pytest.raises(KeyError, match="frobs"):
        with_declared_ranges(new_command)
    assert all(isinstance(b, Bounds) for b in NUMERIC_RANGES.values())


def test_bounds_refuse_nan_inf_and_respect_open_ends() -> None:
    fraction = Bounds(0, 1, low_open=True, high_open=True)
    assert fraction.accepts(0.5) and not fraction.accepts(0.0) and not fraction.accepts(1.0)
    assert not Bounds(0, None).accepts(float("nan")) and not Bounds(None, None).accepts(math_inf())
    assert Bounds(1, 4).accepts(4) and not Bounds(1, 4).accepts(5)


def math_inf() -> float:
    return float("inf")


@pytest.mark.parametrize("command", sorted(CLICK_APP.commands))
def test_help_shows_what_each_flag_takes(command: str) -> None:
    result = invoke([command, "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    text = result.output
    assert "<bool>" not in text and "list[" not in text and "<str>" not in text, text
    assert "[[" not in text, text
    for param in CLICK_APP.commands[command].params:
        if param.param_type_name != "option" or param.hidden:
            continue
        row = next(line for line in text.splitlines() if re.search(rf"{param.opts[0]}\b", line))
        if param.is_flag:
            assert "<" not in row.split(param.opts[0])[1].split("  ")[1:3], row


# what rich would read as a markup tag, and drop: [lora], [bold], [/x], [#fff], [@click]
MARKUP_LIKE = re.compile(r"\[[a-z#/@][^\[\]]*\]")


def test_help_shows_square_brackets_as_written() -> None:
    """`pip install 'goatdna[lora]'` in finetune's --help read `pip install 'goatdna'`: every
    help text (the group's listing, each command's own text and options) is escaped at render
    time (`literal_help`), so each bracketed word shows as written."""
    checked = []
    for command in [None, *sorted(CLICK_APP.commands)]:
        click_command = CLICK_APP if command is None else CLICK_APP.commands[command]
        texts = [click_command.help or "", *(p.help or "" for p in click_command.params)]
        if command is None:
            texts += [c.short_help or "" for c in CLICK_APP.commands.values()]
        args = [command, "--help"] if command else ["--help"]
        output = invoke(args, env={"COLUMNS": "250"}).output
        for tag in {tag for text in texts for tag in MARKUP_LIKE.findall(" ".join(text.split()))}:
            assert tag in output, (command, tag, output)
            checked.append((command, tag))
    assert ("finetune", "[lora]") in checked


def test_make_task_help_offers_every_label_and_decoy_choice() -> None:
    from goatdna.data_prep.tasks import DECOYS, LABELS

    text = invoke(["make-task", "--help"], env={"COLUMNS": "250"}).output
    assert f"<{'|'.join(LABELS)}>" in text and "motif" in LABELS, text
    assert f"<{'|'.join(DECOYS)}>" in text, text


def test_choices_are_shown_and_required_config_is_said() -> None:
    text = invoke(["score-variants", "--help"], env={"COLUMNS": "250"}).output
    assert "<both|forward>" in text and "<auto|cpu|cuda|gpu|mps>" in text
    train = invoke(["train", "--help"], env={"COLUMNS": "250"}).output
    assert "required for a new run" in train and "[auto]" in train


def _cli_reference() -> str:
    """The page docs/hooks/cli_reference.py generates at every docs build."""
    pytest.importorskip("mkdocs")
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "docs" / "hooks" / "cli_reference.py"
    spec = importlib.util.spec_from_file_location("cli_reference", path)
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    return hook.cli_reference_markdown()


def test_the_cli_reference_shows_brackets_and_choices_as_written() -> None:
    """The escaping is --help's alone (`literal_help`): the docs' page keeps the texts as written."""
    page = _cli_reference()
    assert "`pip install 'goatdna[lora]'`" in page and "\\[" not in page
    assert "`--label <repeat|gc|motif>`" in page and "`--decoys <shuffled|none>`" in page


def test_the_cli_reference_gives_every_summary_whole() -> None:
    """docs/hooks/cli_reference.py lists each command with its docstring's first paragraph (Click
    cut each to ~45 characters with "...")."""
    from goatdna.cli.app import summary
    from goatdna.cli.commands import COMMANDS

    page = _cli_reference()
    listing = page[page.index("**Commands**") :].split("\n\n")[1].splitlines()
    assert len(listing) == len(COMMANDS)
    for command, line in zip(COMMANDS, listing, strict=True):
        name = command.__name__.replace("_", "-")
        assert line == f"* `{name}`: {summary(command)}", line
        assert len(summary(command)) > 45 and "..." not in line, line


def test_score_variants_names_the_flag_the_user_typed(
    tiny_runs: dict[str, Path], tmp_path: Path
) -> None:
    fasta = tmp_path / "ref.fa"
    fasta.write_text(">chrA\n" + "ACGT" * 50 + "\n")
    ckpt = tiny_runs["goat"] / "checkpoints" / "best.ckpt"
    missing = tmp_path / "nope.vcf"
    args = ["score-variants", "-c", str(ckpt), "-f", str(fasta), "--variants", str(missing),
            "-o", str(tmp_path / "o.tsv"), "--accelerator", "cpu"]  # fmt: skip
    result = invoke(args)
    assert result.exit_code == 2 and f"--variants {missing}: file not found" in result.output


def test_attribute_help_shows_its_own_method_and_baseline_choices() -> None:
    """`attribute --method` takes ism|saliency|integrated-gradients, not mutagenesis' full|local
    (issue 40.14a): the choices come from the library's tuples, in --help and the docs."""
    from goatdna.inference.attribute import BASELINES, METHODS

    text = invoke(["attribute", "--help"], env={"COLUMNS": "250"}).output
    assert f"<{'|'.join(METHODS)}>" in text and f"<{'|'.join(BASELINES)}>" in text, text
    assert "full|local" not in text
    mutagenesis = invoke(["mutagenesis", "--help"], env={"COLUMNS": "250"})
    assert "<full|local>" in mutagenesis.output


def test_an_option_takes_the_bounds_its_library_field_declares() -> None:
    """A numeric option's range is read from the library field that holds its value (as
    `default_of` reads defaults): the range --help shows and the CLI checks is the field's, one
    concept has one range in every command, and NUMERIC_RANGES keeps only what no field holds."""
    from goatdna.cli.common import FIELD_NAMES, field_range, option_range, range_owners
    from goatdna.configfile import bounds_of

    by_concept: dict[str, set[tuple[str, Bounds]]] = {}
    from_fields, from_table = set(), set()
    for command, flag, _ in _numeric_options():
        if command in ("train", "finetune"):  # config flags: the field's bounds travel with them
            continue
        param = next(p for p in CLICK_APP.commands[command].params if flag in p.opts)
        bounds = option_range(command, param.name)
        assert (param.help or "").endswith(f"[{bounds.describe()}]"), (command, flag)
        declared = field_range(command, param.name)
        if declared is not None:
            assert bounds == declared, (command, flag)
            from_fields.add(param.name)
        else:
            from_table.add(param.name)
        by_concept.setdefault(param.name, set()).add((command, bounds))
    # one concept, one range: batch_size is score-track's only other meaning (0: from the context)
    for name, uses in by_concept.items():
        ranges = {b for command, b in uses if (command, name) != ("score-track", "batch_size")}
        assert len(ranges) == 1, (name, uses)
    assert {"tolerance", "batch_size", "seed", "min_spearman", "plant_rate"} <= from_fields
    # no table entry that a field now holds in every command, none unused
    assert set(NUMERIC_RANGES) <= from_table, set(NUMERIC_RANGES) - from_table
    # every renamed field exists on an owner of its command, and declares bounds
    for (command, option), field in FIELD_NAMES.items():
        owners = [o for o in range_owners()[command] if field in o.__dataclass_fields__]
        assert owners and bounds_of(owners[0], field) is not None, (command, option)


def test_a_library_request_checks_its_fields_bounds_in_one_form() -> None:
    """The library's own check of an option is `check_bounds` over the same declared bounds: a
    user error naming the field (library callers pass no flags), not a second copy of the CLI's
    message (`TrackOptions` said `--batch-size -1: must be >= 1` of a range that takes 0)."""
    from goatdna.analysis.motifs import MotifOptions
    from goatdna.analysis.variant_eval import EvalOptions
    from goatdna.errors import GoatDNAError
    from goatdna.inference.attribute import AttributeOptions
    from goatdna.inference.mutagenesis import MutagenesisOptions
    from goatdna.inference.precision_check import Thresholds
    from goatdna.inference.tracks import TrackOptions
    from goatdna.inference.variants import VariantOptions
    from goatdna.runtime import Runtime

    cases = [
        (lambda: AttributeOptions(tolerance=0.0), "tolerance must be > 0 and < 1, got 0.0"),
        (lambda: MotifOptions(flank=-1), "flank must be >= 0, got -1"),
        (lambda: EvalOptions(level=1.0), "level must be > 0 and < 1, got 1.0"),
        (lambda: TrackOptions(8, 4, batch_size=-1), "batch_size must be >= 0, got -1"),
        (lambda: Thresholds(min_spearman=2.0), "min_spearman must be >= -1 and <= 1, got 2.0"),
        (lambda: Runtime(num_nodes=0), "num_nodes must be >= 1, got 0"),
        (lambda: VariantOptions(8, batch_size=0), "batch_size must be >= 1, got 0"),
        (lambda: MutagenesisOptions(8, batch_size=0), "batch_size must be >= 1, got 0"),
    ]
    for build, message in cases:
        with pytest.raises(GoatDNAError, match=f"^{re.escape(message)}$"):
            build()
