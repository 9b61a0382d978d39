"""FSDP, as `goatdna train --strategy fsdp` configures it, takes the same step as DDP (CPU, gloo).

Fabric refuses FSDP on a CPU accelerator, so this test runs the closest thing that CPUs allow:
torch's FullyShardedDataParallel built from the very `FSDPStrategy` that
`goatdna.training.trainer._strategy` returns (sharding, mixed precision; one unit per `Block`,
`use_orig_params`, as it is configured), wrapped around `GenomeLM` as Fabric wraps it, against
DistributedDataParallel; two gloo ranks, one optimizer step under bf16 autocast (as bf16-mixed
runs it on a GPU), with the real optimizer (`build_optimizer`) and clipping. Fabric's default
FSDP mixed precision for bf16-mixed (bf16 parameters and reductions) is run too, to show that
the test can tell the difference.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
OVERRIDES = [
    "model.n_layers=2",
    "model.d_model=64",
    "model.n_heads=2",
    "model.mlp_hidden=96",
    "model.goat_modes=4",
    "model.train_length=32",
    "data.seq_len=32",
    "optim.lr=0.01",
    "optim.warmup_steps=0",
    "optim.weight_decay=0.5",  # large, so a parameter put in the wrong decay group shows
    "trainer.strategy=fsdp",
]


def _rank(rank: int, world: int, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    from lightning_fabric.plugins.precision.fsdp import FSDPPrecision
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    from torch.nn.parallel import DistributedDataParallel as DDP

    from goatdna.model.transformer import Block
    from goatdna.training import load_run_config
    from goatdna.training.module import GenomeLM, build_optimizer, clean_param_name
    from goatdna.training.trainer import _strategy

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    config = load_run_config(REPO / "configs" / "goat-tiny.yaml", OVERRIDES)
    strategy = _strategy(config, "bf16-mixed")
    gen = torch.Generator().manual_seed(100 + rank)  # each rank its own batch
    tokens = torch.randint(0, 4, (3, config.data.seq_len + 1), generator=gen)

    def module() -> GenomeLM:
        torch.manual_seed(0)
        lm = GenomeLM(config.model)
        with torch.no_grad():  # switch every prior term on
            for block in lm.model.blocks:
                for p in block.attn.prior.parameters():
                    p.normal_(0, 0.3)
        return lm

    def step(wrapped, lm: GenomeLM, clip) -> tuple[float, float]:
        # built after wrapping, as in the training loop
        optimizer = build_optimizer(lm.model, config.optim, 1, False, lm.param_ndims)[0]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = wrapped(tokens)  # GenomeLM's forward: the next-base loss
        loss.backward()
        norm = clip()
        optimizer.step()
        return float(loss.detach()), float(norm)

    ddp_lm = module()
    ddp = DDP(ddp_lm)
    ddp_loss, ddp_norm = step(
        ddp, ddp_lm, lambda: torch.nn.utils.clip_grad_norm_(ddp.parameters(), 1.0)
    )
    reference = {n: p.detach().clone() for n, p in ddp_lm.model.named_parameters()}

    results = {}
    lightning_default = FSDPPrecision("bf16-mixed").mixed_precision_config
    for label, mixed in (("goatdna", strategy.mixed_precision), ("lightning", lightning_default)):
        lm = module()
        fsdp = FSDP(
            lm,
            sharding_strategy=strategy.sharding_strategy,
            mixed_precision=mixed,
            device_id=torch.device("cpu"),  # FSDP on CPU needs the device named
            auto_wrap_policy=ModuleWrapPolicy({Block}),
            use_orig_params=True,
        )
        loss, norm = step(fsdp, lm, lambda fsdp=fsdp: fsdp.clip_grad_norm_(1.0))
        with FSDP.summon_full_params(fsdp):
            diff = max(
                float((p.detach() - reference[clean_param_name(n)]).abs().max())
                for n, p in lm.model.named_parameters()
            )
        results[label] = {
            "max_param_diff": diff,
            "loss_diff": abs(loss - ddp_loss),
            "grad_norm_rel_diff": abs(norm - ddp_norm) / ddp_norm,
        }
    results["mixed_precision"] = str(strategy.mixed_precision)
    if rank == 0:
        Path(out).write_text(json.dumps(results))
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_fsdp_step_equals_ddp_step_on_cpu_gloo(tmp_path: Path) -> None:
    out = tmp_path / "fsdp_vs_ddp.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, __file__, str(_free_port()), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())
    assert "param_dtype=torch.float32" in results["mixed_precision"]
    assert "reduce_dtype=torch.float32" in results["mixed_precision"]
    ours = results["goatdna"]
    # float32 parameters and reductions: the same step as DDP up to summation order
    assert ours["loss_diff"] < 1e-6, results
    assert ours["grad_norm_rel_diff"] < 1e-5, results
    assert ours["max_param_diff"] < 1e-6, results
    # bf16 parameters and reductions (Fabric's default) do not match: the test can tell
    theirs = results["lightning"]
    assert theirs["max_param_diff"] > 1e-3 and theirs["grad_norm_rel_diff"] > 1e-5, results


if __name__ == "__main__":
    import torch.multiprocessing as mp

    mp.start_processes(
        _rank, args=(2, int(sys.argv[1]), sys.argv[2]), nprocs=2, start_method="spawn"
    )
