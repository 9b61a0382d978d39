"""Multi-process launches without the processes: which rank writes the run directory under
every launcher's environment variables, checks that stop every rank before any rendezvous, the
world-size check, `--resume auto`, and the progress bar updated once per optimizer step."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from helpers import invoke

from goatdna.errors import GoatDNAError
from goatdna.training import load_run_config, train
from goatdna.training import trainer as trainer_module
from goatdna.training.loop import StepProgress
from goatdna.training.run import RunDir, resolved_config

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "goat-tiny.yaml"
SMALL = [
    "model.n_layers=1",
    "model.d_model=32",
    "model.n_heads=2",
    "model.mlp_hidden=64",
    "model.goat_modes=2",
    "model.train_length=32",
    "data.seq_len=32",
    "data.micro_batch_size=2",
    "data.val_max_windows=4",
    "data.verify=false",
    "trainer.eval_every=2",
    "trainer.ckpt_every=2",
    "trainer.log_every=1",
    "trainer.progress_bar=false",
    "trainer.tensorboard=false",
]
LAUNCH_VARS = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK",
    "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "SLURM_NTASKS", "SLURM_PROCID",
    "SLURM_LOCALID", "SLURM_NODEID", "SLURM_JOB_NAME", "SLURM_NTASKS_PER_NODE", "SLURM_NNODES",
    "SLURM_JOB_ID", "SLURM_NODELIST", "SLURM_JOB_NUM_NODES", "SLURM_CPUS_PER_TASK",
)  # fmt: skip


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in LAUNCH_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


class ReachedRendezvous(Exception):
    """Raised instead of the training loop: past this point a multi-process run needs its peers."""


def _stop_before_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """One process goes as far as a real one before it needs its peers: Fabric is built but not
    launched, its broadcast and barrier act as without peers (this process's own value; no
    wait), the run directory is claimed, and the loop is not entered."""
    from lightning_fabric import Fabric

    def stop(*args, **kwargs):
        raise ReachedRendezvous

    monkeypatch.setattr(Fabric, "launch", lambda self, *args, **kwargs: None)
    monkeypatch.setattr(Fabric, "broadcast", lambda self, obj, src=0: obj)
    monkeypatch.setattr(Fabric, "barrier", lambda self, name=None: None)
    monkeypatch.setattr(trainer_module, "_fit", stop)


TORCHRUN = {"TORCHELASTIC_RUN_ID": "job", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29400"}
SRUN = {"SLURM_JOB_NAME": "train", "SLURM_JOB_ID": "7", "SLURM_NODELIST": "n[1-2]"}

# (launch environment, devices per node, nodes, global rank Lightning gives this process)
MATRIX = [
    pytest.param({}, 1, 1, 0, id="single-process"),
    pytest.param({"LOCAL_RANK": "1"}, 2, 1, 1, id="lightning-launcher-local-1"),
    pytest.param({"NODE_RANK": "1", "LOCAL_RANK": "0"}, 2, 2, 2, id="lightning-node-1"),
    pytest.param({"NODE_RANK": "0", "LOCAL_RANK": "0"}, 2, 2, 0, id="lightning-node-0"),
    pytest.param(
        {
            **TORCHRUN,
            "RANK": "0",
            "LOCAL_RANK": "0",
            "GROUP_RANK": "0",
            "WORLD_SIZE": "4",
            "LOCAL_WORLD_SIZE": "2",
        },
        2,
        2,
        0,
        id="torchrun-rank-0",
    ),  # fmt: skip
    pytest.param(
        {
            **TORCHRUN,
            "RANK": "3",
            "LOCAL_RANK": "1",
            "GROUP_RANK": "1",
            "WORLD_SIZE": "4",
            "LOCAL_WORLD_SIZE": "2",
        },
        2,
        2,
        3,
        id="torchrun-rank-3",
    ),  # fmt: skip
    pytest.param(
        {
            **TORCHRUN,
            "RANK": "2",
            "LOCAL_RANK": "0",
            "GROUP_RANK": "1",
            "WORLD_SIZE": "4",
            "LOCAL_WORLD_SIZE": "2",
            "NODE_RANK": "0",
        },
        2,
        2,
        2,
        id="torchrun-node-1-local-0",
    ),  # fmt: skip
    pytest.param(
        {
            **SRUN,
            "SLURM_NTASKS": "4",
            "SLURM_PROCID": "0",
            "SLURM_LOCALID": "0",
            "SLURM_NODEID": "0",
            "SLURM_NTASKS_PER_NODE": "2",
            "SLURM_NNODES": "2",
        },
        2,
        2,
        0,
        id="srun-procid-0",
    ),  # fmt: skip
    pytest.param(
        {
            **SRUN,
            "SLURM_NTASKS": "4",
            "SLURM_PROCID": "2",
            "SLURM_LOCALID": "0",
            "SLURM_NODEID": "1",
            "SLURM_NTASKS_PER_NODE": "2",
            "SLURM_NNODES": "2",
        },
        2,
        2,
        2,
        id="srun-procid-2",
    ),  # fmt: skip
    pytest.param(  # the case: an interactive SLURM allocation, Lightning spawns
        {"SLURM_JOB_NAME": "bash", "SLURM_NTASKS": "8", "SLURM_PROCID": "0", "LOCAL_RANK": "3"},
        4,
        1,
        3,
        id="slurm-interactive-lightning-spawns-local-3",
    ),
    pytest.param(
        {"SLURM_JOB_NAME": "interactive", "SLURM_NTASKS": "8", "SLURM_PROCID": "0"},
        2,
        1,
        0,
        id="slurm-interactive-main-process",
    ),
]


@pytest.mark.parametrize(("env", "devices", "nodes", "rank"), MATRIX)
def test_run_dir_is_written_by_fabrics_global_rank_zero_only(
    env: dict[str, str],
    devices: int,
    nodes: int,
    rank: int,
    clean_env: pytest.MonkeyPatch,
    synthetic_shards: Path,
    tmp_path: Path,
) -> None:
    for name, value in env.items():
        clean_env.setenv(name, value)
    _stop_before_the_loop(clean_env)
    sets = [*SMALL, f"trainer.devices={devices}", f"trainer.num_nodes={nodes}"]
    sets += ["trainer.accelerator=cpu", "trainer.strategy=ddp" if devices * nodes > 1 else ""]
    config = load_run_config(TINY, [s for s in sets if s])
    seen: dict[str, int] = {}
    from lightning_fabric import Fabric

    original = Fabric.__init__

    def spy_init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        seen["rank"] = self.global_rank

    clean_env.setattr(Fabric, "__init__", spy_init)
    run_dir = tmp_path / "run"
    with pytest.raises(ReachedRendezvous):
        train(config, synthetic_shards, run_dir)
    assert seen["rank"] == rank  # Fabric's own answer for this launch
    assert (run_dir / "config.yaml").is_file() == (rank == 0)


@pytest.mark.parametrize(
    ("env", "args", "message"),
    [
        (
            {**TORCHRUN, "RANK": "1", "LOCAL_RANK": "1", "GROUP_RANK": "0", "WORLD_SIZE": "2"},
            {"resume": True},
            "no checkpoint",
        ),
        (
            {**TORCHRUN, "RANK": "1", "LOCAL_RANK": "1", "GROUP_RANK": "0", "WORLD_SIZE": "2"},
            {},
            "already holds a run",
        ),
    ],
    ids=["resume-without-checkpoint", "occupied"],
)
def test_run_dir_checks_stop_every_rank_before_rendezvous(
    env, args, message, clean_env, synthetic_shards: Path, tmp_path: Path
) -> None:
    """Rank 1 of a torchrun job raises the user error itself (it used to skip the checks and
    wait for rank 0 in rendezvous until a timeout)."""
    for name, value in env.items():
        clean_env.setenv(name, value)
    _stop_before_the_loop(clean_env)
    config = load_run_config(TINY, [*SMALL, "trainer.devices=2", "trainer.strategy=ddp"])
    run_dir = tmp_path / "run"
    if message == "already holds a run":
        run_dir.mkdir()
        (run_dir / "metrics.csv").write_text("step\n")
    with pytest.raises(GoatDNAError, match=message):
        train(config, synthetic_shards, run_dir, **args)


def test_devices_times_nodes_must_equal_the_launched_world(
    clean_env: pytest.MonkeyPatch, synthetic_shards: Path, tmp_path: Path
) -> None:
    for name, value in {**TORCHRUN, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "4"}.items():
        clean_env.setenv(name, value)
    _stop_before_the_loop(clean_env)
    config = load_run_config(TINY, [*SMALL, "trainer.devices=2", "trainer.num_nodes=1"])
    with pytest.raises(GoatDNAError, match=r"--devices 2 x --num-nodes 1 = 2 processes.*started 4"):
        train(config, synthetic_shards, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_resume_auto_decides_from_the_checkpoint(tmp_path: Path) -> None:
    config = load_run_config(TINY, SMALL)
    resolved = resolved_config(config, "sha")
    run = RunDir(tmp_path / "run")
    fresh = run.check(resolved, resume="auto", force=False)
    assert fresh.checkpoint is None and not fresh.clear  # empty: start
    run.start(resolved, fresh)
    (run.root / "metrics.csv").write_text("step\n")  # killed before its first checkpoint
    again = run.check(resolved, resume="auto", force=False)
    assert again.checkpoint is None and again.clear  # the same run: start it over
    other = resolved_config(load_run_config(TINY, [*SMALL, "optim.lr=0.1"]), "sha")
    with pytest.raises(GoatDNAError, match="different config: optim.lr"):
        run.check(other, resume="auto", force=False)  # someone else's run: refused
    run.checkpoints.mkdir()
    # a complete archive with the keys a resume needs (the damaged-checkpoint check reads it)
    keys = {"state_dict": {}, "optimizer": {}, "scheduler": {}, "loop": {}, "global_step": 3}
    torch.save(keys, run.last_ckpt)
    assert run.check(resolved, resume="auto", force=False).checkpoint == run.last_ckpt
    with pytest.raises(GoatDNAError, match="contradict"):
        run.check(resolved, resume="auto", force=True)


def test_resume_auto_through_the_cli(synthetic_shards: Path, tmp_path: Path) -> None:
    """The same command line twice: first it starts, then it continues from last.ckpt."""
    run_dir = tmp_path / "run"
    sets = [x for item in SMALL for x in ("--set", item)]
    args = ["train", "--config", str(TINY), "--data", str(synthetic_shards), "--out"]
    first = invoke([*args, str(run_dir), *sets, "--max-steps", "2", "--resume", "auto"])  # fmt: skip
    assert first.exit_code == 0, (first.output, first.exception)
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == 2
    second = invoke([*args, str(run_dir), *sets, "--max-steps", "4", "--resume", "auto"])  # fmt: skip
    assert second.exit_code == 0, (second.output, second.exception)
    rows = (run_dir / "metrics.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["1", "2", "3", "4"]  # continued, not restarted
    bad = invoke([*args, str(run_dir), *sets, "--resume", "later"])
    assert bad.exit_code == 2 and "--resume auto" in bad.stderr


def test_progress_bar_is_updated_once_per_optimizer_step_with_floats(
    synthetic_shards: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No tensor reaches the bar (each would cost a host-device sync when it renders): one
    update per optimizer step, whatever the accumulation, numbers as Python floats."""
    updates: list[tuple[int, dict]] = []
    original = StepProgress.update

    def spy(self, step, **numbers):
        updates.append((step, numbers))
        return original(self, step, **numbers)

    monkeypatch.setattr(StepProgress, "update", spy)
    overrides = [*SMALL, "trainer.progress_bar=true", "trainer.accumulate=3", "trainer.log_every=5"]
    config = load_run_config(TINY, overrides)
    config.trainer.max_steps = 2
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    train(config, synthetic_shards, tmp_path / "run")
    assert [step for step, _ in updates] == [1, 2]  # 2 optimizer steps of 3 micro-batches each
    assert all(type(v) is float for _, numbers in updates for v in numbers.values())
    assert "train_loss" in updates[-1][1]  # the last step is always logged


def test_fsdp_strategy_keeps_float32_and_refuses_compile() -> None:
    """bf16-mixed under FSDP: parameters, reductions and buffers stay float32 (autocast does the
    bf16 compute); compile + FSDP is a user error rather than a compile before the wrapping."""
    import torch

    from goatdna.training.trainer import _strategy

    config = load_run_config(TINY, [*SMALL, "trainer.strategy=fsdp"])
    for precision in ("bf16-mixed", "16-mixed", "32-true"):
        mixed = _strategy(config, precision).mixed_precision
        assert mixed.param_dtype == mixed.reduce_dtype == mixed.buffer_dtype == torch.float32
    assert _strategy(config, "bf16-true").mixed_precision is None  # Fabric's true-bf16 path
    config = load_run_config(TINY, [*SMALL, "trainer.strategy=fsdp", "trainer.compile=true"])
    with pytest.raises(GoatDNAError, match="compile.*fsdp"):
        _strategy(config, "bf16-mixed")
