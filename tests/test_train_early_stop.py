"""Early stopping (`trainer.early_stop_evals`): the loop stops after that many validations in a
row without a new best, writes last.ckpt there and keeps best.ckpt; None runs to the end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from goatdna.training.checkpoints import TrainState
from goatdna.training.config import TrainerConfig


class Scripted:
    """A `Task` whose validation losses are a script: eval k returns losses[k]."""

    def __init__(self, losses: list[float], total: int, patience: int | None) -> None:
        from goatdna.training.loop import LoopSpec

        self.losses, self.evals = losses, 0
        self.spec = LoopSpec(
            total_steps=total, columns=("train_loss", "val_loss", "lr", "grad_norm", "elapsed_s"),
            selection="loss", higher_is_better=False, grad_clip=1.0, non_finite_hint="",
            hyper_parameters={"config": {}}, progress_label="t", progress_bar=False, shown=(),
            patience=patience,
        )  # fmt: skip
        self.module: torch.nn.Module | None = None

    def steps(self, start: int) -> Iterator[list[torch.Tensor]]:
        while True:
            yield [torch.ones(1, 2)]

    def loss(self, batch: torch.Tensor) -> torch.Tensor:
        assert self.module is not None
        return self.module(batch).pow(2).mean()

    def due(self, step: int):
        from goatdna.training.loop import Due

        return Due(log=True, validate=step % 2 == 0, checkpoint=False)

    def validate(self) -> dict[str, float]:
        self.evals += 1
        return {"loss": self.losses[self.evals - 1]}

    def row(self, step: int, lrs: list[float], grad_norm: torch.Tensor) -> dict[str, float]:
        return {"lr": lrs[0], "grad_norm": float(grad_norm)}


def run_fit(tmp_path: Path, losses: list[float], patience: int | None) -> tuple[TrainState, int]:
    from lightning_fabric import Fabric

    from goatdna.training.loop import Trainable, fit
    from goatdna.training.run import RunDir

    fabric = Fabric(accelerator="cpu", devices=1)
    task = Scripted(losses, total=2 * len(losses), patience=patience)

    def optimizer_of():
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)

    model = torch.nn.Linear(2, 2)
    trainable = Trainable.setup(fabric, model, optimizer_of)
    task.module = trainable.module
    run = RunDir(tmp_path / "run")
    run.checkpoints.mkdir(parents=True)
    finished = fit(fabric, task, run, trainable, None, 0.0)
    return finished.state, task.evals


def test_stops_after_patience_evals_without_gain(tmp_path: Path) -> None:
    # best at eval 2 (step 4); evals 3, 4, 5 bring nothing new: with patience 3 it stops at step 10
    losses = [3.0, 2.0, 2.5, 2.0, 2.1, 1.0, 0.5, 0.4]
    state, evals = run_fit(tmp_path, losses, patience=3)
    assert evals == 5 and state.stopped_step == 10
    assert state.best_step == 4 and state.best_value == 2.0 and state.evals_since_best == 3
    from goatdna.training.checkpoints import training_checkpoint_step

    run = tmp_path / "run" / "checkpoints"
    assert training_checkpoint_step(run / "last.ckpt") == 10
    assert training_checkpoint_step(run / "best.ckpt") == 4


def test_without_patience_it_runs_to_the_end(tmp_path: Path) -> None:
    losses = [3.0, 2.0, 2.5, 2.0, 2.1, 1.0]
    state, evals = run_fit(tmp_path, losses, patience=None)
    assert evals == 6 and state.stopped_step == -1 and state.best_step == 12


def test_early_stop_evals_must_be_positive() -> None:
    with pytest.raises(ValueError, match="early_stop_evals"):
        TrainerConfig(early_stop_evals=0)
