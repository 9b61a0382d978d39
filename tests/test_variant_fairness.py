"""Length-fair indel scores, alleles too long to score, and the window's memory bound.

The no-trend test uses a hand-built order-1 Markov model whose log-probabilities are known
exactly, on a sequence sampled from the same chain: there a deletion or insertion of real-chain
bases is on average no more or less likely than the reference whatever its length, so a fair
score shows no length trend, while the plain windows (unequal numbers of predictions) do.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import invoke, tiny_config
from scipy.stats import spearmanr
from torch import nn

from goatdna.inference import pair_scoring, variants
from goatdna.inference.memory import max_window
from goatdna.inference.reference import Reference
from goatdna.inference.variants import (
    Allele,
    VariantOptions,
    allele_status,
    combine_strands,
    score_alleles,
)
from goatdna.io.tokens import decode

pytestmark = pytest.mark.usefixtures("one_thread")


@dataclass
class _Shape:
    """What the scoring reads of a model's config (memory estimates)."""

    n_layers: int = 1
    d_model: int = 4
    n_heads: int = 1
    mlp_hidden: int = 4


class _Cache:
    def __init__(self) -> None:
        self.length = 0


class MarkovModel(nn.Module):
    """An order-1 Markov chain over A C G T with the decoder's scoring interface.

    The logits at position t are log T[x_t, :] (and a vanishing N class), so the 5-class
    log-softmax of the scoring primitive is exactly log T[x_t, x_{t+1}].
    """

    def __init__(self, transition: np.ndarray) -> None:
        super().__init__()
        table = np.full((5, 5), -1e4)
        table[:4, :4] = np.log(transition)
        table[4, :4] = np.log(0.25)  # after an N: uniform
        self.table = nn.Parameter(torch.tensor(table, dtype=torch.float32), requires_grad=False)
        self.config = _Shape()

    def forward(self, idx: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        return self.table[idx]

    def new_cache(self, batch_size: int, max_length: int) -> _Cache:
        return _Cache()

    def forward_cached(self, idx: torch.Tensor, cache: _Cache) -> torch.Tensor:
        cache.length += idx.shape[1]
        return self.table[idx]


def _chain(rng: np.random.Generator) -> np.ndarray:
    transition = rng.dirichlet(np.full(4, 0.6), size=4)  # ~1.5 bits/base: strong structure
    return transition


def _sample(rng: np.random.Generator, transition: np.ndarray, first: int, n: int) -> np.ndarray:
    out = np.empty(n, dtype=np.uint8)
    state = first
    cumulative = transition.cumsum(axis=1)
    for i, u in enumerate(rng.random(n)):
        state = int(np.searchsorted(cumulative[state], u * cumulative[state, -1]))
        out[i] = state
    return out


@pytest.fixture(scope="module")
def markov(tmp_path_factory: pytest.TempPathFactory):
    rng = np.random.default_rng(2026)
    transition = _chain(rng)
    contig = _sample(rng, transition, 0, 120_000)
    path = tmp_path_factory.mktemp("markov") / "markov.fa"
    text = decode(contig)
    path.write_text(">m\n" + "\n".join(text[i : i + 60] for i in range(0, len(text), 60)) + "\n")
    return MarkovModel(transition), transition, contig, path


def _indels(rng, transition, contig, n: int) -> list[Allele]:
    """Random deletions and insertions (of chain-sampled bases) of lengths 1..50, spaced apart."""
    text = decode(contig)
    alleles = []
    for i, pos0 in enumerate(np.linspace(200, contig.size - 300, n).astype(int)):
        d = int(rng.integers(1, 51))
        pad = text[pos0]
        if i % 2:  # deletion of the d bases after the padding base
            alleles.append(Allele(i, "m", pos0 + 1, ".", text[pos0 : pos0 + 1 + d], pad))
        else:
            inserted = decode(_sample(rng, transition, int(contig[pos0]), d))
            alleles.append(Allele(i, "m", pos0 + 1, ".", pad, pad + inserted))
    return alleles


def _exact_ll(transition: np.ndarray, seq: np.ndarray) -> float:
    return float(np.log(transition[seq[:-1], seq[1:]]).sum())


def test_markov_model_log_probs_are_exact(markov, tmp_path) -> None:
    """The hand-built model scores exactly log T along the sequence (float32 log-softmax)."""
    model, transition, contig, path = markov
    reference = Reference(path, tmp_path)
    allele = Allele(0, "m", 501, ".", decode(contig[500:503]), decode(contig[500:501]))
    scores, _ = score_alleles(model, [allele], ["ok"], reference, VariantOptions(64, "forward"))
    window = variants.allele_window(allele, reference, 32)
    assert scores[0, 0] == pytest.approx(_exact_ll(transition, window.s_ref), abs=1e-3)
    assert scores[0, 1] == pytest.approx(_exact_ll(transition, window.s_alt), abs=1e-3)
    assert window.s_ref.size == window.s_alt.size == 32 + 3 + 32  # length-fair


def test_fair_indel_scores_have_no_length_trend(markov, tmp_path) -> None:
    model, transition, contig, path = markov
    reference = Reference(path, tmp_path)
    alleles = _indels(np.random.default_rng(5), transition, contig, 1200)
    statuses = [allele_status(a, reference, 128) for a in alleles]
    assert set(statuses) == {"ok"}
    signed = np.array([len(a.alt) - len(a.ref) for a in alleles])  # + insertion, - deletion
    rho = {}
    for fair in (True, False):
        options = VariantOptions(128, "both", batch_size=64, length_fair=fair)
        scores, _ = score_alleles(model, alleles, statuses, reference, options)
        llr = combine_strands(scores, "both")["llr"]
        rho[fair] = {
            "all": spearmanr(signed, llr).statistic,
            "deletions": spearmanr(-signed[signed < 0], llr[signed < 0]).statistic,
            "insertions": spearmanr(signed[signed > 0], llr[signed > 0]).statistic,
        }
    print(rho)  # measured numbers for the report
    assert all(abs(r) < 0.1 for r in rho[True].values()), rho
    assert rho[False]["all"] < -0.5  # plain windows: insertions low, deletions high
    assert rho[False]["deletions"] > 0.3 and rho[False]["insertions"] < -0.3


def test_long_allele_queries_in_small_blocks_equal_one_block(markov, tmp_path, monkeypatch):
    """The y suffix runs in query blocks bounded by ATTENTION_BLOCK_BYTES; blocks of one query
    (and passes of one pair, MEMORY_BOUND_BYTES tiny) give the same numbers."""
    model, transition, contig, path = markov
    reference = Reference(path, tmp_path)
    alleles = _indels(np.random.default_rng(9), transition, contig, 12)
    options = VariantOptions(64, "both", batch_size=8)
    expected, _ = score_alleles(model, alleles, ["ok"] * 12, reference, options)
    monkeypatch.setattr(pair_scoring, "ATTENTION_BLOCK_BYTES", 1)
    monkeypatch.setattr(pair_scoring, "MEMORY_BOUND_BYTES", 1)
    pairs = [pair_scoring.Pair(np.zeros(9), np.zeros(9), 1)] * 5
    batches = pair_scoring._batches(range(5), pairs, 8, 4)
    assert batches == [[0], [1], [2], [3], [4]]
    got, _ = score_alleles(model, alleles, ["ok"] * 12, reference, options)
    np.testing.assert_allclose(got, expected, atol=1e-3)


def test_allele_longer_than_window_is_too_long_not_allocated(tmp_path: Path) -> None:
    """A 100 kbp insertion with --window 16 is reported, not scored (no SDPA block of 40 GB)."""
    from goatdna.checkpoint import save_checkpoint
    from goatdna.configfile import to_dict
    from goatdna.model import DNADecoder

    config = tiny_config(train_length=16)
    ckpt = save_checkpoint(tmp_path / "m.ckpt", DNADecoder(config), {"model": to_dict(config)})
    fasta = tmp_path / "r.fa"
    fasta.write_text(">c\n" + "ACGTTGCAAGGCTTACCGATAGCTAGGATCCAGT" * 3 + "\n")
    table = tmp_path / "v.tsv"
    table.write_text(f"chrom\tpos\tref\talt\nc\t5\tT\tT{'A' * 100_000}\nc\t9\tA\tG\n")
    out = tmp_path / "s.tsv"
    args = ["score-variants", "-c", str(ckpt), "--fasta", str(fasta), "--variants", str(table),
            "--out", str(out), "--window", "16"]  # fmt: skip
    res = invoke(args)
    assert res.exit_code == 0, res.output + str(res.exception)
    assert "too_long" in res.stdout
    import pandas as pd

    scored = pd.read_csv(out, sep="\t")
    assert scored.status.tolist() == ["too_long", "ok"]
    assert np.isnan(scored.llr[0]) and np.isfinite(scored.llr[1])

    bound = max_window(config)
    big = tmp_path / "big.tsv"
    res = invoke([*args[:-4], "--out", str(big), "--window", str(bound + 1)])
    assert res.exit_code == 2
    assert res.stderr.startswith(f"error: --window {bound + 1}: above this model's bound")
    assert len(res.stderr.strip().splitlines()) == 1 and not big.exists()
    res = invoke([*args[:-4], "--out", str(big), "--window", "1000000000"])
    assert res.exit_code == 2 and "above this model's bound" in res.stderr


def test_fair_indels_at_contig_ends_and_n_runs_are_never_biased(tmp_path: Path) -> None:
    """Under a uniform model a fair score is exactly 0 (equal numbers of predictions); a strand
    whose extension would run off the contig is not scored (scored_strands says which), an
    extension that meets an N run reaches past it, and an indel no strand can make fair is
    no_fair_window. Before: the clipped extension gave llr_fwd = +d log 4 marked ok."""
    from goatdna.inference.variant_io import results_frame

    rng = np.random.default_rng(7)
    body = "".join(rng.choice(list("ACGT"), 300))
    tail = "".join(rng.choice(list("ACGT"), 300))
    text = body + "N" * 40 + tail  # 640 bases, an N run at [300, 340)
    short = "".join(rng.choice(list("ACGT"), 30))
    fasta = tmp_path / "ends.fa"
    fasta.write_text(f">c\n{text}\n>s\n{short}\n")
    reference = Reference(fasta, tmp_path)
    model = MarkovModel(np.full((4, 4), 0.25))

    def deletion(chrom: str, seq: str, pos0: int, d: int) -> Allele:  # pos0: the padding base
        return Allele(0, chrom, pos0 + 1, ".", seq[pos0 : pos0 + 1 + d], seq[pos0])

    end_del = deletion("c", text, len(text) - 1 - 60 - 2, 60)  # ends 2 bases before the end
    last_del = deletion("c", text, len(text) - 6, 5)  # ends at the contig's last base
    start_del = deletion("c", text, 2, 10)
    after_n = deletion("c", text, 340 + 10, 20)  # reverse strand reads back over the N run
    before_n = deletion("c", text, 300 - 32 - 12, 8)  # forward extension meets the N run
    end_ins = Allele(0, "c", len(text) - 3, ".", text[-4], text[-4] + "ACGTA")
    no_room = deletion("s", short, 10, 4)  # a contig shorter than W + d: neither strand
    cases = {
        end_del: "reverse", last_del: "reverse", start_del: "forward", after_n: "both",
        before_n: "both", end_ins: "reverse", no_room: None,
    }  # fmt: skip
    alleles = list(cases)
    statuses = [allele_status(a, reference, 64, length_fair=True) for a in alleles]
    assert statuses == ["ok"] * 6 + ["no_fair_window"]
    for strands in ("both", "forward"):
        options = VariantOptions(64, strands, batch_size=4)
        scores, windows = score_alleles(model, alleles, statuses, reference, options)
        numbers = combine_strands(scores, strands)
        frame = results_frame(alleles, numbers, windows, statuses)
        expected = list(cases.values())
        if strands == "forward":  # forward where fair, else the reverse strand alone
            expected = ["reverse", "reverse", "forward", "forward", "forward", "reverse", None]
        got = [s if isinstance(s, str) else None for s in frame.scored_strands]
        assert got == expected, strands
        ok = frame.status == "ok"
        np.testing.assert_allclose(frame.llr[ok], 0.0, atol=1e-3)  # never d log 4
        for column in ("llr_fwd", "llr_rev"):
            values = frame[column][ok].dropna()
            np.testing.assert_allclose(values, 0.0, atol=1e-3)
        assert frame.llr[~ok].isna().all()
    # the N run is crossed, not counted: after_n's reverse extension holds 20 bases past it
    window = variants.allele_window(after_n, reference, 32)
    assert window.window_start == 350 - 32  # the left flank starts inside the N run [300, 340)
    assert window.more_left.size == (318 - 300) + 20 and window.fair_reverse
    # --length-unfair keeps the plain definition (biased, by design) and scores both strands
    plain = allele_status(end_del, reference, 64, length_fair=False)
    scores, _ = score_alleles(model, [end_del], [plain], reference,
                              VariantOptions(64, "both", length_fair=False))  # fmt: skip
    assert combine_strands(scores, "both")["llr_fwd"][0] == pytest.approx(60 * np.log(4), rel=1e-3)
