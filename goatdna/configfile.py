"""Strict YAML <-> dataclass conversion for every config in goatdna.

Configs are plain dataclasses (litgpt style). Loading rejects unknown keys and wrong types and
names the offending key (``model.n_heads``), because a silently ignored typo in a training config
costs a GPU-day. ``--set key=value`` overrides use the same path syntax.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

from goatdna.errors import GoatDNAError

if typing.TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


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
        raise ConfigKeyError(where, f"config '{where or cls.__name__}': {err}") from None


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


def parse_scalar(raw: str) -> object:
    """Parse one ``--set`` value as a YAML scalar (``3e-4`` is a float, ``true`` a bool)."""
    return yaml_load(raw)
