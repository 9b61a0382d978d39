"""The command modules of `goatdna.cli.commands` are thin (issue 42.3): flags, a typed request,
one library call and the printing of its result, as `goatdna attribute` reads. Their option
declarations may be long; the code beside them may not, so a loop, a validation or an output
assembly that grows in a command is caught here and belongs in the library."""

from __future__ import annotations

import ast
import inspect

import pytest

from goatdna.cli.commands import COMMANDS

MAX_CODE_LINES = 70
"""Lines of a command module outside its command's signature (the option declarations and the
docstring): the module's docstring and imports, the request, the call, the printing."""

NOT_YET_THIN: set[str] = set()
"""Commands whose orchestration has not moved into the library yet (issue 42.3); each leaves
this set when it does, and then stays thin."""


def code_lines(module_source: str, command: str) -> int:
    """The module's lines, less those of ``command``'s signature and docstring."""
    tree = ast.parse(module_source)
    total = len(module_source.splitlines())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == command:
            first = node.body[0]
            docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            body_start = first.end_lineno if docstring else first.lineno - 1
            assert body_start is not None
            return total - (body_start - node.lineno + 1)
    raise AssertionError(f"no function {command} in its module")


@pytest.mark.parametrize(
    "command", [c for c in COMMANDS if c.__name__ not in NOT_YET_THIN], ids=lambda c: c.__name__
)
def test_a_command_module_is_options_a_request_and_one_call(command) -> None:
    module = inspect.getmodule(command)
    assert module is not None
    lines = code_lines(inspect.getsource(module), command.__name__)
    assert lines <= MAX_CODE_LINES, (
        f"{module.__name__}: {lines} lines beside the option declarations (at most "
        f"{MAX_CODE_LINES}): move the logic into the library's request and run function"
    )


def test_the_count_leaves_out_the_options_only() -> None:
    source = '"""doc."""\n\n\ndef cmd(\n    a: int = 1,\n    b: int = 2,\n) -> None:\n'
    source += '    """Help."""\n    x = a + b\n    print(x)\n'
    assert code_lines(source, "cmd") == 3 + 2  # the module docstring and blanks, the body
    assert all(name in {c.__name__ for c in COMMANDS} for name in NOT_YET_THIN)


MAX_MODULE_LINES = 125
"""Lines of a whole command module, its option declarations included (issue 42's acceptance:
no cli/*.py but the option vocabulary over ~120 lines): options that several commands share are
types in `goatdna.cli.common`, and options that fill a library dataclass are its `ConfigFlag`
table (`config_flags`), so a module's own declarations stay few."""


@pytest.mark.parametrize(
    "command", [c for c in COMMANDS if c.__name__ not in NOT_YET_THIN], ids=lambda c: c.__name__
)
def test_a_command_module_is_short_with_its_options(command) -> None:
    module = inspect.getmodule(command)
    assert module is not None
    lines = len(inspect.getsource(module).splitlines())
    assert lines <= MAX_MODULE_LINES, (
        f"{module.__name__}: {lines} lines (at most {MAX_MODULE_LINES}): share its repeated "
        "options through goatdna.cli.common or declare them on the library's dataclass"
    )
