"""Window index, validation tiling and per-step sampling (numpy only; no Lightning here)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from goatdna.data_prep import COMPLEMENT, ShardedGenome
from goatdna.data_prep.heldout import heldout_window_starts
from goatdna.errors import GoatDNAError
from goatdna.training.config import DataConfig
from goatdna.training.windows import (
    WindowSampler,
    build_weighted_index,
    build_window_index,
    max_n_for,
    plan_windows,
    read_windows,
)


def _random_split(seed: int, length: int, n_rate: float) -> np.ndarray:
    """Raw shard bytes: random bases, some soft-masked, N runs and isolated Ns."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, 4, length).astype(np.uint8)
    tokens[rng.random(length) < n_rate] = 4
    for start in rng.integers(0, length - 30, 3):
        tokens[start : start + int(rng.integers(5, 30))] = 4  # gaps
    tokens[rng.random(length) < 0.3] |= 0x80  # repeat flag must not hide an N
    return tokens


def _brute_force_starts(tokens, records, window, max_n) -> np.ndarray:
    is_n = (tokens & 0x7F) == 4
    out = []
    for offset, length in records:
        for s in range(offset, offset + length - window + 1):
            if is_n[s : s + window].sum() <= max_n:
                out.append(s)
    return np.asarray(out, dtype=np.int64)


@pytest.mark.parametrize("max_n", [0, 2])
@pytest.mark.parametrize("chunk", [7, 1 << 20])
def test_index_matches_brute_force(max_n: int, chunk: int) -> None:
    tokens = _random_split(seed=max_n + chunk, length=900, n_rate=0.01)
    records = [(0, 300), (300, 5), (305, 395), (700, 200)]  # one record shorter than a window
    window = 9
    index = build_window_index(tokens, records, window, max_n, chunk=chunk)
    expected = _brute_force_starts(tokens, records, window, max_n)
    np.testing.assert_array_equal(index.all_starts(), expected)
    assert index.total == expected.size
    # intervals are maximal runs: no two of them continue each other
    assert not np.any(index.starts[1:] == index.starts[:-1] + index.counts[:-1])


def test_windows_never_cross_a_record_boundary() -> None:
    tokens = np.zeros(100, dtype=np.uint8)  # no N at all
    index = build_window_index(tokens, [(0, 40), (40, 60)], window=30)
    starts = index.all_starts()
    assert set(starts) == set(range(0, 11)) | set(range(40, 71))


def test_max_n_fraction_rounds_down() -> None:
    assert max_n_for(1025, 0.0) == 0
    assert max_n_for(100, 0.05) == 5
    assert max_n_for(101, 0.05) == 5


def test_heldout_windows_tile_each_record_and_cap_evenly() -> None:
    records = [(0, 10), (10, 3), (13, 21)]
    starts = heldout_window_starts(records, 4)
    assert starts.tolist() == [0, 4, 13, 17, 21, 25, 29]  # stride L, L+1 bases inside a record
    predicted = sorted({s + k for s in starts.tolist() for k in range(1, 5)})
    assert len(predicted) == 4 * starts.size  # every target scored once
    capped = heldout_window_starts(records, 4, max_windows=3)
    assert capped.tolist() == [0, 17, 29]  # evenly spaced: spans the split
    assert heldout_window_starts(records, 40).size == 0


def _sampler(world_size: int = 1, seed: int = 7) -> WindowSampler:
    tokens = _random_split(seed=1, length=20_000, n_rate=0.001)
    index = build_window_index(tokens, [(0, 12_000), (12_000, 8_000)], window=65)
    return WindowSampler(index, seed=seed, batch_size=8, world_size=world_size, rc_prob=0.5)


def test_sampling_is_a_pure_function_of_seed_step_rank() -> None:
    a, b = _sampler(world_size=2), _sampler(world_size=2)
    for step in (0, 1, 17, 10_000):
        for rank in (0, 1):
            sa, fa = a.draw(step, rank)
            sb, fb = b.draw(step, rank)
            np.testing.assert_array_equal(sa, sb)
            np.testing.assert_array_equal(fa, fb)
    # out of order (as after a resume) gives the same batches
    later_first = [a.draw(s, 0)[0] for s in (5, 4, 3)]
    in_order = [b.draw(s, 0)[0] for s in (3, 4, 5)]
    for x, y in zip(later_first[::-1], in_order, strict=True):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.draw(0, 0)[0], a.draw(1, 0)[0])
    assert not np.array_equal(a.draw(0, 0)[0], _sampler(world_size=2, seed=8).draw(0, 0)[0])


def test_ranks_draw_disjoint_windows() -> None:
    sampler = _sampler(world_size=4)
    valid = set(sampler.index.all_starts().tolist())
    for step in range(20):
        per_rank = [set(sampler.draw(step, r)[0].tolist()) for r in range(4)]
        assert all(len(s) == 8 for s in per_rank)  # no repeats within a rank either
        assert len(set().union(*per_rank)) == 32  # and none shared between ranks
        assert set().union(*per_rank) <= valid
    with pytest.raises(ValueError):
        sampler.draw(0, 4)


def test_reverse_complement_rate_and_mapping() -> None:
    sampler = _sampler()
    flips = np.concatenate([sampler.draw(s, 0)[1] for s in range(200)])
    assert 0.4 < flips.mean() < 0.6
    tokens = np.array([0, 1, 2, 3, 4, 0x80 | 0, 0x80 | 2, 1], dtype=np.uint8)
    ids, rep = read_windows(tokens, np.array([0, 0]), 8, np.array([False, True]))
    np.testing.assert_array_equal(ids[0], [0, 1, 2, 3, 4, 0, 2, 1])
    np.testing.assert_array_equal(ids[1], COMPLEMENT[ids[0][::-1]])
    np.testing.assert_array_equal(ids[1], [2, 1, 3, 4, 0, 1, 2, 3])
    np.testing.assert_array_equal(rep[1], rep[0][::-1])
    assert rep[0].tolist() == [False] * 5 + [True, True, False]


def test_plan_windows_on_synthetic_shards(synthetic_shards: Path) -> None:
    genome = ShardedGenome(synthetic_shards)
    plan = plan_windows(genome, DataConfig(seq_len=128, val_max_windows=50))
    assert plan.manifest_sha256 == genome.manifest_sha256
    assert plan.val_starts.size == 50
    records = [(r.offset, r.length) for r in genome.records("val")]
    np.testing.assert_array_equal(plan.val_starts, heldout_window_starts(records, 128, 50))
    records = genome.records("train")
    starts = plan.train_index.start_of_rank(np.array([0, plan.train_index.total - 1]))
    assert any(r.offset <= starts[0] and starts[0] + 129 <= r.offset + r.length for r in records)
    assert any(r.offset <= starts[1] and starts[1] + 129 <= r.offset + r.length for r in records)


def test_seq_len_longer_than_every_record_is_a_clear_error(synthetic_shards: Path) -> None:
    genome = ShardedGenome(synthetic_shards)
    longest = max(r.length for r in genome.records("train"))
    with pytest.raises(GoatDNAError, match="no train window of seq_len \\+ 1") as err:
        plan_windows(genome, DataConfig(seq_len=longest))
    assert "longest train record" in str(err.value)


def test_unweighted_draws_are_a_uniform_choice_over_every_valid_start() -> None:
    """Without source weights the stream is exactly one rng.choice over all starts per step."""
    sampler = _sampler(world_size=2, seed=9)
    for step in (0, 3):
        rng = np.random.Generator(
            np.random.Philox(np.random.SeedSequence(entropy=9, spawn_key=(step,)))
        )
        ranks = rng.choice(sampler.index.total, size=16, replace=False)
        starts = sampler.index.start_of_rank(ranks)
        np.testing.assert_array_equal(sampler.draw(step, 1)[0], starts[8:])


def _weighted_sampler(weights: dict[str, float], world_size: int = 2) -> WindowSampler:
    tokens = _random_split(seed=2, length=30_000, n_rate=0.001)
    records = {"big": [(0, 20_000), (20_000, 6_000)], "small": [(26_000, 4_000)]}
    index = build_weighted_index(tokens, records, window=65, max_n=0, weights=weights)
    return WindowSampler(index, seed=5, batch_size=8, world_size=world_size)


def test_source_weights_are_respected_within_binomial_error() -> None:
    # "small" holds ~13% of the windows but is asked for 70% of the draws
    sampler = _weighted_sampler({"big": 0.3, "small": 0.7})
    steps = 1500
    starts = np.concatenate([sampler.draw(s, r)[0] for s in range(steps) for r in range(2)])
    n = starts.size
    from_small = int(np.count_nonzero(starts >= 26_000))
    sigma = np.sqrt(n * 0.7 * 0.3)
    assert abs(from_small - 0.7 * n) < 4 * sigma, (from_small, n)
    assert abs(np.count_nonzero(starts < 26_000) - 0.3 * n) < 4 * sigma
    valid = set(sampler.index.all_starts().tolist())
    assert set(starts.tolist()) <= valid  # every draw is a valid window of its source
    index = sampler.index
    assert index.groups == ("big", "small") and index.group_probs.tolist() == [0.3, 0.7]


def test_weighted_draws_are_deterministic_and_disjoint_across_ranks() -> None:
    a = _weighted_sampler({"big": 1.0, "small": 3.0})
    b = _weighted_sampler({"big": 1.0, "small": 3.0})
    for step in (0, 1, 999):
        for rank in (0, 1):
            np.testing.assert_array_equal(a.draw(step, rank)[0], b.draw(step, rank)[0])
            np.testing.assert_array_equal(a.draw(step, rank)[1], b.draw(step, rank)[1])
        both = np.concatenate([a.draw(step, 0)[0], a.draw(step, 1)[0]])
        assert np.unique(both).size == 16  # no window shared within a step
    assert not np.array_equal(a.draw(0, 0)[0], a.draw(1, 0)[0])


@pytest.fixture(scope="module")
def two_source_shards(tmp_path_factory) -> Path:
    from goatdna.data_prep import PrepareOptions, SyntheticGenomeConfig, prepare_genome
    from goatdna.data_prep.synthetic import write_synthetic_fasta

    root = tmp_path_factory.mktemp("two_sources")
    human = write_synthetic_fasta(
        root / "h.fa", SyntheticGenomeConfig(total_length=60_000, n_contigs=3, seed=1)
    )
    mouse = write_synthetic_fasta(
        root / "m.fa", SyntheticGenomeConfig(total_length=20_000, n_contigs=2, seed=2)
    )
    options = PrepareOptions(workers=1, progress=False, source_names=["human", "mouse"])
    prepare_genome([human, mouse], root / "out", options)
    return root / "out"


def test_plan_windows_weights_the_sources_of_a_multi_source_dataset(two_source_shards) -> None:
    genome = ShardedGenome(two_source_shards)
    plain = plan_windows(genome, DataConfig(seq_len=64, val_max_windows=10))
    assert plain.train_index.group_probs is None  # today's draw: proportional to windows
    config = DataConfig(seq_len=64, val_max_windows=10, source_weights={"human": 1, "mouse": 1})
    weighted = plan_windows(genome, config).train_index
    assert weighted.groups == ("human", "mouse") and weighted.total == plain.train_index.total
    mouse = {r.offset for r in genome.records("train") if r.source == "mouse"}
    first_mouse = min(mouse)
    sampler = WindowSampler(weighted, seed=1, batch_size=16)
    starts = np.concatenate([sampler.draw(s, 0)[0] for s in range(300)])
    share = np.count_nonzero(starts >= first_mouse) / starts.size
    assert abs(share - 0.5) < 4 * np.sqrt(0.25 / starts.size)
    only_human = DataConfig(seq_len=64, source_weights={"human": 1.0, "mouse": 0})
    index = plan_windows(genome, only_human).train_index
    assert index.groups == ("human",) and index.all_starts().max() < first_mouse


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"human": 1.0, "rat": 1.0}, "unknown source 'rat'"),
        ({"human": 1.0}, "no weight to source 'mouse'"),
    ],
)
def test_source_weights_must_name_the_data_sources(two_source_shards, weights, message) -> None:
    genome = ShardedGenome(two_source_shards)
    with pytest.raises(GoatDNAError, match=message):
        plan_windows(genome, DataConfig(seq_len=64, source_weights=weights))


def test_a_weighted_source_without_windows_is_a_clear_error(two_source_shards) -> None:
    genome = ShardedGenome(two_source_shards)
    longest_mouse = max(r.length for r in genome.records("train") if r.source == "mouse")
    config = DataConfig(seq_len=longest_mouse, source_weights={"human": 1.0, "mouse": 1.0})
    with pytest.raises(GoatDNAError, match="source 'mouse' has weight 1.0"):
        plan_windows(genome, config)


def test_single_source_data_has_one_source_named_after_its_fasta(synthetic_shards) -> None:
    genome = ShardedGenome(synthetic_shards)
    config = DataConfig(seq_len=128, source_weights={"synthetic": 1.0})
    assert plan_windows(genome, config).train_index.groups == ("synthetic",)


@pytest.mark.parametrize(
    "weights", [{"a": -1.0}, {"a": 0.0}, {"a": True}, {"a": float("nan")}, {"": 1.0}]
)
def test_bad_source_weights_are_config_errors(weights) -> None:
    from goatdna.configfile import ConfigKeyError
    from goatdna.training.config import run_config_from_dict

    with pytest.raises(ConfigKeyError, match="source_weights"):
        run_config_from_dict({"data": {"source_weights": weights}})


def test_source_weights_from_set_overrides() -> None:
    from goatdna.configfile import apply_overrides
    from goatdna.training.config import run_config_from_dict

    raw = apply_overrides({}, ["data.source_weights.human=0.7", "data.source_weights.mouse=0.3"])
    assert run_config_from_dict(raw).data.source_weights == {"human": 0.7, "mouse": 0.3}
    raw = apply_overrides({}, ["data.source_weights={human: 2, mouse: 1}"])
    assert run_config_from_dict(raw).data.source_weights == {"human": 2, "mouse": 1}
