"""Shared fixtures. Real-genome tests read ../shared/data (CI has it; a user's clone may not)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
CHR20_SAMPLE = SHARED_DATA / "grch37_chr20_1000001-2000000.fa.gz"


@pytest.fixture(scope="session")
def chr20_sample() -> Path:
    """1 Mbp of real human chr20 (GRCh37), gzipped; skipped where ../shared is absent.

    CI sets GOATDNA_REQUIRE_SHARED=1, which turns the skip into a failure.
    """
    if not CHR20_SAMPLE.is_file():
        reason = f"real-genome sample not found at {CHR20_SAMPLE} (only CI and developers have ../shared)"
        if os.environ.get("GOATDNA_REQUIRE_SHARED") == "1":
            pytest.fail(reason + "; GOATDNA_REQUIRE_SHARED=1 makes it mandatory")
        pytest.skip(reason)
    return CHR20_SAMPLE


@pytest.fixture(autouse=True, scope="session")
def _limit_threads() -> None:
    """Keep torch from oversubscribing the 2 CI cores when it is imported by a test."""
    os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One torch thread for the test: tiny models gain nothing from two threads and lose ~10x on
    a busy 2-core machine, and a result compared byte for byte with an ``OMP_NUM_THREADS=1``
    subprocess must be computed with the same thread count (reductions split differently)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


SYNTHETIC_TEST_LENGTH = 1_500_000


@pytest.fixture(scope="session")
def synthetic_shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1.5 Mbp synthetic genome (4 contigs, seed 0) prepared once; returns the shard directory.

    Splits: the last 5% (val) and 5% (test) of each contig. Prepares in about a second.
    """
    from goatdna.data_prep import PrepareOptions, SyntheticGenomeConfig, prepare_synthetic

    out = tmp_path_factory.mktemp("synthetic_shards")
    config = SyntheticGenomeConfig(total_length=SYNTHETIC_TEST_LENGTH, n_contigs=4, seed=0)
    prepare_synthetic(out, config, PrepareOptions(workers=1, progress=False))
    return out


TINY_RUN_OVERRIDES = [
    # A shrunk tiny decoder: ~0.1 M parameters, 128-base context, trains in seconds on CPU.
    "model.n_layers=2",
    "model.d_model=64",
    "model.n_heads=2",
    "model.mlp_hidden=176",
    "model.goat_modes=4",
    "model.train_length=128",
    "data.seq_len=128",
    "data.micro_batch_size=16",
    "data.val_max_windows=64",
    "optim.warmup_steps=10",
    "trainer.max_steps=100",
    "trainer.eval_every=25",
    "trainer.ckpt_every=50",
    "trainer.log_every=5",
    "trainer.progress_bar=false",
]


@pytest.fixture(scope="session")
def tiny_runs(synthetic_shards: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny GOAT and RoPE runs trained once on `synthetic_shards`: {"goat": run_dir, "rope": ...}.

    Each run directory is complete (config.yaml, checkpoints/{last,best}.ckpt, metrics.csv,
    summary.json); treat them as read-only, they are shared by every test that asks.
    """
    import torch

    from goatdna.training import load_run_config, train

    runs = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matmuls gain little from 2 threads, and lose ~10x when busy
    try:
        for scheme in ("goat", "rope"):
            overrides = TINY_RUN_OVERRIDES
            config = load_run_config(REPO_ROOT / "configs" / f"{scheme}-tiny.yaml", overrides)
            runs[scheme] = tmp_path_factory.mktemp(f"tiny_{scheme}") / "run"
            train(config, synthetic_shards, runs[scheme])
    finally:
        torch.set_num_threads(threads)
    return runs


KGP_VCF = SHARED_DATA / "1kgp3_chr20_1000001-2000000.sites.vcf.gz"


@pytest.fixture(scope="session")
def chr20_reference(chr20_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A FASTA whose contig `20` is 1,000,000 N + the 1 Mbp sample: GRCh37 chr20 coordinates.

    The 1000 Genomes sites VCF (`kgp_vcf`) then needs no shifting (its README's recipe).
    """
    import gzip

    with gzip.open(chr20_sample, "rt") as handle:
        piece = "".join(line.strip() for line in handle if not line.startswith(">"))
    path = tmp_path_factory.mktemp("chr20_reference") / "grch37_chr20_2mb.fa"
    sequence = "N" * 1_000_000 + piece
    lines = [sequence[i : i + 60] for i in range(0, len(sequence), 60)]
    path.write_text(">20\n" + "\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="session")
def kgp_vcf(chr20_sample: Path) -> Path:
    """The 1000 Genomes phase 3 sites VCF over chr20:1,000,001-2,000,000 (+ .tbi)."""
    if not KGP_VCF.is_file():
        pytest.fail(f"{KGP_VCF} is missing although {chr20_sample} is there")
    return KGP_VCF


@pytest.fixture(scope="module")
def backbone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A seeded tiny language-model checkpoint with a 64-base context (one per test module):
    the input of export, finetune, embed and predict tests that need no trained weights."""
    import torch
    from helpers import tiny_config

    from goatdna.checkpoint import save_checkpoint
    from goatdna.configfile import to_dict
    from goatdna.model import DNADecoder

    config = tiny_config(train_length=64)
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("backbone") / "lm.ckpt"
    return save_checkpoint(path, DNADecoder(config), {"model": to_dict(config)})
