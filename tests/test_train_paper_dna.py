"""`goatdna train --config configs/{goat,rope}-paper-dna.yaml --max-steps 2` on CPU: the genome.py
recipe's own options (GPT-2 block, the authors' GOAT prior R = 2 / M = 8 seeded, a 5-row
embedding, AdamW over every parameter with torch's default betas, no augmentation) train and
validate through the CLI. Only the sizes shrink (one block, short windows, few validation
windows) so it runs in seconds; the options under test are the configs' own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers import invoke

REPO = Path(__file__).resolve().parents[1]
SHRINK = [
    "model.n_layers=1",
    "data.seq_len=64",
    "data.micro_batch_size=2",
    "data.val_max_windows=4",
    "data.val_batch_size=2",
    "data.num_workers=0",
    "data.verify=false",
    "trainer.eval_every=2",
    "trainer.log_every=1",
    "trainer.progress_bar=false",
    "trainer.tensorboard=false",
    "trainer.accelerator=cpu",
]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("scheme", ["goat", "rope"])
def test_paper_dna_config_trains_two_steps(scheme: str, synthetic_shards: Path, tmp_path: Path):
    run = tmp_path / "run"
    sets = [x for item in SHRINK for x in ("--set", item)]
    result = invoke(
        ["train", "--config", str(REPO / "configs" / f"{scheme}-paper-dna.yaml"), *sets,
         "--max-steps", "2", "--data", str(synthetic_shards), "--out", str(run)],
    )  # fmt: skip
    assert result.exit_code == 0, (result.output, result.exception)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 2
    assert 0.0 < summary["val_loss"] < 5.0  # finite nats per base after two updates
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    state = ckpt["state_dict"]
    assert state["model.embed.weight"].shape == (5, 512)  # genome.py's 5-row embedding
    config = ckpt["hyper_parameters"]["config"]
    assert config["optim"]["decay_all"] is True and config["data"]["rc_prob"] == 0.0
    assert tuple(config["optim"]["betas"]) == (0.9, 0.999)
    if scheme == "goat":
        assert state["model.blocks.0.attn.prior.alpha"].shape == (8, 2)  # R = 2 per head
        assert config["model"]["goat_init"] == "seeded"
