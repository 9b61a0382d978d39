"""`goatdna mutagenesis`: ``full`` equals score-variants, ``local`` equals a brute force, outputs,
resume, bad inputs.

The ``local`` brute force runs the model once per position and strand on the context the
definition names (`goatdna.inference.mutagenesis`), read from the contig *string*; it shares no
window or placement code with the implementation.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyBigWig
import pytest
import torch
from helpers import invoke, tiny_config

from goatdna.checkpoint import load_checkpoint, save_checkpoint
from goatdna.configfile import to_dict
from goatdna.errors import GoatDNAError
from goatdna.inference.mutagenesis import MutagenesisOptions, combine, full_scores, local_scores
from goatdna.inference.reference import Reference
from goatdna.inference.variants import Allele, VariantOptions, combine_strands, score_alleles
from goatdna.io.tokens import encode
from goatdna.model import DNADecoder
from goatdna.model.scoring import target_log_probs

REPO = Path(__file__).resolve().parents[1]
COMPLEMENT = str.maketrans("ACGTN", "TGCAN")
pytestmark = pytest.mark.usefixtures("one_thread")

_rng = np.random.default_rng(3)
_BODY = "".join(_rng.choice(list("ACGT"), 150))
CONTIG = _BODY[:60] + "NNN" + _BODY[63:90].lower() + _BODY[90:]  # an N run, a soft-masked run


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Random-init 1-layer GOAT and RoPE decoders (training length 32), weights scaled up so
    log-probabilities vary with the context."""
    folder = tmp_path_factory.mktemp("ism_ckpts")
    paths = {}
    for positional in ("goat", "rope"):
        torch.manual_seed(11)
        config = tiny_config(positional=positional)
        model = DNADecoder(config)
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(8.0 if p.dim() > 1 else 1.0)
        paths[positional] = save_checkpoint(
            folder / f"{positional}.ckpt", model, {"model": to_dict(config)}
        )
    return paths


@pytest.fixture(scope="module")
def fasta(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ism_fasta") / "ref.fa"
    path.write_text(f">chrA\n{CONTIG[:70]}\n{CONTIG[70:]}\n>chrB\nACGTACGTAC\n")
    return path


def _snvs(positions: range) -> tuple[list[Allele], list[tuple[int, int]]]:
    """Every SNV of ``positions`` (0-based) as score-variants alleles, with (row, base column)."""
    alleles, where = [], []
    upper = CONTIG.upper()
    for row, p in enumerate(positions):
        if upper[p] == "N":
            continue
        for column, base in enumerate("ACGT"):
            if base != upper[p]:
                alleles.append(Allele(0, "chrA", p + 1, ".", upper[p], base))
                where.append((row, column))
    return alleles, where


@pytest.mark.parametrize(
    ("positional", "window", "strands"),
    [("goat", 16, "both"), ("goat", 15, "both"), ("rope", 16, "both"), ("goat", 12, "forward")],
)
def test_full_equals_score_variants(checkpoints, fasta, tmp_path, positional, window, strands):
    """Every position of the contig (both ends, next to and inside the N run) x 3 alternatives."""
    model = load_checkpoint(checkpoints[positional]).model
    reference = Reference(fasta, tmp_path)
    contig = reference.contig_tokens("chrA")
    positions = range(0, len(CONTIG))
    options = MutagenesisOptions(window, "full", strands, batch_size=7)
    scan = full_scores(model, contig, positions, options)
    matrix = combine(scan, options)
    alleles, where = _snvs(positions)
    variant_options = VariantOptions(window, strands, batch_size=5)
    raw, _ = score_alleles(model, alleles, ["ok"] * len(alleles), reference, variant_options)
    numbers = combine_strands(raw, strands)
    rows, columns = np.array(where).T
    np.testing.assert_allclose(matrix[rows, columns], numbers["llr"], rtol=0, atol=1e-5)
    np.testing.assert_allclose(scan[rows, 0, columns], numbers["llr_fwd"], rtol=0, atol=1e-5)
    if strands == "both":
        np.testing.assert_allclose(scan[rows, 1, columns], numbers["llr_rev"], rtol=0, atol=1e-5)
    known = np.array([c != "N" for c in CONTIG.upper()])
    reference_columns = encode(CONTIG.upper()[:60]).astype(np.int64)
    assert (matrix[np.arange(60), reference_columns] == 0).all()  # REF itself scores 0
    assert np.isnan(matrix[~known]).all() and np.isfinite(matrix[known]).all()
    assert np.abs(numbers["llr"]).max() > 0.1  # the model does tell alleles apart


def _log_probs(model, context: str) -> np.ndarray:
    """log p(b | context) for b = A C G T from one forward pass over ``context`` (its last logit)."""
    tokens = torch.from_numpy(encode(context).astype(np.int64))[None, :]
    with torch.no_grad():
        logits = model(tokens)[:, -1:]  # (1, 1, V)
        return np.array([float(target_log_probs(logits, torch.tensor([[b]]))) for b in range(4)])


def brute_local(model, text: str, a: int, p: int, window: int) -> tuple[float, float]:
    """(forward, reverse) rows of log p(b) - log p(ref) at p by the definition, NaN if none."""
    f, s = window // 2, window - window // 2
    k = (p - a) // s
    ref = "ACGT".index(text[p])
    fwd_context = text[max(0, a - f + k * s) : p]
    fwd = _log_probs(model, fwd_context) if fwd_context else np.full(4, np.nan)
    rev_text = text[p + 1 : a + (k + 1) * s + f]
    if rev_text:
        rev_context = rev_text.translate(COMPLEMENT)[::-1]
        rev = _log_probs(model, rev_context)[[3, 2, 1, 0]]  # column b: log p(comp(b))
    else:
        rev = np.full(4, np.nan)
    return fwd - fwd[ref], rev - rev[ref]


@pytest.mark.parametrize(("positional", "window"), [("goat", 16), ("goat", 11), ("rope", 16)])
def test_local_equals_brute_force(checkpoints, fasta, tmp_path, positional, window) -> None:
    model = load_checkpoint(checkpoints[positional]).model
    reference = Reference(fasta, tmp_path)
    contig = reference.contig_tokens("chrA")
    text = CONTIG.upper()
    options = MutagenesisOptions(window, "local", "both", batch_size=3)
    a = 5
    whole = local_scores(model, contig, a, range(a, len(text)), options)
    for cut in (range(a, 40), range(40, len(text))):  # units cut anywhere give the same numbers
        part = local_scores(model, contig, a, cut, options)
        np.testing.assert_array_equal(part, whole[cut.start - a : cut.stop - a])
    for row, p in enumerate(range(a, len(text))):
        if text[p] == "N":
            assert np.isnan(whole[row]).all()
            continue
        fwd, rev = brute_local(model, text, a, p, window)
        np.testing.assert_allclose(whole[row, 0], fwd, rtol=0, atol=1e-5)
        np.testing.assert_allclose(whole[row, 1], rev, rtol=0, atol=1e-5)
    assert np.isnan(whole[-1, 1]).all()  # the contig's last base has no reverse value
    first = local_scores(model, contig, 0, range(0, 3), options)
    assert np.isnan(first[0, 0]).all() and np.isfinite(first[0, 1]).all()
    matrix = combine(first, options)
    np.testing.assert_allclose(matrix[0], first[0, 1])  # one strand only: that strand's value


def test_full_runs_through_pair_scorings_prefix_pass() -> None:
    """One padding rule, one prefix pass, one no-prefix pass: ``full`` calls `pair_scoring`'s
    (mutagenesis had its own `_padded` and prefix pass); only the suffix pass is its own (why:
    the module docstring), and `test_full_equals_score_variants` pins its numbers."""
    from goatdna.inference import mutagenesis, pair_scoring

    assert mutagenesis.padded is pair_scoring.padded
    assert mutagenesis.prefix_pass is pair_scoring.prefix_pass
    assert mutagenesis.sequence_ll is pair_scoring.sequence_ll
    assert not hasattr(mutagenesis, "_padded") and not hasattr(pair_scoring, "_padded")


def _record_passes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    """Every model call of a ``full`` scan as (kind, rows, queries): ``prefix`` (a prefix pass,
    rows = groups), ``whole`` (a pass without a shared prefix, rows = groups) and ``suffix`` (a
    call on a grown cache, rows = 3 x groups)."""
    from goatdna.inference import mutagenesis

    calls: list[tuple[str, int, int]] = []
    prefix_pass, sequence_ll = mutagenesis.prefix_pass, mutagenesis.sequence_ll
    forward_cached = DNADecoder.forward_cached

    def on_prefix(model, seqs, *args):
        calls.append(("prefix", len(seqs), 0))
        return prefix_pass(model, seqs, *args)

    def on_whole(model, seqs, device):
        calls.append(("whole", len(seqs) // 4, 0))
        return sequence_ll(model, seqs, device)

    def on_cached(model, idx, cache):
        if cache.length > 0:  # the prefix pass starts an empty cache
            calls.append(("suffix", idx.shape[0], idx.shape[1]))
        return forward_cached(model, idx, cache)

    monkeypatch.setattr(mutagenesis, "prefix_pass", on_prefix)
    monkeypatch.setattr(mutagenesis, "sequence_ll", on_whole)
    monkeypatch.setattr(DNADecoder, "forward_cached", on_cached)
    return calls


def _small_bound(monkeypatch: pytest.MonkeyPatch, model: DNADecoder, length: int) -> int:
    """Patch the memory bound to four groups of ``length`` tokens' rows (two groups a pass, half
    the bound each) and the attention block to three queries of two groups -> the bound."""
    from goatdna.inference import memory
    from goatdna.inference.mutagenesis import pass_bytes

    rows = pass_bytes(model.config, 1, length, 0)
    block = pass_bytes(model.config, 2, length, 3) - pass_bytes(model.config, 2, length, 0)
    monkeypatch.setattr(memory, "MEMORY_BOUND_BYTES", 4 * rows)
    monkeypatch.setattr(memory, "ATTENTION_BLOCK_BYTES", block)
    return 4 * rows


def test_full_past_the_memory_bound_runs_smaller_passes_with_the_same_numbers(
    checkpoints, fasta, tmp_path, monkeypatch
) -> None:
    """Before: a batch of ``--batch-size`` groups ran as one pass whatever it held (64 groups of
    a long window: a cache of 4 x 64 rows and (192, heads, W/2, W) attention scores, past the
    8 GiB bound every other command keeps). Now a batch past the bound runs as passes of fewer
    groups with the suffix queries in blocks, and the LLRs agree with one pass to float rounding."""
    model = load_checkpoint(checkpoints["goat"]).model
    contig = Reference(fasta, tmp_path).contig_tokens("chrA")
    positions = range(0, len(CONTIG))
    options = MutagenesisOptions(32, "full", "both", batch_size=16)
    calls = _record_passes(monkeypatch)
    one_pass = full_scores(model, contig, positions, options)
    unbounded = list(calls)
    assert max(rows for kind, rows, _ in unbounded if kind != "suffix") == 16
    assert max(q for kind, _, q in unbounded if kind == "suffix") > 4
    calls.clear()
    _small_bound(monkeypatch, model, 33)  # the longest sequence: 16 + 1 + 16 bases
    cut = full_scores(model, contig, positions, options)
    np.testing.assert_allclose(cut, one_pass, rtol=0, atol=1e-5)  # NaN (N bases) where it was
    assert np.isfinite(cut).sum() == np.isfinite(one_pass).sum() > 0
    assert max(rows for kind, rows, _ in calls if kind != "suffix") <= 3  # 2 at 33 bases
    assert max(q for kind, _, q in calls if kind == "suffix") <= 4  # 3 at 33 bases
    assert len(calls) > 3 * len(unbounded)


def test_full_within_the_memory_bound_runs_one_pass_a_batch(checkpoints, fasta, tmp_path,
                                                             monkeypatch) -> None:  # fmt: skip
    """The cuts apply only past the bound: at the default bound every batch of ``batch_size``
    groups is one prefix pass and one suffix call, as before (so the numbers of every run that
    fits, the tests above and a ``--resume`` of an older run among them, do not move)."""
    model = load_checkpoint(checkpoints["rope"]).model
    contig = Reference(fasta, tmp_path).contig_tokens("chrA")
    calls = _record_passes(monkeypatch)
    options = MutagenesisOptions(16, "full", "both", batch_size=7)
    full_scores(model, contig, range(0, len(CONTIG)), options)
    groups = 2 * sum(c != "N" for c in CONTIG.upper())
    passes = [rows for kind, rows, _ in calls if kind != "suffix"]
    assert passes == [7] * (groups // 7) + ([groups % 7] if groups % 7 else [])
    suffixes = [rows for kind, rows, _ in calls if kind == "suffix"]
    assert suffixes == [3 * rows for kind, rows, _ in calls if kind == "prefix"]


def _peak_allocated(run) -> int:
    """Peak growth of torch's CPU allocations while ``run()`` runs (the profiler's memory
    events summed in time order): tensors the passes really held, not an estimate."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    events = prof.profiler.kineto_results.events()
    changes = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    held = peak = 0
    for _, nbytes in changes:
        held += nbytes
        peak = max(peak, held)
    return peak


def test_full_memory_estimate_covers_the_tensors_a_pass_holds(checkpoints, fasta, tmp_path,
                                                              monkeypatch) -> None:  # fmt: skip
    """`pass_bytes` is what the cuts trust: the allocations measured while one batch runs stay
    within its estimate, and within a small patched bound once the passes are cut."""
    from goatdna.inference.mutagenesis import pass_bytes

    model = load_checkpoint(checkpoints["goat"]).model
    contig = Reference(fasta, tmp_path).contig_tokens("chrA")
    options = MutagenesisOptions(32, "full", "both", batch_size=16)
    positions = range(40, 56)  # 16 positions x 2 strands, all with 16-base flanks: two batches
    peak = _peak_allocated(lambda: full_scores(model, contig, positions, options))
    estimate = pass_bytes(model.config, 16, 33, 32)
    assert estimate / 4 < peak <= estimate
    bound = _small_bound(monkeypatch, model, 33)
    assert bound < peak  # the uncut passes would not fit it
    assert _peak_allocated(lambda: full_scores(model, contig, positions, options)) <= bound


def _args(checkpoint: Path, fasta: Path, *outs: Path, region: str = "chrA:3-150") -> list[str]:
    args = ["mutagenesis", "-c", str(checkpoint), "--fasta", str(fasta), "--region", region,
            "--window", "16", "--chunk-size", "40", "--accelerator", "cpu"]  # fmt: skip
    for out in outs:
        args += ["-o", str(out)]
    return args


def test_cli_outputs_agree(checkpoints, fasta, tmp_path) -> None:
    outs = [tmp_path / n for n in ("ism.tsv", "ism.parquet", "ism.npz", "ism.bw", "ism.png")]
    res = invoke(_args(checkpoints["goat"], fasta, *outs))
    assert res.exit_code == 0, res.output + str(res.exception)
    table = pd.read_parquet(outs[1])
    tsv = pd.read_csv(outs[0], sep="\t")
    assert list(table.columns) == ["chrom", "pos", "ref", "alt", "llr", "llr_fwd", "llr_rev"]
    known = [p for p in range(2, 150) if CONTIG[p].upper() != "N"]
    assert len(table) == len(tsv) == 3 * len(known)
    assert table.pos.tolist() == [p + 1 for p in known for _ in range(3)]
    np.testing.assert_allclose(tsv.llr, table.llr, atol=1e-6)
    with np.load(outs[2]) as matrix:
        scores = matrix["scores"]
        assert scores.shape == (148, 4) and int(matrix["start"]) == 2
        assert str(matrix["ref"]) == CONTIG[2:150].upper()
    rows = table.pos.to_numpy() - 3
    columns = table.alt.map("ACGT".index).to_numpy()
    np.testing.assert_array_equal(scores[rows, columns], table.llr.to_numpy())
    by_position = table.groupby("pos").llr
    for what, expected in (("min", by_position.min()), ("mean", by_position.mean())):
        with pyBigWig.open(str(tmp_path / f"ism.{what}.bw")) as bw:
            values = np.array(bw.values("chrA", 2, 150))
        got = values[expected.index.to_numpy() - 3]
        np.testing.assert_allclose(got, expected.to_numpy(), rtol=1e-6, atol=1e-6)
        assert np.isnan(values[[p - 2 for p in range(60, 63)]]).all()  # N: no value
    assert outs[4].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    variants = tmp_path / "snvs.vcf"  # the same alleles through score-variants: the same LLRs
    header = [
        "##fileformat=VCFv4.2",
        "##contig=<ID=chrA>",
        "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO",
    ]
    lines = [f"chrA\t{r.pos}\t.\t{r.ref}\t{r.alt}\t.\t.\t." for r in table.itertuples()]
    variants.write_text("\n".join(header + lines) + "\n")
    scored = tmp_path / "snvs.parquet"
    res = invoke(["score-variants", "-c", str(checkpoints["goat"]), "--fasta",
                              str(fasta), "--vcf", str(variants), "-o", str(scored),
                              "--window", "16"])  # fmt: skip
    assert res.exit_code == 0, res.output + str(res.exception)
    np.testing.assert_allclose(pd.read_parquet(scored).llr, table.llr, rtol=0, atol=1e-5)


def test_local_cli_names_the_approximation(checkpoints, fasta, tmp_path) -> None:
    out = tmp_path / "local.tsv"
    args = [*_args(checkpoints["rope"], fasta, out), "--method", "local", "--strands", "forward"]
    res = invoke(args)
    assert res.exit_code == 0, res.output + str(res.exception)
    table = pd.read_csv(out, sep="\t")
    assert list(table.columns)[4:] == ["llr_local", "llr_local_fwd", "llr_local_rev"]
    assert table.llr_local_rev.isna().all() and table.llr_local.notna().all()


def test_resume_is_byte_identical(checkpoints, fasta, tmp_path, monkeypatch) -> None:
    import goatdna.inference.mutagenesis_run as run

    whole = [tmp_path / "whole.tsv", tmp_path / "whole.npz"]
    assert invoke(_args(checkpoints["goat"], fasta, *whole)).exit_code == 0
    save = run.save_arrays
    saved: list[int] = []

    def dies_after_two(work, unit, arrays):
        if len(saved) == 2:
            raise KeyboardInterrupt  # as if the job were killed
        save(work, unit, arrays)
        saved.append(unit)

    monkeypatch.setattr(run, "save_arrays", dies_after_two)
    resumed = [tmp_path / "resumed.tsv", tmp_path / "resumed.npz"]
    args = _args(checkpoints["goat"], fasta, *resumed)
    res = invoke(args)
    assert res.exit_code != 0 and not any(p.exists() for p in resumed)
    work = run.work_dir_for(resumed[0])
    assert sorted(p.name for p in work.glob("unit-*")) == ["unit-000000.npz", "unit-000001.npz"]
    monkeypatch.setattr(run, "save_arrays", save)
    res = invoke(args)  # without --resume: refuses to drop the finished units
    assert res.exit_code == 2 and "--resume" in res.stderr
    res = invoke([*args, "--resume", "--method", "local"])
    assert res.exit_code == 2 and "different" in res.stderr
    res = invoke([*args, "--resume"])
    assert res.exit_code == 0, res.output + str(res.exception)
    assert "resumed: 2 unit(s)" in res.stdout
    for a, b in zip(whole, resumed, strict=True):
        assert a.read_bytes() == b.read_bytes()
    assert not work.exists()


@pytest.mark.slow
def test_two_processes_give_the_outputs_of_one(checkpoints, fasta, tmp_path) -> None:
    one = [tmp_path / "one.tsv", tmp_path / "one.npz"]
    two = [tmp_path / "two.tsv", tmp_path / "two.npz"]
    assert invoke(_args(checkpoints["goat"], fasta, *one)).exit_code == 0
    cmd = [sys.executable, "-m", "goatdna.cli.app", *_args(checkpoints["goat"], fasta, *two),
           "--devices", "2"]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "GLOBAL_RANK: 1, MEMBER: 2/2" in proc.stderr + proc.stdout  # two ranks really ran
    for a, b in zip(one, two, strict=True):
        assert a.read_bytes() == b.read_bytes()


def test_bad_inputs_are_one_line_errors_without_output(checkpoints, fasta, tmp_path) -> None:
    out = tmp_path / "o" / "ism.tsv"
    out.parent.mkdir()

    def bad(message: str, *extra: str, region: str = "chrA:3-150", outs=(out,)) -> None:
        res = invoke([*_args(checkpoints["goat"], fasta, *outs, region=region), *extra])
        assert res.exit_code == 2, res.output + str(res.exception)
        assert res.stderr.startswith("error: ") and len(res.stderr.strip().splitlines()) == 1
        assert message in res.stderr, res.stderr
        left = {p.name for p in out.parent.iterdir()} - {".goatdna-cache", "ism.tsv"}
        assert left == set(), left  # no partial output, no work folder

    bad("expected contig:start-end", region="chrA:10")
    bad("ends beyond contig 'chrA'", region="chrA:100-400")
    bad("is not in ref.fa", region="chrZ:1-10")
    bad("unknown extension .csv", outs=(tmp_path / "o" / "ism.csv",))
    bad("a heatmap shows at most 2,000", region="chrA:1-2500", outs=(tmp_path / "o" / "a.png",))
    bad("--method 'exact'", "--method", "exact")
    bad("--window 1: must be >= 2", "--window", "1")
    bad("above this model's bound", "--window", "1000000000")  # no 40 GB allocation
    bad("--chunk-size 0", "--chunk-size", "0")
    out.write_text("keep me")
    bad("exists; pass --force", outs=(out,))
    assert out.read_text() == "keep me"
    out.unlink()


def test_a_full_window_that_cannot_fit_one_position_is_refused_before_any_work(
    checkpoints, fasta, tmp_path, monkeypatch
) -> None:
    """score-variants' window bound holds one allele pair (2W positions); ``full`` holds four
    sequences of up to W + 1 bases a position, so a window within the first can still not fit
    at ``--batch-size 1``: refused with one line, no output, before the FASTA is read."""
    from goatdna.inference import memory

    config = load_checkpoint(checkpoints["goat"]).model_config
    monkeypatch.setattr(memory, "MEMORY_BOUND_BYTES", 2 * 16 * memory.position_bytes(config))
    out = tmp_path / "ism.tsv"
    res = invoke([*_args(checkpoints["goat"], fasta, out), "--batch-size", "1"])
    assert res.exit_code == 2, res.output + str(res.exception)
    assert res.stderr.startswith("error: --window 16: --method full holds about"), res.stderr
    assert "--batch-size 1" in res.stderr and "--method local" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not list(tmp_path.iterdir())
    res = invoke([*_args(checkpoints["goat"], fasta, out), "--method", "local"])
    assert res.exit_code == 0, res.output + str(res.exception)  # the window bound itself holds


def test_an_output_that_cannot_be_written_is_refused_before_the_scan(checkpoints, fasta, tmp_path,
                                                                     monkeypatch) -> None:  # fmt: skip
    """Before: an all-N region scanned, wrote the .tsv, then failed at the bigWig (no value),
    leaving a partial set. Now refused first; and a writer failing late takes the others along."""
    from goatdna.inference import mutagenesis_run

    outs = [tmp_path / "n.tsv", tmp_path / "n.bw"]
    res = invoke(_args(checkpoints["goat"], fasta, *outs, region="chrA:61-63"))
    assert res.exit_code == 2, res.output + str(res.exception)
    assert "all N" in res.stderr and "bigWig needs one" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not list(tmp_path.iterdir())
    bedgraph = tmp_path / "n.bedGraph"  # a bedGraph of no values is fine
    res = invoke(_args(checkpoints["goat"], fasta, bedgraph, region="chrA:61-63"))
    assert res.exit_code == 0, res.output + str(res.exception)

    write = mutagenesis_run.write_matrix

    def broken(result, out):
        raise GoatDNAError(f"--out {out}: cannot write (test)")

    monkeypatch.setattr(mutagenesis_run, "write_matrix", broken)
    late = [tmp_path / "m.tsv", tmp_path / "m.npz"]
    res = invoke(_args(checkpoints["goat"], fasta, *late, region="chrA:3-40"))
    assert res.exit_code == 2 and "cannot write (test)" in res.stderr, res.output
    assert not late[0].exists() and not late[1].exists()  # no partial set
    monkeypatch.setattr(mutagenesis_run, "write_matrix", write)
    res = invoke(
        _args(
            checkpoints["goat"],
            fasta,
            *late,
            region="chrA:3-40",
        )
        + ["--resume"],
    )
    assert res.exit_code == 0 and late[0].is_file() and late[1].is_file(), res.output
