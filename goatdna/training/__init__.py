"""Training of GOAT and RoPE decoders on prepared shards (a plain loop on Lightning Fabric).

``from goatdna.training import RunConfig, load_run_config, train``. The config names import
instantly; `train` loads torch and Lightning Fabric on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from goatdna.training.config import (
    DataConfig,
    OptimConfig,
    RunConfig,
    TrainerConfig,
    load_run_config,
    run_config_from_dict,
)

if TYPE_CHECKING:  # type checkers see `train` itself; at run time it loads on first use
    from goatdna.training.trainer import train

__all__ = [
    "DataConfig",
    "OptimConfig",
    "RunConfig",
    "TrainerConfig",
    "load_run_config",
    "run_config_from_dict",
    "train",
]


def __getattr__(name: str) -> object:
    if name == "train":
        from goatdna.training.trainer import train

        return train
    raise AttributeError(f"module 'goatdna.training' has no attribute {name!r}")
