"""LR schedule, weight-decay groups, and the peak-FLOPs table (no training here)."""

from __future__ import annotations

import math

import pytest

from goatdna.model import DNADecoder, ModelConfig
from goatdna.training.config import OptimConfig
from goatdna.training.module import build_optimizer, lr_multiplier, parameter_groups
from goatdna.training.throughput import ThroughputMonitor, gpu_peak_flops


def test_warmup_then_cosine_to_the_floor() -> None:
    f = [lr_multiplier(s, warmup=10, total=110, floor=0.1) for s in range(120)]
    assert f[0] == pytest.approx(0.1) and f[9] == pytest.approx(1.0)
    assert all(b > a for a, b in zip(f[:10], f[1:10], strict=False))  # linear warmup rises
    assert f[10] == pytest.approx(1.0)
    assert f[60] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert all(b <= a + 1e-12 for a, b in zip(f[10:110], f[11:110], strict=False))
    assert f[110] == pytest.approx(0.1) and f[119] == pytest.approx(0.1)  # stays on the floor


def test_scheduler_drives_the_optimizer_lr() -> None:
    model = DNADecoder(ModelConfig(n_layers=1, d_model=64, n_heads=2, mlp_hidden=64, goat_modes=4))
    opt, sched = build_optimizer(model, OptimConfig(lr=1e-3, warmup_steps=4), 20, on_cuda=False)
    lrs = []
    for _ in range(6):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[:4] == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3])
    assert opt.defaults["betas"] == (0.9, 0.95)
    assert not opt.defaults["fused"]


@pytest.mark.parametrize("positional", ["goat", "rope"])
def test_weight_decay_hits_matrices_only(positional: str) -> None:
    config = ModelConfig(
        positional=positional, n_layers=2, d_model=64, n_heads=2, mlp_hidden=64, goat_modes=4
    )
    model = DNADecoder(config)
    decay, no_decay = parameter_groups(model, 0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    kept = {names[id(p)] for p in no_decay["params"]}
    assert decayed | kept == set(names.values()) and not decayed & kept
    assert "embed.weight" in kept and "head.weight" in decayed
    assert all("norm" in n or ".prior." in n or n == "embed.weight" for n in kept)
    assert all(model.get_parameter(n).ndim == 2 and ".prior." not in n for n in decayed)
    assert any(".attn.q_proj." in n for n in decayed) and any(
        ".mlp.down_proj." in n for n in decayed
    )
    if positional == "goat":
        prior = {n for n in names.values() if ".prior." in n}
        assert prior and prior <= kept  # alpha, beta, slope, sink and the prior MLP


@pytest.mark.parametrize("prior_lr_scale", [1.0, 2.0])
def test_decay_all_decays_every_parameter(prior_lr_scale: float) -> None:
    """optim.decay_all: genome.py's ``AdamW(model.parameters(), weight_decay=0.1)``, norms,
    biases, embeddings and the GOAT prior included (a scaled prior LR keeps its decay)."""
    config = ModelConfig(
        n_layers=1, d_model=64, n_heads=2, mlp_hidden=64, goat_modes=4, block_style="gpt2",
        attention_bias=True,
    )  # fmt: skip
    model = DNADecoder(config)
    optim = OptimConfig(weight_decay=0.1, decay_all=True, prior_lr_scale=prior_lr_scale)
    opt, _ = build_optimizer(model, optim, 10, on_cuda=False)
    decayed = {id(p) for g in opt.param_groups if g["weight_decay"] == 0.1 for p in g["params"]}
    assert decayed == {id(p) for p in model.parameters()}
    assert len(opt.param_groups) == (2 if prior_lr_scale == 1.0 else 3)
    assert not opt.param_groups[1]["params"]  # the no-decay group stays, empty
    if prior_lr_scale != 1.0:
        prior = {id(p) for n, p in model.named_parameters() if ".prior." in n}
        assert {id(p) for p in opt.param_groups[2]["params"]} == prior
        assert opt.param_groups[2]["initial_lr"] == pytest.approx(optim.lr * 2.0)


def test_peak_flops_table_is_dense_and_specific() -> None:
    assert gpu_peak_flops("NVIDIA H100 80GB HBM3", "bf16-mixed") == pytest.approx(989.4e12)
    assert gpu_peak_flops("NVIDIA H100 PCIe", "bf16-mixed") == pytest.approx(756e12)
    assert gpu_peak_flops("NVIDIA H200", "bf16-mixed") == pytest.approx(989.4e12)
    assert gpu_peak_flops("NVIDIA A100-SXM4-80GB", "32-true") == pytest.approx(156e12)
    assert gpu_peak_flops("NVIDIA L40S", "bf16-mixed") == pytest.approx(362e12)
    assert gpu_peak_flops("NVIDIA L4", "bf16-mixed") == pytest.approx(121e12)
    assert gpu_peak_flops("NVIDIA A10G", "bf16-mixed") == pytest.approx(125e12)
    assert gpu_peak_flops("NVIDIA GeForce RTX 4090", "bf16-mixed") == pytest.approx(165.2e12)
    assert gpu_peak_flops("Some Future GPU", "bf16-mixed") is None


def test_throughput_average_skips_warmup() -> None:
    times = iter([0.0, 1.0, 1.5, 2.5, 3.0])  # step 1 slow (compile), then 0.5 s and 1.0 s steps
    monitor = ThroughputMonitor(
        tokens_per_step=100, flops_per_token=10.0, warmup_steps=2, clock=lambda: next(times)
    )
    monitor.set_peak(1000.0, world_size=2, source="test")
    monitor.start(0)
    for step in (1, 2, 3, 4):
        monitor.step_done(step)
    # steps 3 and 4 (after 2 warm-up steps): 200 tokens in 1.5 s
    assert monitor.tokens_per_s == pytest.approx(200 / 1.5)
    assert monitor.mfu == pytest.approx((200 / 1.5) * 10.0 / 2000.0)
    assert monitor.take_interval_rate() == pytest.approx(400 / 3.0)


def test_prior_lr_scale_gives_the_prior_its_own_scaled_group() -> None:
    config = ModelConfig(n_layers=2, d_model=64, n_heads=2, mlp_hidden=64, goat_modes=4)
    model = DNADecoder(config)
    names = {id(p): n for n, p in model.named_parameters()}
    opt, sched = build_optimizer(
        model, OptimConfig(lr=1e-3, warmup_steps=4, prior_lr_scale=10.0), 20, on_cuda=False
    )
    decay, no_decay, prior = opt.param_groups
    assert {names[id(p)] for p in prior["params"]} == {n for n in names.values() if ".prior." in n}
    assert not any(".prior." in names[id(p)] for p in decay["params"] + no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) + len(prior["params"]) == len(names)
    assert prior["weight_decay"] == 0.0 and no_decay["params"]  # norms and embedding stay
    lrs = []
    for _ in range(5):
        lrs.append([g["lr"] for g in opt.param_groups])
        opt.step()
        sched.step()
    # the schedule scales every group; the prior's LR stays 10x the weights' at every step
    assert [lr[2] for lr in lrs] == pytest.approx([10 * lr[0] for lr in lrs])
    assert lrs[3] == pytest.approx([1e-3, 1e-3, 1e-2])
    # scale 1 (the default) keeps the two groups that existing optimizer states were saved with
    opt, _ = build_optimizer(model, OptimConfig(lr=1e-3), 20, on_cuda=False)
    assert len(opt.param_groups) == 2
    rope = DNADecoder(ModelConfig(positional="rope", n_layers=1, d_model=64, n_heads=2))
    opt, _ = build_optimizer(rope, OptimConfig(prior_lr_scale=10.0), 20, on_cuda=False)
    assert len(opt.param_groups) == 2  # no prior: nothing to scale
    with pytest.raises(ValueError, match="prior_lr_scale"):
        OptimConfig(prior_lr_scale=0.0)
