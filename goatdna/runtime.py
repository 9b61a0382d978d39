"""One place that decides devices, precision and the distributed layout of inference loops.

`score-variants`, `score-track`, `embed` and `predict` run a trained model over many inputs; on
one CPU or on many GPUs they go through Lightning's predict loop built here, so device parsing,
the accelerator check and how inputs are split over ranks have one definition. Each rank takes a
contiguous block of the inputs (`rank_block`), so concatenating the ranks' outputs in rank order
gives the single-process order exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from goatdna.errors import GoatDNAError

ACCELERATORS = ("auto", "cpu", "gpu", "cuda", "mps")


def parse_devices(value: int | str, option: str = "--devices") -> int | str | list[int]:
    """``"auto"``, a count (``"2"``, ``-1`` for all) or a list of ids (``"0,1"``); else a user error."""
    if isinstance(value, int):
        count: int | str | list[int] = value
    else:
        text = value.strip()
        if text == "auto":
            return text
        try:
            if "," in text:
                count = [int(part) for part in text.split(",") if part.strip()]
            else:
                count = int(text)
        except ValueError:
            raise GoatDNAError(
                f"{option} {value!r}: expected a count (e.g. 2), -1 for all, 'auto', "
                "or a list of device ids such as 0,1"
            ) from None
    if isinstance(count, int) and count < 1 and count != -1:
        raise GoatDNAError(f"{option} {value!r}: must be >= 1 (or -1 for all devices)")
    if isinstance(count, list) and (not count or min(count) < 0):
        raise GoatDNAError(f"{option} {value!r}: device ids must be non-negative")
    return count


def check_accelerator(accelerator: str) -> str:
    """Validate an accelerator name and fail clearly when a GPU is asked for but absent."""
    import torch

    if accelerator not in ACCELERATORS:
        raise GoatDNAError(
            f"--accelerator {accelerator!r}: expected one of {', '.join(ACCELERATORS)}"
        )
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise GoatDNAError(
            f"--accelerator {accelerator}: no CUDA GPU is visible to this process; "
            "use --accelerator cpu (or auto)"
        )
    return accelerator


@dataclass(frozen=True)
class Runtime:
    """Where an inference loop runs: Lightning's accelerator, devices per node and nodes."""

    accelerator: str = "auto"
    devices: int | str | list[int] = 1
    num_nodes: int = 1
    precision: str = "32-true"

    @classmethod
    def from_options(
        cls,
        accelerator: str = "auto",
        devices: int | str = 1,
        num_nodes: int = 1,
        precision: str = "32-true",
    ) -> Runtime:
        """Build from CLI values, turning every bad one into a one-line user error."""
        if num_nodes < 1:
            raise GoatDNAError(f"--num-nodes {num_nodes}: must be >= 1")
        return cls(check_accelerator(accelerator), parse_devices(devices), num_nodes, precision)

    def fabric(self, strategy: Any = "auto", loggers: list[Any] | None = None) -> Any:
        """A launched `lightning_fabric.Fabric` on these devices: every goatdna loop (training,
        fine-tuning, inference) is a plain Python loop over Fabric, which owns only devices,
        precision, the distributed strategy and collectives.

        With ``devices > 1`` and no external launcher, ``launch()`` re-runs the current command
        once per extra device (Lightning's subprocess launcher), as ``torchrun`` would.
        """
        from lightning_fabric import Fabric

        fabric = Fabric(
            accelerator=self.accelerator,
            devices=self.devices,
            num_nodes=self.num_nodes,
            precision=self.precision,  # type: ignore[arg-type]
            strategy=strategy,
            loggers=loggers,
        )
        fabric.launch()
        return fabric

    def predict_trainer(self, callbacks: list[Any] | None = None, progress: bool = True) -> Any:
        """A Lightning Trainer for ``trainer.predict``: no logger, no checkpoints, no sampler swap.

        ``use_distributed_sampler=False``: inputs are split by `rank_block`, not by Lightning's
        DistributedSampler (which pads the last batch with repeats).
        """
        import pytorch_lightning as pl

        return pl.Trainer(
            accelerator=self.accelerator,
            devices=self.devices,
            num_nodes=self.num_nodes,
            precision=self.precision,  # type: ignore[arg-type]
            logger=False,
            enable_checkpointing=False,
            enable_model_summary=False,
            enable_progress_bar=progress,
            use_distributed_sampler=False,
            callbacks=callbacks or [],
        )


def rank_block(n_items: int, rank: int, world_size: int) -> range:
    """The contiguous block of ``range(n_items)`` that ``rank`` of ``world_size`` processes.

    Blocks differ in size by at most one and, concatenated in rank order, are ``range(n_items)``.
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in a world of size {world_size}")
    base, extra = divmod(n_items, world_size)
    start = rank * base + min(rank, extra)
    return range(start, start + base + (1 if rank < extra else 0))


def gather_blocks(module: Any, local: Any, n_total: int) -> Any:
    """Every rank's `rank_block` rows (a tensor, first dim) concatenated in rank order.

    ``module`` is the LightningModule running the loop (its ``all_gather`` does the transfer);
    blocks are padded to one size for the collective and trimmed again. One process: ``local``.
    """
    import torch

    trainer = getattr(module, "_trainer", None)
    world = trainer.world_size if trainer is not None else 1
    if world == 1:
        return local
    per = -(-n_total // world)
    padded = torch.zeros(per, *local.shape[1:], dtype=local.dtype, device=local.device)
    padded[: local.shape[0]] = local
    gathered = module.all_gather(padded)  # (world, per, ...)
    return torch.cat([gathered[r, : len(rank_block(n_total, r, world))] for r in range(world)])
