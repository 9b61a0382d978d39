"""Strict YAML <-> dataclass conversion for every config in goatdna, and what the command line
may set in one.

Configs are plain dataclasses (litgpt style). Loading rejects unknown keys and wrong types and
names the offending key (``model.n_heads``), because a silently ignored typo in a training config
costs a GPU-day. ``--set key=value`` overrides use the same path syntax.

A numeric field declares the values it accepts once, as `Bounds` in its metadata (`bounded`):
the dataclass checks them (`check_bounds`) and the CLI reads them for the flag's range check and
its --help, as `default_of` reads defaults. A command's flags that set config keys are
`ConfigFlag` tables next to the dataclasses (litgpt's ``setup(train: TrainArgs, ...)``);
`config_with_flags` is the one merge of a config mapping, ``--set`` items and flag values.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from goatdna.errors import GoatDNAError

if typing.TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")
V = TypeVar("V")


class _ConfigLoader(yaml.SafeLoader):
    """SafeLoader that also reads ``6e-4`` as a float (YAML 1.1 wants ``6.0e-4``)."""


_ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def yaml_load(text: str) -> object:
    """Parse YAML text with the config loader (floats such as ``3e-4`` included)."""
    return yaml.load(text, Loader=_ConfigLoader)  # noqa: S506 - a SafeLoader subclass


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping; a missing file or a non-mapping document is a user error."""
    path = Path(path)
    if not path.is_file():
        raise GoatDNAError(
            f"{path}: config file not found; pass a YAML file such as configs/goat-tiny.yaml"
        )
    try:
        data = yaml_load(path.read_text())
    except yaml.YAMLError as err:
        raise GoatDNAError(
            f"{path}: not valid YAML ({err.__class__.__name__}); fix the syntax"
        ) from None
    except UnicodeDecodeError:  # a binary file (a checkpoint, an archive) given as a config
        raise GoatDNAError(
            f"{path}: not a YAML config (not UTF-8 text); pass a YAML file such as "
            "configs/goat-tiny.yaml"
        ) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise GoatDNAError(f"{path}: a config must be a YAML mapping of keys to values")
    return data


class ConfigKeyError(GoatDNAError):
    """A config value that is wrong, with the dotted key it sits under (``optim.lr``), so a
    caller can tell whether a ``--set`` argument or the YAML file put it there."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.detail = message


def override_for_key(key: str, overrides: list[str]) -> str | None:
    """The last ``--set`` argument that set ``key`` (or a section above or below it)."""
    for item in reversed(overrides):
        name = item.split("=", 1)[0].strip()
        if not name or not key:
            continue
        if key == name or key.startswith((f"{name}.", f"{name}[")) or name.startswith(f"{key}."):
            return item
    return None


def _type_name(tp: object) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(value: object, tp: object, where: str) -> object:  # noqa: C901 (one branch per config field type)
    """Check (and minimally coerce: int -> float, list -> tuple) one value against a type hint."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigKeyError(where, f"config key '{where}' must be a mapping, got {value!r}")
        return from_dict(tp, value, where)
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            choices = ", ".join(repr(a) for a in allowed)
            raise ConfigKeyError(
                where, f"config key '{where}' must be one of {choices}, got {value!r}"
            )
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, where)
            except ConfigKeyError:
                continue
        raise ConfigKeyError(
            where, f"config key '{where}' has wrong type: expected {_type_name(tp)}, got {value!r}"
        )
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigKeyError(where, f"config key '{where}' must be a list, got {value!r}")
        args = typing.get_args(tp)
        item_tp = args[0] if args else Any
        items = [_coerce(v, item_tp, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigKeyError(where, f"config key '{where}' must be a mapping, got {value!r}")
        return dict(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigKeyError(
                where, f"config key '{where}' must be true or false, got {value!r}"
            )
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigKeyError(where, f"config key '{where}' must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigKeyError(where, f"config key '{where}' must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigKeyError(where, f"config key '{where}' must be a string, got {value!r}")
        return value
    if isinstance(tp, type) and not isinstance(value, tp):
        raise ConfigKeyError(where, f"config key '{where}' must be {_type_name(tp)}, got {value!r}")
    return value


def from_dict(cls: type[T], data: dict[str, Any], where: str = "") -> T:
    """Build dataclass ``cls`` from a mapping, rejecting unknown keys and wrong types by name."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        key = f"{where}.{unknown[0]}" if where else unknown[0]
        known = ", ".join(sorted(fields))
        raise ConfigKeyError(key, f"unknown config key '{key}'; known keys here: {known}")
    kwargs = {}
    for name, value in data.items():
        key = f"{where}.{name}" if where else name
        kwargs[name] = _coerce(value, hints[name], key)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        # a check's message starts with the field it refuses ("lora_rank must be >= 1"): its key,
        # so the --set item or flag that set it is the one named
        first = str(err).split(" ", 1)[0]
        key = (f"{where}.{first}" if where else first) if first in fields else where
        raise ConfigKeyError(key, f"config '{where or cls.__name__}': {err}") from None


def to_dict(obj: DataclassInstance) -> dict[str, Any]:
    """Dataclass -> plain dict (tuples become lists) that round-trips through YAML."""

    def plain(v: object) -> object:
        if isinstance(v, tuple):
            return [plain(x) for x in v]
        if isinstance(v, list):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    return {k: plain(v) for k, v in dataclasses.asdict(obj).items()}


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``section.key=value`` strings (values parsed as YAML scalars) to a nested mapping."""
    out = yaml.safe_load(yaml.safe_dump(data))  # deep copy via YAML keeps only plain types
    for item in overrides:
        if "=" not in item:
            raise GoatDNAError(f"--set {item!r}: expected key=value, e.g. --set optim.lr=3e-4")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise GoatDNAError(f"--set {item!r}: '{part}' is not a config section")
        try:
            node[parts[-1]] = parse_scalar(raw)
        except yaml.YAMLError as err:
            problem = getattr(err, "problem", None) or err.__class__.__name__
            raise GoatDNAError(
                f"--set {item!r}: the value {raw!r} is not valid YAML ({problem}); e.g. "
                "--set 'optim.betas=[0.9, 0.95]' or --set optim.lr=3e-4"
            ) from None
    return out


def comma_list(value: str | Iterable[str]) -> list[str]:
    """The items of a comma-separated flag value (``"q_proj, v_proj"``), or of a YAML list.

    The one convention for every such value (--layer/--pool, --devices, --lora-targets,
    --positive/--negative, --distances, --context-lengths): each item is stripped and empty
    items are dropped, so ``"a,,b, "`` is ``["a", "b"]`` and ``""`` is ``[]``. A list's items
    are taken as given (not split again). Callers check what the items mean, and refuse an empty
    result where one item is needed.
    """
    items = value.split(",") if isinstance(value, str) else value
    return [item.strip() for item in items if item.strip()]


def parse_scalar(raw: str) -> object:
    """Parse one ``--set`` value as a YAML scalar (``3e-4`` is a float, ``true`` a bool)."""
    return yaml_load(raw)


# ----------------------------------------------------------------------------- bounds of fields

# The largest integer any option accepts: exact in float64 and far inside int64, so no value a
# user types can wrap around in numpy or torch (1e20 was written as -9223372036854775808).
MAX_INT = 2**53


@dataclasses.dataclass(frozen=True)
class Bounds:
    """The values a number accepts: ``low``..``high`` (each inclusive unless ``*_open``); a float
    must be finite (NaN passes every comparison, so it is refused on its own). ``note`` says why,
    in a config's own message."""

    low: float | None
    high: float | None
    low_open: bool = False
    high_open: bool = False
    note: str = dataclasses.field(default="", compare=False)

    def describe(self) -> str:
        def number(x: float) -> str:
            return f"{x:,}" if float(x).is_integer() and abs(x) >= 1000 else f"{x:g}"

        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {number(self.low)}")
        if self.high is not None and self.high < MAX_INT:
            parts.append(f"{'<' if self.high_open else '<='} {number(self.high)}")
        return " and ".join(parts) or "finite"

    def accepts(self, value: float) -> bool:
        import math

        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def with_note(self, note: str) -> Bounds:
        return dataclasses.replace(self, note=note)


SEED = Bounds(0, 2**32 - 1)  # what numpy, torch and Python's random all accept
COUNT = Bounds(1, MAX_INT)  # sizes, counts, lengths, steps: at least one
COUNT_OR_ZERO = Bounds(0, MAX_INT)  # where 0 has a documented meaning (none, all, auto)
NON_NEGATIVE = Bounds(0, None)  # finite floats >= 0 (thresholds, temperature)
POSITIVE = Bounds(0, None, low_open=True)
FRACTION = Bounds(0, 1, high_open=True)
OPEN_FRACTION = Bounds(0, 1, low_open=True, high_open=True)
TOP_K = Bounds(1, 4)  # sampling among the k most likely of the four bases
SHARE = Bounds(0, 1, low_open=True)  # (0, 1]: a share that may be the whole

_BOUNDS = "goatdna.bounds"


def bounded(default: V, bounds: Bounds) -> V:
    """A dataclass field: ``default``, accepting ``bounds`` (`check_bounds`, the CLI's range)."""
    return dataclasses.field(default=default, metadata={_BOUNDS: bounds})


def bounds_of(owner: type, name: str) -> Bounds | None:
    """The `Bounds` a dataclass declares on field ``name`` (None: none declared)."""
    for item in dataclasses.fields(owner):
        if item.name == name:
            found = item.metadata.get(_BOUNDS)
            return found if isinstance(found, Bounds) else None
    raise KeyError(f"{owner.__name__} has no field {name!r}")


def check_bounds(obj: DataclassInstance, error: type[Exception] = ValueError) -> None:
    """Refuse a field outside its declared `Bounds` (a ValueError that names the field: the
    `from_dict` error then names its key), in field order; None passes (an optional field), and
    so does a value that is not a number (a field of ``int | str`` such as ``"auto"``).

    ``error``: the class raised; a library request built from command-line options raises a
    `GoatDNAError` (a user error), though the CLI refused the same values first (the flag's range
    is the field's)."""
    for item in dataclasses.fields(obj):
        bounds = item.metadata.get(_BOUNDS)
        value = getattr(obj, item.name)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if isinstance(bounds, Bounds) and number and not bounds.accepts(value):
            why = f" ({bounds.note})" if bounds.note else ""
            raise error(f"{item.name} must be {bounds.describe()}{why}, got {value}")


# ------------------------------------------------------------------ flags that set config keys


@dataclasses.dataclass(frozen=True)
class ConfigFlag:
    """A command-line flag that sets one config key (``--lr`` sets ``optim.head_lr``).

    ``name`` is the command's parameter: its flag is ``--name`` (``_`` as ``-``; a switch gets
    ``--no-name`` too) unless the CLI spells the concept for every command
    (`goatdna.cli.common.OPTION_NAMES`) or ``names`` spells it. Type, bounds and choices are the field's; the flag's
    default is None, which keeps the config's value (an options dataclass that only flags fill,
    `options_with_flags`: the field's default). ``help`` None: the concept's shared help;
    ``names_key``: the help ends "(default: config key KEY)."
    """

    name: str
    key: str
    help: str | None = None
    names_key: bool = False
    names: tuple[str, ...] = ()
    """The flag's own spelling where it is not ``--name`` (``("--workers", "-j")``, a switch's
    ``("--length-fair/--length-unfair",)``); () for ``--name``."""

    @property
    def help_text(self) -> str | None:
        if self.help is None or not self.names_key:
            return self.help
        return f"{self.help} (default: config key {self.key})."


def field_type(owner: type, key: str) -> object:
    """The type hint of the dotted ``key`` in dataclass ``owner`` (through nested sections)."""
    section, name = field_owner(owner, key)
    return typing.get_type_hints(section)[name]


def field_owner(owner: type, key: str) -> tuple[type, str]:
    """The dataclass that holds the dotted ``key``, and the field's name in it."""
    *sections, name = key.split(".")
    for section in sections:
        owner = typing.get_type_hints(owner)[section]
    return owner, name


def _flag_value(value: object, tp: object) -> object:
    """A flag's value as the config holds it: text that reads as a whole number, for a field
    that takes a number or text (``trainer.devices``), is the number (as YAML reads it)."""
    args = typing.get_args(tp)
    if isinstance(value, str) and int in args and str in args:
        try:
            return int(value)
        except ValueError:
            return value
    return value


def config_with_flags(
    cls: type[T],
    data: dict[str, Any],
    flags: Sequence[ConfigFlag],
    values: Mapping[str, object],
    overrides: Sequence[str] = (),
    build: Callable[[dict[str, Any]], T] | None = None,
) -> T:
    """The one merge of a command's config: ``data`` (a config file, a resumed run's config or
    the defaults), then the ``--set`` ``overrides``, then each flag given (``values[name]`` not
    None): a flag wins over a ``--set`` of its key. A wrong value names where it came from: the
    flag as typed, or the ``--set`` item; else the error is raised as it is.

    ``build`` (``dict -> cls``, default `from_dict`) is the config's own reader.
    """
    overrides = list(overrides)
    merged = apply_overrides(data, overrides)
    given = {f.key: (f, values[f.name]) for f in flags if values.get(f.name) is not None}
    for key, (_, value) in given.items():
        *sections, name = key.split(".")
        node = merged
        for section in sections:
            node = node.setdefault(section, {})
        node[name] = _flag_value(value, field_type(cls, key))
    try:
        return build(merged) if build is not None else from_dict(cls, merged)
    except ConfigKeyError as err:
        if err.key in given:
            flag, value = given[err.key]
            shown = f"{value!r}" if isinstance(value, str) else f"{value}"
            raise GoatDNAError(f"{flag_spelling(flag)} {shown}: {err.detail}") from None
        item = override_for_key(err.key, overrides)
        if item is None:
            raise
        raise GoatDNAError(f"--set {item!r}: {err.detail}") from None


def options_with_flags(
    cls: type[T], flags: Sequence[ConfigFlag], values: Mapping[str, object], **fixed: Any
) -> T:
    """An options dataclass that only a command's flags fill (no config file, no ``--set``):
    ``fixed`` (what the command sets itself) and each flag's value at its field; text for a list
    field is its comma-separated items (``a, b`` -> ``["a", "b"]``; ``""`` -> none).

    The flags' defaults are the fields' own (`goatdna.cli.common.config_flags` with
    ``own_defaults``), so a flag not given passes its field's default on.
    """
    kwargs = dict(fixed)
    for flag in flags:
        value = values[flag.name]
        field_tp = field_type(cls, flag.key)
        lists = [a for a in (field_tp, *typing.get_args(field_tp)) if typing.get_origin(a) is list]
        if isinstance(value, str) and lists:
            value = comma_list(value)
        kwargs[flag.key] = value
    return cls(**kwargs)


def flag_spelling(flag: ConfigFlag) -> str:
    """The long flag of ``flag`` as a message names it (``--lr``)."""
    return "--" + flag.name.replace("_", "-")
