import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

import goatdna
from goatdna.configfile import (
    COUNT,
    OPEN_FRACTION,
    SEED,
    ConfigFlag,
    apply_overrides,
    bounded,
    bounds_of,
    check_bounds,
    comma_list,
    config_with_flags,
    from_dict,
    options_with_flags,
    to_dict,
)
from goatdna.errors import GoatDNAError
from goatdna.model.config import ModelConfig


@dataclass
class Inner:
    lr: float = 1e-3
    steps: int = 10


@dataclass
class Outer:
    name: str = "x"
    mode: Literal["a", "b"] = "a"
    inner: Inner = field(default_factory=Inner)
    sizes: list[int] = field(default_factory=list)
    maybe: int | None = None


def test_round_trip_and_int_to_float():
    cfg = from_dict(Outer, {"inner": {"lr": 1, "steps": 3}, "sizes": [1, 2], "maybe": 4})
    assert cfg.inner.lr == 1.0 and isinstance(cfg.inner.lr, float)
    assert from_dict(Outer, to_dict(cfg)) == cfg


@pytest.mark.parametrize(
    "data, key",
    [
        ({"inner": {"lrr": 1}}, "inner.lrr"),
        ({"inner": {"steps": "3"}}, "inner.steps"),
        ({"inner": {"steps": 2.5}}, "inner.steps"),
        ({"mode": "c"}, "mode"),
        ({"sizes": [1, "x"]}, "sizes[1]"),
        ({"maybe": "x"}, "maybe"),
    ],
)
def test_bad_keys_and_types_name_the_key(data, key):
    with pytest.raises(GoatDNAError, match=key.replace("[", r"\[").replace("]", r"\]")):
        from_dict(Outer, data)


def test_overrides_parse_yaml_scalars():
    out = apply_overrides({"inner": {"lr": 1.0}}, ["inner.lr=3e-4", "inner.steps=5", "name=y"])
    assert out == {"inner": {"lr": 3e-4, "steps": 5}, "name": "y"}
    with pytest.raises(GoatDNAError, match="key=value"):
        apply_overrides({}, ["nonsense"])


def test_model_config_rejects_nonpositive_content_dim():
    with pytest.raises(GoatDNAError, match="content_dim"):
        from_dict(ModelConfig, {"d_model": 128, "n_heads": 4, "goat_modes": 16})
    assert (
        from_dict(ModelConfig, {"positional": "rope", "d_model": 128, "n_heads": 4}).content_dim
        == 32
    )


# ----------------------------------------------------------------------------- bounds and flags


@dataclass
class Bounded:
    steps: int = bounded(10, COUNT)
    share: float = bounded(0.5, OPEN_FRACTION)
    label: str = "x"
    size: int | str = 1

    def __post_init__(self) -> None:
        check_bounds(self)


@dataclass
class Holder:
    part: Bounded = field(default_factory=Bounded)
    seed: int = bounded(0, SEED.with_note("numpy takes no negative seed"))

    def __post_init__(self) -> None:
        check_bounds(self)


HOLDER_FLAGS = (
    ConfigFlag("steps", "part.steps", "Steps", names_key=True),
    ConfigFlag("size", "part.size"),
    ConfigFlag("seed", "seed"),
)


def test_bounds_are_declared_on_the_field_and_checked_with_one_message() -> None:
    assert bounds_of(Bounded, "steps") == COUNT and bounds_of(Bounded, "label") is None
    with pytest.raises(ValueError, match=r"^steps must be >= 1, got 0$"):
        Bounded(steps=0)
    with pytest.raises(ValueError, match=r"share must be > 0 and < 1, got nan"):
        Bounded(share=float("nan"))
    with pytest.raises(ValueError, match=r"seed must be >= 0 .*\(numpy takes no negative seed\)"):
        Holder(seed=-1)
    # through a config mapping, the error's key is the field's (so --set/flags can be named)
    with pytest.raises(GoatDNAError, match="config 'part': steps must be >= 1") as err:
        from_dict(Holder, {"part": {"steps": 0}})
    assert err.value.key == "part.steps"  # type: ignore[attr-defined]


def test_config_with_flags_merges_overrides_then_flags_and_names_the_source() -> None:
    base = to_dict(Holder())
    merged = config_with_flags(Holder, base, HOLDER_FLAGS, {"steps": 3}, ["part.steps=7"])
    assert merged.part.steps == 3  # a flag wins over a --set of its key
    kept = config_with_flags(Holder, base, HOLDER_FLAGS, {"steps": None}, ["part.steps=7"])
    assert kept.part.steps == 7  # a flag not given keeps what the config says
    counted = config_with_flags(Holder, base, HOLDER_FLAGS, {"size": "4"})
    assert counted.part.size == 4  # a count stays a number (as YAML reads it)
    assert config_with_flags(Holder, base, HOLDER_FLAGS, {"size": "0,1"}).part.size == "0,1"
    with pytest.raises(GoatDNAError, match=r"^--steps 0: config 'part': steps must be >= 1"):
        config_with_flags(Holder, base, HOLDER_FLAGS, {"steps": 0})
    with pytest.raises(GoatDNAError, match=r"^--set 'part.steps=0': config 'part': steps must"):
        config_with_flags(Holder, base, HOLDER_FLAGS, {}, ["part.steps=0"])
    assert HOLDER_FLAGS[0].help_text == "Steps (default: config key part.steps)."
    assert HOLDER_FLAGS[1].help_text is None  # the concept's shared help


PACKAGE = Path(goatdna.__file__).resolve().parent

COMMA_SPLIT_ALLOWED = {
    "configfile.py",  # comma_list itself
}


def comma_splits(source: str) -> list[int]:
    """Lines that split a value on commas (``<expr>.split(",")``)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "split"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == ","
    ]


def test_comma_separated_values_have_one_parser() -> None:
    """Comma-separated flag values (--layer/--pool, --devices, --lora-targets, --positive,
    --distances, --context-lengths) were each split by hand in their own module; one parser,
    `comma_list`, keeps one convention (items stripped, empty items dropped)."""
    found = [
        f"{path.relative_to(PACKAGE).as_posix()}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).as_posix() not in COMMA_SPLIT_ALLOWED
        for line in comma_splits(path.read_text())
    ]
    assert found == [], "use goatdna.configfile.comma_list in: " + ", ".join(found)
    assert comma_splits((PACKAGE / "configfile.py").read_text()), "the scan sees no split"
    assert comma_splits('x = text.split(",")\ny = text.split(";")\n') == [1]


@pytest.mark.parametrize(
    ("value", "items"),
    [
        ("a,b", ["a", "b"]),
        (" a , b ", ["a", "b"]),
        ("a,,b,", ["a", "b"]),
        ("", []),
        (" , ", []),
        ("q_proj", ["q_proj"]),
        (["q_proj ", "", " v_proj"], ["q_proj", "v_proj"]),  # a YAML list: items as given
        (("a,b",), ["a,b"]),  # a list's items are not split again
    ],
)
def test_comma_list_strips_items_and_drops_empty_ones(value, items) -> None:
    assert comma_list(value) == items


@dataclass
class Options:
    names: list[str] | None = None
    count: int = 3
    required: str = ""


OPTION_FLAGS = (ConfigFlag("names", "names"), ConfigFlag("count", "count"))


def test_options_with_flags_fills_a_plain_options_dataclass_from_flag_values() -> None:
    built = options_with_flags(
        Options, OPTION_FLAGS, {"names": " a, b ,", "count": 5}, required="x"
    )
    assert built == Options(names=["a", "b"], count=5, required="x")
    assert options_with_flags(Options, OPTION_FLAGS, {"names": "", "count": 3}).names == []
    assert options_with_flags(Options, OPTION_FLAGS, {"names": None, "count": 3}).names is None
