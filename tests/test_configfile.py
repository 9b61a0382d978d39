from dataclasses import dataclass, field
from typing import Literal

import pytest

from goatdna.configfile import apply_overrides, from_dict, to_dict
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
