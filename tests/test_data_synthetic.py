"""The embedded synthetic genome: deterministic, and structured like real DNA (learnable)."""

from __future__ import annotations

import numpy as np
import pytest

from goatdna.data_prep import ShardedGenome, SyntheticGenomeConfig
from goatdna.data_prep.markov import markov_bits_per_base
from goatdna.data_prep.synthetic import synthetic_fasta_bytes
from goatdna.errors import GoatDNAError


@pytest.fixture(scope="module")
def genome(synthetic_shards) -> ShardedGenome:
    return ShardedGenome(synthetic_shards)


@pytest.fixture(scope="module")
def train(genome) -> np.ndarray:
    return np.asarray(genome.tokens("train"))


def test_deterministic_for_a_seed():
    small = SyntheticGenomeConfig(total_length=120_000, n_contigs=3, seed=7)
    first = synthetic_fasta_bytes(small)
    assert first == synthetic_fasta_bytes(
        SyntheticGenomeConfig(total_length=120_000, n_contigs=3, seed=7)
    )
    assert first != synthetic_fasta_bytes(
        SyntheticGenomeConfig(total_length=120_000, n_contigs=3, seed=8)
    )
    headers = [line for line in first.split(b"\n") if line.startswith(b">")]
    assert [h.split()[0] for h in headers] == [b">syn1", b">syn2", b">syn3"]
    assert sum(len(line) for line in first.split(b"\n") if not line.startswith(b">")) == 120_000


def test_config_is_validated():
    with pytest.raises(GoatDNAError, match="10,000 bases per contig"):
        synthetic_fasta_bytes(SyntheticGenomeConfig(total_length=5_000, n_contigs=1))


def test_several_contigs_and_splits(genome):
    names = {r.name for r in genome.records()}
    assert names == {"syn1", "syn2", "syn3", "syn4"}
    assert genome.manifest["split_mode"] == "tail-fraction"


def test_gc_isochores(train):
    """Windowed GC varies far more than binomial noise would allow for one composition."""
    plain = train & 0x7F
    window = 20_000
    n = plain.size // window
    blocks = plain[: n * window].reshape(n, window)
    acgt = (blocks < 4).sum(axis=1)
    gc = np.isin(blocks, [1, 2]).sum(axis=1) / np.maximum(acgt, 1)
    noise = np.sqrt(0.45 * 0.55 / window)  # ~0.0035
    assert gc.std() > 5 * noise
    assert gc.max() - gc.min() > 0.06


def test_cpg_depletion(train):
    plain = train & 0x7F
    freq = np.bincount(plain, minlength=5) / plain.size
    cpg = np.mean((plain[:-1] == 1) & (plain[1:] == 2))
    assert cpg / (freq[1] * freq[2]) < 0.5  # human ~0.2; an unconstrained sequence ~1.0


def test_soft_masked_repeats_are_mutated_copies(train):
    masked = train >= 0x80
    assert 0.25 < masked.mean() < 0.5
    plain = (train & 0x7F).astype(np.int64)
    k = 14
    codes = np.zeros(plain.size - k + 1, dtype=np.int64)
    for j in range(k):
        codes = codes * 5 + plain[j : j + codes.size]
    in_repeat = masked[: codes.size] & masked[k - 1 :]
    in_background = ~masked[: codes.size] & ~masked[k - 1 :] & (plain[: codes.size] < 4)

    def recurring(sel):
        uniq, counts = np.unique(codes[sel], return_counts=True)
        return counts[counts > 1].sum() / sel.sum()

    # repeat k-mers recur across copies; background k-mers almost never do
    assert recurring(in_repeat) > 0.3
    assert recurring(in_background) < 0.02
    # but copies are mutated: the commonest repeat 14-mer is far rarer than the copy count
    _, counts = np.unique(codes[in_repeat], return_counts=True)
    assert counts.max() < in_repeat.sum() / 100


def test_tandem_repeats_and_n_gaps(train):
    plain = train & 0x7F
    run = 30
    found = 0
    for period in range(1, 7):
        same = plain[:-period] == plain[period:]
        # positions starting `run` consecutive matches at this period
        csum = np.concatenate([[0], np.cumsum(same)])
        found += int(np.sum(csum[run:] - csum[:-run] == run))
    assert found > 500
    n = plain == 4
    assert n.any() and not (n & (train >= 0x80)).any()  # gaps are uppercase N
    edges = np.flatnonzero(np.diff(n.astype(np.int8)) != 0)
    assert edges.size >= 2 and np.diff(edges)[::2].max() >= 100  # runs, not scattered Ns


def test_six_mer_markov_learns_it_but_not_random(genome, train):
    val = np.asarray(genome.tokens("val"))
    synthetic_bits = markov_bits_per_base(train, val, order=6)
    rng = np.random.default_rng(0)
    random_train = rng.integers(0, 4, train.size, dtype=np.uint8)
    random_val = rng.integers(0, 4, val.size, dtype=np.uint8)
    random_bits = markov_bits_per_base(random_train, random_val, order=6)
    assert synthetic_bits < 1.95, synthetic_bits
    assert random_bits > 1.99, random_bits
    assert random_bits - synthetic_bits > 0.05
