"""GC% metrics on hand-made sequences, against Biopython and numpy references."""

from __future__ import annotations

import math

import numpy as np
import pytest
from Bio.SeqUtils import gc_fraction as bio_gc_fraction
from hypothesis import given, settings
from hypothesis import strategies as st

from goatdna.analysis.gc import (
    base_accuracy,
    gc_fraction,
    gc_trajectory,
    js_divergence,
    kmer_counts,
    kmer_js_divergences,
    pearson_or_nan,
    sample_stats,
    summarize_samples,
)
from goatdna.errors import GoatDNAError


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ACGTNacgtn", max_size=300))
def test_gc_fraction_agrees_with_biopython(seq: str) -> None:
    assert gc_fraction(seq) == pytest.approx(bio_gc_fraction(seq), abs=1e-15)


def test_gc_fraction_hand_made() -> None:
    assert gc_fraction("GGCC") == 1.0
    assert gc_fraction("ATAT") == 0.0
    assert gc_fraction("ACGT") == 0.5
    assert gc_fraction("acgN") == pytest.approx(2 / 3)
    assert gc_fraction("NNNN") == 0.0  # Biopython's convention for no bases
    assert gc_fraction("") == 0.0
    with pytest.raises(GoatDNAError, match="position 3"):
        gc_fraction("AC*T")


def test_gc_trajectory_matches_direct_windows() -> None:
    rng = np.random.default_rng(1)
    seq = "".join(rng.choice(list("ACGT"), size=120))
    traj = gc_trajectory(seq, 25)
    assert traj.shape == (96,)
    expected = [bio_gc_fraction(seq[i : i + 25]) for i in range(96)]
    np.testing.assert_allclose(traj, expected, rtol=0, atol=1e-15)
    assert gc_trajectory("ACGT", 25).size == 0
    assert np.isnan(gc_trajectory("N" * 30, 25)).all()


def test_constant_trajectories_make_pearson_undefined() -> None:
    at_only = "AT" * 100
    gc_only = "GC" * 100
    varied = "A" * 100 + "G" * 100
    assert np.all(gc_trajectory(at_only) == 0.0)
    assert math.isnan(pearson_or_nan(gc_trajectory(at_only), gc_trajectory(varied)))
    assert math.isnan(pearson_or_nan(gc_trajectory(varied), gc_trajectory(gc_only)))
    assert pearson_or_nan(gc_trajectory(varied), gc_trajectory(varied)) == pytest.approx(1.0)
    # Mirror image of the GC profile: perfectly anti-correlated.
    mirror = "G" * 100 + "A" * 100
    assert pearson_or_nan(gc_trajectory(varied), gc_trajectory(mirror)) == pytest.approx(-1.0)
    assert math.isnan(pearson_or_nan(np.array([0.5]), np.array([0.2])))


def test_pearson_matches_numpy_on_random_trajectories() -> None:
    rng = np.random.default_rng(2)
    x, y = rng.random(50), rng.random(50)
    assert pearson_or_nan(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)


def test_base_accuracy() -> None:
    assert base_accuracy("ACGT", "ACGT") == 1.0
    assert base_accuracy("ACGT", "acgA") == 0.75
    assert base_accuracy("AAAA", "CCCC") == 0.0
    with pytest.raises(ValueError):
        base_accuracy("AC", "ACG")


def test_kmer_counts_and_js() -> None:
    counts = kmer_counts(["ACGTN", "AC"], 2)
    # AC twice, CG once, GT once; TN skipped.
    assert counts.sum() == 4
    assert counts[0 * 4 + 1] == 2 and counts[1 * 4 + 2] == 1 and counts[2 * 4 + 3] == 1
    seqs = ["ACGTACGGTTCA", "GGGCCCATAT"]
    for k, value in kmer_js_divergences(seqs, list(seqs)).items():
        assert value == 0.0, k
    # Disjoint supports: maximal divergence (1 bit).
    assert js_divergence(np.array([1, 0]), np.array([0, 1])) == pytest.approx(1.0)
    p, q = np.array([0.2, 0.3, 0.5]), np.array([0.5, 0.25, 0.25])
    m = (p + q) / 2
    ref = 0.5 * np.sum(p * np.log2(p / m)) + 0.5 * np.sum(q * np.log2(q / m))
    assert js_divergence(p, q) == pytest.approx(ref, abs=1e-15)
    assert js_divergence(p * 7, q * 3) == pytest.approx(ref, abs=1e-15)  # counts are normalised


def test_summaries_exclude_and_count_undefined_pearson() -> None:
    refs = ["A" * 100 + "G" * 100, "AT" * 100, "ACGT" * 50]
    conts = ["A" * 100 + "G" * 100, "GC" * 100, "ACAT" * 50]
    stats = [sample_stats(c, r) for c, r in zip(conts, refs, strict=True)]
    assert stats[0].gc_traj_pearson == pytest.approx(1.0)
    assert math.isnan(stats[1].gc_traj_pearson)  # both trajectories constant
    r3 = np.corrcoef(gc_trajectory(conts[2]), gc_trajectory(refs[2]))[0, 1]
    assert stats[2].gc_traj_pearson == pytest.approx(r3, abs=1e-12)
    summary = summarize_samples(stats, conts, refs)
    errors = np.array([0.0, 1.0, 0.25 - 0.5])
    assert summary.gc_mae == pytest.approx(np.abs(errors).mean())
    assert summary.gc_rmse == pytest.approx(np.sqrt((errors**2).mean()))
    assert summary.pearson_undefined == 1
    assert summary.pearson_defined == 2
    assert summary.gc_pearson == pytest.approx((1.0 + r3) / 2)
    assert summary.base_accuracy == pytest.approx((1.0 + 0.0 + 0.75) / 3)
    assert set(summary.kmer_js) == {1, 2, 3, 4, 5, 6}
    assert summary.kmer_js[1] > 0
