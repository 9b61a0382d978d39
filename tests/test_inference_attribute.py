"""`goatdna attribute`: ISM equals mutagenesis' LLR matrix, saliency equals plain autograd,
integrated gradients are complete, tracks, resume, and one `error:` line per bad input.

The independent computations run the model on *tokens* (`DNADecoder.forward`,
`SequenceTaskModel.outputs`, `reverse_complement_padded`), never through the one-hot path that
`goatdna.inference.attribute` builds, so a mistake there cannot cancel out.
"""

from __future__ import annotations

import time
import types
import zipfile
from pathlib import Path

import numpy as np
import pyBigWig
import pytest
import torch
from helpers import invoke, tiny_config

from goatdna.configfile import to_dict
from goatdna.inference.attribute import AttributeOptions, language_model_target
from goatdna.io.tokens import encode
from goatdna.model import DNADecoder, ModelConfig
from goatdna.model.classifier import (
    SequenceTaskConfig,
    SequenceTaskModel,
    pad_sequences,
    reverse_complement_padded,
)
from goatdna.model.scoring import sequence_log_probs

pytestmark = pytest.mark.usefixtures("one_thread")

_rng = np.random.default_rng(5)
SEQS = ["".join(_rng.choice(list("ACGT"), n)) for n in (24, 24, 30)]
SEQS[2] = SEQS[2][:10] + "N" + SEQS[2][11:]  # an N: no alternatives, zero one-hot row
CONTIG = "".join(_rng.choice(list("ACGT"), 36))
CONTIG = CONTIG[:20] + "N" + CONTIG[21:]


def _model(seed: int) -> tuple[DNADecoder, ModelConfig]:
    torch.manual_seed(seed)
    config = tiny_config()
    model = DNADecoder(config)
    with torch.no_grad():  # scaled up so outputs vary with the sequence
        for p in model.parameters():
            p.mul_(6.0 if p.dim() > 1 else 1.0)
    return model.eval(), config


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A random language model and a random fine-tuned classifier (mean pool, 2 classes) and a
    regression model, in the checkpoint formats `train` and `finetune` write."""
    from goatdna.checkpoint import save_checkpoint

    folder = tmp_path_factory.mktemp("attr_ckpts")
    model, config = _model(3)
    paths = {"lm": save_checkpoint(folder / "lm.ckpt", model, {"model": to_dict(config)})}
    for name, task in (("cls", SequenceTaskConfig("classification", ("neg", "pos"), dropout=0.0)),
                       ("reg", SequenceTaskConfig("regression", label_mean=2.0, label_std=3.0,
                                                  dropout=0.0))):  # fmt: skip
        backbone, config = _model(4)
        torch.manual_seed(5)
        classifier = SequenceTaskModel(backbone, task)
        with torch.no_grad():
            classifier.head.linear.weight.normal_(0, 1.0)
        state = {k: v.detach().clone() for k, v in classifier.state_dict().items()}
        run_config = {"model": to_dict(config), "head": to_dict(task)}
        paths[name] = folder / f"{name}.ckpt"
        torch.save({"state_dict": state, "hyper_parameters": {"config": run_config}}, paths[name])
    return paths


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("attr_inputs")
    fasta = folder / "seqs.fa"
    fasta.write_text("".join(f">s{i}\n{s}\n" for i, s in enumerate(SEQS)))
    ref = folder / "ref.fa"
    ref.write_text(f">chrA\n{CONTIG}\n>chrB\n{CONTIG[::-1]}\n")
    bed = folder / "regions.bed"
    bed.write_text("chrA\t0\t36\twhole\nchrB\t2\t14\tr1\t0\t+\nchrB\t20\t30\tr2\t0\t-\n")
    return {"fasta": fasta, "ref": ref, "bed": bed}


def run_ok(*args: object) -> dict[str, np.ndarray]:
    result = invoke(["attribute", "--no-progress", *args])
    assert result.exit_code == 0, (result.output, result.exception)
    out = Path(str(args[list(args).index("--out") + 1]))
    with np.load(out) as data:
        return {k: data[k] for k in data.files}


@pytest.mark.parametrize("strands", ["both", "forward"])
def test_ism_of_the_loglik_is_the_mutagenesis_llr_matrix(checkpoints, inputs, tmp_path, strands):
    """A window holding the whole contig (W // 2 >= its length): mutagenesis' exact LLR of
    every SNV is the change of the whole sequence's log-likelihood, what ism explains."""
    matrix = tmp_path / "m.npz"
    res = invoke(["mutagenesis", "--checkpoint", checkpoints["lm"], "--fasta", inputs["ref"],
                  "--region", f"chrA:1-{len(CONTIG)}", "--window", 2 * len(CONTIG) + 2,
                  "--strands", strands, "--out", matrix])  # fmt: skip
    assert res.exit_code == 0, res.output
    bed = tmp_path / "one.bed"
    bed.write_text(f"chrA\t0\t{len(CONTIG)}\n")
    got = run_ok("--checkpoint", checkpoints["lm"], "--fasta", inputs["ref"], "--bed", bed,
                 "--method", "ism", "--strands", strands, "--out", tmp_path / "a.npz")  # fmt: skip
    want = np.load(matrix)["scores"]
    np.testing.assert_allclose(got["attributions"][0], want, rtol=0, atol=1e-5, equal_nan=True)
    assert np.isnan(want[20]).all() and np.nanmax(np.abs(want)) > 0.5
    # the generic path (every mutant through the one-hot target) agrees with the KV-cache one
    from goatdna.checkpoint import load_checkpoint
    from goatdna.inference.attribute import Target, ism

    target = language_model_target(load_checkpoint(checkpoints["lm"]).model, "loglik")
    generic = ism(Target("x", target.one_strand), encode(CONTIG), AttributeOptions("ism",
                  strands=strands), torch.device("cpu"))  # fmt: skip
    np.testing.assert_allclose(generic, want, rtol=0, atol=1e-4, equal_nan=True)


def _class_log_prob(classifier: SequenceTaskModel, seqs: list[str], k: int, both: bool):
    """log p(class k) per sequence from tokens (strands averaged as `attribute` defines it)."""
    ids, lengths = pad_sequences([encode(s) for s in seqs])
    with torch.no_grad():
        value = classifier.outputs(ids, lengths).double().log_softmax(-1)[:, k]
        if both:
            rc = reverse_complement_padded(ids, lengths)
            value = 0.5 * (value + classifier.outputs(rc, lengths).double().log_softmax(-1)[:, k])
    return value.numpy()


def test_ism_of_a_classifier_equals_brute_force(checkpoints, inputs, tmp_path) -> None:
    from goatdna.checkpoint import load_task_model

    got = run_ok("--checkpoint", checkpoints["cls"], "--sequences", inputs["fasta"], "--method",
                 "ism", "--target", "pos", "--batch-size", "7", "--out", tmp_path / "a.npz")  # fmt: skip
    classifier = load_task_model(checkpoints["cls"]).classifier
    for i, seq in enumerate(SEQS):
        mutants, where = [], []
        for p, ref in enumerate(seq):
            for b, base in enumerate("ACGT"):
                if ref != "N" and base != ref:
                    mutants.append(seq[:p] + base + seq[p + 1 :])
                    where.append((p, b))
        values = _class_log_prob(classifier, mutants, 1, True)
        ref_value = _class_log_prob(classifier, [seq], 1, True)[0]
        want = np.full((len(seq), 4), np.nan)
        for p, ref in enumerate(seq):
            if ref != "N":
                want[p, "ACGT".index(ref)] = 0.0
        rows, cols = np.array(where).T
        want[rows, cols] = values - ref_value
        np.testing.assert_allclose(got["attributions"][i, : len(seq)], want, atol=2e-5,
                                   equal_nan=True)  # fmt: skip
    assert list(got["names"]) == ["s0", "s1", "s2"] and list(got["lengths"]) == [24, 24, 30]
    assert list(got["sequences"]) == SEQS and str(got["target"]) == "pos"
    assert (got["attributions"][0, 24:] == 0).all()  # shorter records are zero-padded


def _onehot_grad_by_autograd(model: DNADecoder, seq: str, embeds_fn, lm: bool) -> np.ndarray:
    """d f / d one-hot by the chain rule through the embedding lookup, in float64: the gradient
    with respect to the looked-up embeddings (B, L, d) times (E[b] - E[N]) for each base. The
    log-likelihood also reads base t as the target of position t - 1: ``sum_t <x_t,
    log p(. | x_<t)>`` adds ``log p(b | x_<t)`` to d/dx[t, b]."""
    model = model.double()
    tokens = torch.from_numpy(encode(seq).astype(np.int64))[None]
    embeds = model.embed(tokens).detach().requires_grad_(True)  # (1, L, d)
    value = embeds_fn(model, tokens, embeds)
    (grad,) = torch.autograd.grad(value.sum(), embeds)
    weight = model.embed.weight.detach()
    out = (grad[0] @ (weight[:4] - weight[4]).T).numpy()  # (L, 4)
    if lm:
        with torch.no_grad():
            out[1:] += torch.log_softmax(model(tokens[:, :-1]), -1)[0, :, :4].numpy()
    return out


def test_saliency_equals_autograd_on_a_hand_built_model(checkpoints, inputs, tmp_path) -> None:
    """Forward strand, both targets: gradient x input and the centred gradient."""
    from goatdna.checkpoint import load_checkpoint, load_task_model

    lm = run_ok("--checkpoint", checkpoints["lm"], "--sequences", inputs["fasta"], "--method",
                "saliency", "--strands", "forward", "--out", tmp_path / "lm.npz")  # fmt: skip
    model = load_checkpoint(checkpoints["lm"]).model

    def loglik(m, tokens, embeds):
        logp = torch.log_softmax(m.logits(m.hidden(None, embeds=embeds[:, :-1])), -1)
        targets = tokens[:, 1:]
        known = targets < 4
        picked = logp.gather(-1, targets.clamp(max=3)[..., None])[..., 0]
        return (picked * known).sum()

    cls = run_ok("--checkpoint", checkpoints["cls"], "--sequences", inputs["fasta"], "--method",
                 "saliency", "--strands", "forward", "--target", "neg", "--out",
                 tmp_path / "cls.npz")  # fmt: skip
    classifier = load_task_model(checkpoints["cls"]).classifier.double()

    def class_neg(m, tokens, embeds):
        lengths = torch.tensor([tokens.shape[1]])
        return classifier.outputs(None, lengths, embeds=embeds).log_softmax(-1)[:, 0].sum()

    for got, m, fn in ((lm, model, loglik), (cls, classifier.model, class_neg)):
        is_lm = fn is loglik
        for i, seq in enumerate(SEQS):
            grad = _onehot_grad_by_autograd(m, seq, fn, is_lm)
            x = np.zeros((len(seq), 4))
            for p, ch in enumerate(seq):
                if ch != "N":
                    x[p, "ACGT".index(ch)] = 1
            np.testing.assert_allclose(got["attributions"][i, : len(seq)], grad * x, atol=1e-4)
            centred = grad - grad.mean(axis=1, keepdims=True)
            np.testing.assert_allclose(got["hypothetical"][i, : len(seq)], centred, atol=1e-4)
            assert np.abs(grad).max() > 0.05


@pytest.mark.parametrize(("kind", "target"), [("lm", "loglik"), ("lm", "base:12"),
                                              ("cls", "pos"), ("reg", None)])  # fmt: skip
def test_integrated_gradients_are_complete_at_64_steps(checkpoints, inputs, tmp_path, kind,
                                                       target) -> None:  # fmt: skip
    """sum(attributions) == f(x) - f(baseline) within 1e-3; for the zeros baseline f(baseline)
    is the all-N sequence's value, computed here from tokens."""
    from goatdna.checkpoint import load_checkpoint, load_task_model

    extra = ["--target", target] if target else []
    got = run_ok("--checkpoint", checkpoints[kind], "--sequences", inputs["fasta"], "--method",
                 "integrated-gradients", "--steps", "64", *extra, "--out", tmp_path / "a.npz")  # fmt: skip
    seqs = SEQS + ["N" * len(s) for s in SEQS]
    if kind == "lm":
        model = load_checkpoint(checkpoints[kind]).model
        rc = [s[::-1].translate(str.maketrans("ACGTN", "TGCAN")) for s in seqs]
        values = []
        for fwd, rev in zip(seqs, rc, strict=True):
            both = []
            for s in (fwd, rev):
                tokens = torch.from_numpy(encode(s).astype(np.int64))[None]
                with torch.no_grad():
                    logp = sequence_log_probs(model, tokens)[0].double()
                if target == "base:12":  # base 12 on each strand: offset 11, L - 12 of rc
                    at = 11 if s is fwd else len(s) - 12
                    logp = logp[at - 1 : at]
                both.append(float(logp.sum()))
            values.append(np.mean(both))
        values = np.array(values)
    else:
        classifier = load_task_model(checkpoints[kind]).classifier
        if kind == "cls":
            values = _class_log_prob(classifier, seqs, 1, True)
        else:
            ids, lengths = pad_sequences([encode(s) for s in seqs])
            values = []
            for s in seqs:
                ids, lengths = pad_sequences([encode(s)])
                with torch.no_grad():
                    both = classifier.outputs(ids, lengths) + classifier.outputs(
                        reverse_complement_padded(ids, lengths), lengths)  # fmt: skip
                values.append(float(both[0, 0]) / 2 * 3.0 + 2.0)
            values = np.array(values)
    n = len(SEQS)
    sums = got["attributions"].sum(axis=(1, 2))
    np.testing.assert_allclose(sums, values[:n] - values[n:], rtol=0, atol=1e-3)
    assert np.abs(values[:n] - values[n:]).max() > 0.1


def test_base_target_on_both_strands_is_score_tracks_value_of_that_base(
    checkpoints, inputs, tmp_path
) -> None:
    """`--target base:I --strands both` explains the value score-track writes for base I (one
    window holding the region): the same base on both strands, the last base its forward value
    alone (issue 40.4: base I was averaged with the reverse strand's base L + 1 - I)."""
    from goatdna.checkpoint import load_checkpoint
    from goatdna.inference.attribute import attribute_tokens, one_hot

    n = 19  # chrA's first 19 bases: no N
    track = tmp_path / "t.bw"
    res = invoke(["score-track", "--checkpoint", checkpoints["lm"], "--fasta", inputs["ref"],
                  "--region", f"chrA:1-{n}", "--context", n, "--out", track])  # fmt: skip
    assert res.exit_code == 0, res.output
    bw = pyBigWig.open(str(track))
    want = np.array(bw.values("chrA", 0, n))
    bw.close()
    model = load_checkpoint(checkpoints["lm"]).model
    x = torch.from_numpy(one_hot(encode(CONTIG[:n]))[None])
    for i in (2, 7, 12, n):
        target = language_model_target(model, f"base:{i}")
        with torch.no_grad():
            got = float(target.function("both")(x)[0])
        assert got == pytest.approx(want[i - 1], abs=1e-4), i
    assert abs(want[6] - want[n - 7]) > 1e-3  # base 7 and base L + 1 - 7 differ
    last = language_model_target(model, f"base:{n}")
    options = AttributeOptions("integrated-gradients", steps=8)
    (explained,) = attribute_tokens(last, [encode(CONTIG[:n])], options)
    attributions = explained.attributions
    assert np.isfinite(attributions).all() and np.abs(attributions).max() > 0


def test_uniform_baseline_is_complete_too(checkpoints, inputs) -> None:
    from goatdna.checkpoint import load_task_model
    from goatdna.inference.attribute import (
        attribute_tokens,
        baseline_of,
        one_hot,
        task_model_target,
    )

    loaded = load_task_model(checkpoints["cls"])
    target = task_model_target(loaded, "neg")
    options = AttributeOptions("integrated-gradients", baseline="uniform", steps=64)
    tokens = [encode(s) for s in SEQS]
    got = attribute_tokens(target, tokens, options)
    f = target.function("both")
    for t, (attributions, *_) in zip(tokens, got, strict=True):
        with torch.no_grad():
            x = torch.from_numpy(one_hot(t)[None])
            base = torch.from_numpy(baseline_of(options, t.size)[None])
            delta = float(f(x) - f(base))
        assert abs(attributions.sum() - delta) < 1e-3


def test_log_odds_target_is_log_p_over_one_minus_p(checkpoints, inputs, tmp_path) -> None:
    """``log-odds:pos`` = log p - log(1 - p) of ``pos`` (float64 from the same model's ``log p``),
    a name the output keeps; a class that does not exist after the prefix is one error line."""
    from goatdna.checkpoint import load_task_model
    from goatdna.inference.attribute import one_hot, task_model_target

    loaded = load_task_model(checkpoints["cls"])
    log_p, log_odds = task_model_target(loaded, "pos"), task_model_target(loaded, "log-odds:pos")
    assert log_odds.name == "log-odds:pos"
    x = torch.from_numpy(np.stack([one_hot(encode(s)) for s in SEQS[:2]]))
    with torch.no_grad():
        lp = log_p.one_strand(x).double().numpy()
        got = log_odds.one_strand(x).double().numpy()
    np.testing.assert_allclose(got, lp - np.log1p(-np.exp(lp)), rtol=0, atol=1e-5)
    out = tmp_path / "odds.npz"
    got = run_ok("--checkpoint", checkpoints["cls"], "--sequences", inputs["fasta"], "--method",
                 "ism", "--target", "log-odds:pos", "--out", out)  # fmt: skip
    assert str(got["target"]) == "log-odds:pos"
    result = invoke(["attribute", "--checkpoint", checkpoints["cls"], "--sequences",
                     inputs["fasta"], "--target", "log-odds:maybe", "--out", tmp_path / "no.npz"])  # fmt: skip
    assert result.exit_code == 2 and result.output.startswith("error: --target 'log-odds:maybe'")
    assert not (tmp_path / "no.npz").exists()


def test_bed_regions_give_a_track_in_genome_orientation(checkpoints, inputs, tmp_path) -> None:
    """A '-' region is explained as its reverse complement and its values land back on the
    genome reversed; the track holds `observed_contribution` of each base."""
    from goatdna.inference.attribute_run import observed_contribution

    track = tmp_path / "a.bw"
    got = run_ok("--checkpoint", checkpoints["cls"], "--fasta", inputs["ref"], "--bed",
                 inputs["bed"], "--method", "saliency", "--out", tmp_path / "a.npz", "--out",
                 track)  # fmt: skip
    assert list(got["chrom"]) == ["chrA", "chrB", "chrB"] and list(got["strand"]) == ["+", "+", "-"]
    rev = CONTIG[::-1]
    minus = rev[20:30][::-1].translate(str.maketrans("ACGTN", "TGCAN"))
    assert str(got["sequences"][2]) == minus
    bw = pyBigWig.open(str(track))
    for i, (chrom, start, end) in enumerate([("chrA", 0, 36), ("chrB", 2, 14), ("chrB", 20, 30)]):
        n = end - start
        want = got["attributions"][i, :n].sum(axis=1)
        if i == 2:
            want = want[::-1]
        np.testing.assert_allclose(np.array(bw.values(chrom, start, end)), want, atol=1e-6)
    bw.close()
    tokens = encode(SEQS[0])
    ism_values = np.zeros((24, 4))
    ism_values[np.arange(24), (tokens + 1) % 4] = -1.0  # one alternative costs 1, others 0
    hyp = ism_values - ism_values.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(observed_contribution("ism", ism_values, hyp, tokens), 0.25)


def test_a_truncated_minus_strand_region_lands_on_the_bases_the_model_read(
    checkpoints, inputs, tmp_path
) -> None:
    """A fine-tuned model with max_length 8 reads the first 8 bases of a 12-base '-' region's
    reverse complement, the genome's bases [end - 8, end); the track holds values there and
    nothing on the 4 bases it never read (issue 40.2: they landed at the region's start)."""
    from goatdna.inference.attribute_run import observed_contribution

    state = torch.load(checkpoints["cls"], weights_only=False)
    state["hyper_parameters"]["config"]["head"]["max_length"] = 8
    short = tmp_path / "short.ckpt"
    torch.save(state, short)
    bed = tmp_path / "cut.bed"
    bed.write_text("chrB\t2\t14\tplus\t0\t+\nchrB\t20\t32\tminus\t0\t-\n")
    track = tmp_path / "a.bw"
    got = run_ok("--checkpoint", short, "--fasta", inputs["ref"], "--bed", bed, "--method",
                 "saliency", "--out", tmp_path / "a.npz", "--out", track)  # fmt: skip
    genome = CONTIG[::-1]  # chrB
    read = [genome[2:10], genome[24:32][::-1].translate(str.maketrans("ACGTN", "TGCAN"))]
    assert list(got["sequences"]) == read and list(got["lengths"]) == [8, 8]
    bw = pyBigWig.open(str(track))
    for i, (start, end) in enumerate([(2, 14), (20, 32)]):
        values = observed_contribution("saliency", got["attributions"][i, :8],
                                       got["hypothetical"][i, :8], encode(read[i]))  # fmt: skip
        placed = np.array(bw.values("chrB", start, end))
        if i == 0:  # '+': the first 8 bases, in order
            want = np.concatenate([values, np.full(4, np.nan)])
        else:  # '-': the last 8 bases, genome orientation
            want = np.concatenate([np.full(4, np.nan), values[::-1]])
        np.testing.assert_allclose(placed, want, atol=1e-6)
        assert np.abs(values).max() > 0
    bw.close()


def test_a_killed_run_resumes_to_the_same_bytes(
    checkpoints, inputs, tmp_path, monkeypatch, one_thread
):
    """Every run on one thread (set as a user would: the CLI keeps torch's setting when
    OMP_NUM_THREADS is set), so the byte comparison does not hang on the machine's load."""
    from goatdna.inference import attribute_run
    from goatdna.workdir import work_dir_for

    monkeypatch.setenv("OMP_NUM_THREADS", "1")

    monkeypatch.setattr(attribute_run, "UNIT_SEQUENCES", 1)
    args = ["--checkpoint", checkpoints["cls"], "--sequences", inputs["fasta"], "--method",
            "integrated-gradients", "--steps", "8"]  # fmt: skip
    whole = tmp_path / "whole.npz"
    run_ok(*args, "--out", whole)

    class Killed(Exception):
        pass

    def crash(point: str, value: int) -> None:
        if value == 2:
            raise Killed

    monkeypatch.setattr(attribute_run, "crash_point", crash)
    cut = tmp_path / "cut.npz"
    res = invoke(["attribute", "--no-progress", *args, "--out", cut])
    assert isinstance(res.exception, Killed) and not cut.exists()
    assert len(list(work_dir_for(cut).glob("unit-*.npz"))) == 2
    refused = invoke(["attribute", "--no-progress", *args, "--out", cut])
    assert refused.exit_code == 2 and "--resume" in refused.output
    monkeypatch.setattr(attribute_run, "crash_point", lambda point, value: None)
    # written at another time of day: the bytes must not hold the clock (zip time stamps)
    later = types.SimpleNamespace(time=time.time, localtime=lambda *_: time.localtime(3e9))
    monkeypatch.setattr(zipfile, "time", later)
    run_ok(*args, "--out", cut, "--resume")
    assert cut.read_bytes() == whole.read_bytes() and not work_dir_for(cut).exists()


def _independent_class_delta(checkpoint: Path) -> np.ndarray:
    """f(x) - f(all N) of class 'pos' on both strands, from tokens (not the one-hot path)."""
    from goatdna.checkpoint import load_task_model

    classifier = load_task_model(checkpoint).classifier
    values = _class_log_prob(classifier, SEQS + ["N" * len(s) for s in SEQS], 1, True)
    return values[: len(SEQS)] - values[len(SEQS) :]


def test_integrated_gradients_record_and_warn_about_their_completeness(
    checkpoints, inputs, tmp_path
) -> None:
    """The .npz holds the baseline, and per sequence the steps, f(x) - f(baseline) and the gap
    |sum - delta| / |delta|; 4 steps miss 1% on this classifier (13-29%): one warning line;
    16 steps do not (issue 40.5: nothing recorded, the docs promised 1e-3 at 64 steps)."""
    args = ["attribute", "--no-progress", "--checkpoint", checkpoints["cls"], "--sequences",
            inputs["fasta"], "--method", "integrated-gradients", "--target", "pos"]  # fmt: skip
    res = invoke([*args, "--steps", "4", "--out", tmp_path / "four.npz"])
    assert res.exit_code == 0, res.output
    warnings = [line for line in res.output.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "3 of 3 sequences" in warnings[0], res.output
    assert "--steps auto" in warnings[0]
    got = np.load(tmp_path / "four.npz")
    delta = _independent_class_delta(checkpoints["cls"])
    np.testing.assert_allclose(got["delta"], delta, rtol=0, atol=1e-5)
    sums = got["attributions"].sum(axis=(1, 2), dtype=np.float64)
    np.testing.assert_allclose(got["completeness_gap"], np.abs(sums - delta) / np.abs(delta),
                               rtol=1e-3, atol=1e-6)  # fmt: skip
    assert got["completeness_gap"].min() > 0.01
    assert str(got["baseline"]) == "zeros" and list(got["steps"]) == [4, 4, 4]
    res = invoke([*args, "--steps", "16", "--out", tmp_path / "sixteen.npz"])
    assert res.exit_code == 0 and "warning:" not in res.output, res.output
    assert np.load(tmp_path / "sixteen.npz")["completeness_gap"].max() < 1e-4


def test_integrated_gradients_equal_captums_in_bounded_passes(checkpoints) -> None:
    """goatdna's passes of a few path nodes give Captum's `IntegratedGradients` (Gauss-Legendre,
    every node of the batch in one pass): the same rule, only bounded."""
    from captum.attr import IntegratedGradients

    from goatdna.checkpoint import load_task_model
    from goatdna.inference.attribute import attribute_tokens, one_hot, task_model_target

    target = task_model_target(load_task_model(checkpoints["cls"]), "pos")
    tokens = [encode(s) for s in SEQS[:2]]
    options = AttributeOptions("integrated-gradients", steps=12, batch_size=4)
    got = attribute_tokens(target, tokens, options)
    x = torch.from_numpy(np.stack([one_hot(t) for t in tokens]))
    want = IntegratedGradients(target.function("both")).attribute(
        x, baselines=torch.zeros_like(x), n_steps=12
    )
    for i, explained in enumerate(got):
        np.testing.assert_allclose(explained.attributions, want[i].numpy(), rtol=0, atol=1e-5)
        assert explained.steps == 12


def test_steps_auto_doubles_each_sequence_until_complete(checkpoints, inputs, tmp_path,
                                                         monkeypatch) -> None:  # fmt: skip
    """From 2 steps (64 by default) each sequence doubles until its gap is within --tolerance
    (this classifier: 8 steps for two of them, 16 for the first), and no warning is left."""
    from goatdna.inference import attribute

    monkeypatch.setattr(attribute, "AUTO_FIRST_STEPS", 2)
    res = invoke(["attribute", "--no-progress", "--checkpoint", checkpoints["cls"], "--sequences",
                  inputs["fasta"], "--method", "integrated-gradients", "--target", "pos",
                  "--steps", "auto", "--tolerance", "1e-3", "--out", tmp_path / "a.npz"])  # fmt: skip
    assert res.exit_code == 0 and "warning:" not in res.output, res.output
    got = np.load(tmp_path / "a.npz")
    assert list(got["steps"]) == [16, 8, 8]
    delta = _independent_class_delta(checkpoints["cls"])
    sums = got["attributions"].sum(axis=(1, 2), dtype=np.float64)
    assert (np.abs(sums - delta) / np.abs(delta) <= 1e-3).all()


def test_passes_hold_at_most_batch_size_rows_and_memory_bound_them(checkpoints, monkeypatch
                                                                  ) -> None:  # fmt: skip
    """Integrated gradients and ISM run at most --batch-size rows per pass (Captum ran every
    path step of a batch in one pass: 3 x 8 rows here), fewer where the memory estimate says
    so; progress is told per position, after every pass (issue 40.6)."""
    from goatdna.checkpoint import load_checkpoint, load_task_model
    from goatdna.inference import memory
    from goatdna.inference.attribute import Target, attribute_tokens, row_bytes, task_model_target

    target = task_model_target(load_task_model(checkpoints["cls"]), "pos")
    rows: list[int] = []

    def spy(x: torch.Tensor) -> torch.Tensor:
        rows.append(x.shape[0])
        return target.one_strand(x)

    spied = Target("pos", spy, config=target.config)
    tokens = [encode(s) for s in SEQS[:2]]  # 24 bases each
    told: list[int] = []
    options = AttributeOptions("integrated-gradients", steps=8, batch_size=5)
    attribute_tokens(spied, tokens, options, advance=told.append)
    assert max(rows) <= 5 and sum(told) == 48 and len(told) == 4, (rows, told)  # 2 nodes a pass
    rows.clear()
    told.clear()
    attribute_tokens(spied, tokens[:1], AttributeOptions("ism", batch_size=6),
                     advance=told.append)  # fmt: skip
    assert max(rows) <= 6 and sum(told) == 24 and len(told) >= 12, (rows, told)
    lm = language_model_target(load_checkpoint(checkpoints["lm"]).model, "loglik")
    told.clear()  # mutagenesis' machinery: 2 positions (groups of 4 rows) per call
    attribute_tokens(lm, tokens[:1], AttributeOptions("ism", batch_size=8), advance=told.append)
    assert told == [2] * 12, told
    assert target.config is not None
    two = 2 * row_bytes(target.config, 24, "integrated-gradients", "both")
    monkeypatch.setattr(memory, "MEMORY_BOUND_BYTES", two + 1)
    rows.clear()
    attribute_tokens(spied, tokens, AttributeOptions("integrated-gradients", steps=8),
                     advance=told.append)  # fmt: skip
    assert max(rows) == 2, rows


def test_a_sequence_too_long_for_one_pass_is_refused_up_front(checkpoints, inputs, tmp_path,
                                                               monkeypatch) -> None:  # fmt: skip
    """One `error:` line naming the sequence, the bound and what to change, before any work
    (no work folder, no output)."""
    from goatdna.inference import memory
    from goatdna.workdir import work_dir_for

    monkeypatch.setattr(memory, "MEMORY_BOUND_BYTES", 64 * 2**10)  # 24 bases need ~86 KiB
    out = tmp_path / "a.npz"
    res = invoke(["attribute", "--no-progress", "--checkpoint", checkpoints["lm"], "--sequences",
                  inputs["fasta"], "--method", "saliency", "--out", out])  # fmt: skip
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert res.exit_code == 2 and len(lines) == 1, res.output
    assert lines[0].startswith("error: --sequences: sequence s2 (30 bases)") and "GiB" in lines[0]
    assert not out.exists() and not work_dir_for(out).exists()


def test_a_stop_before_any_unit_finished_leaves_nothing_to_resume(
    checkpoints, inputs, tmp_path, monkeypatch
) -> None:
    """SIGTERM at the first progress report (after one pass) stops the run there, exit 143;
    with no unit saved the work folder goes, so the same command runs again without --resume
    (issue 40.6: a leftover folder refused the next run)."""
    import os
    import signal
    from contextlib import contextmanager

    from goatdna.inference import attribute_run
    from goatdna.workdir import work_dir_for

    passes: list[int] = []

    @contextmanager
    def progress(*_args, **_kwargs):
        def advance(n: int) -> None:
            passes.append(n)
            if len(passes) == 1:
                os.kill(os.getpid(), signal.SIGTERM)

        yield advance

    monkeypatch.setattr(attribute_run, "rank_zero_progress", progress)
    out = tmp_path / "a.npz"
    args = ["attribute", "--checkpoint", checkpoints["cls"], "--sequences", inputs["fasta"],
            "--method", "ism", "--batch-size", "6", "--out", out]  # fmt: skip
    res = invoke(args)
    assert res.exit_code == 143 and "rerun the same command" in res.output, res.output
    assert "--resume" not in res.output and len(passes) == 1
    assert not out.exists() and not work_dir_for(out).exists()
    monkeypatch.undo()
    assert invoke(args).exit_code == 0 and out.exists()


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--method", "deeplift"], "--method 'deeplift'"),
        (["--target", "maybe"], "--target 'maybe'"),
        (["--target", "base:1"], "--target 'base:1'"),
        (["--strands", "up"], "--strands 'up'"),
        (["--baseline", "shuffle"], "--baseline 'shuffle'"),
        (["--steps", "0"], "--steps 0"),
        (["--steps", "100000000"], "--steps 100000000"),
        (["--steps", "lots"], "--steps 'lots'"),
        (["--tolerance", "0"], "--tolerance"),
        (["--batch-size", "0"], "--batch-size 0"),
        (["--out", "x.tsv"], "unknown extension"),
        (["--out", "x.bw"], "needs --fasta with --bed"),
        (["--bed", "r.bed"], "not both"),
        (["--checkpoint", "missing.ckpt"], "checkpoint not found"),
    ],
)
def test_bad_input_is_one_error_line(checkpoints, inputs, tmp_path, monkeypatch, extra, needle):
    monkeypatch.chdir(tmp_path)
    Path("r.bed").write_text("chrA\t0\t10\n")
    base = {"--checkpoint": str(checkpoints["lm"]), "--sequences": str(inputs["fasta"]),
            "--out": "a.npz"}  # fmt: skip
    args = [a for k, v in base.items() if k not in extra for a in (k, v)]
    if extra[0] == "--out" and extra[1] == "x.bw":
        args += ["--out", "a.npz"]
    result = invoke(["attribute", "--no-progress", *args, *extra])
    assert result.exit_code == 2, (result.output, result.exception)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], lines
    assert not list(tmp_path.glob("*.npz")) and not list(tmp_path.glob("*.bw"))


def test_a_class_of_a_regression_model_and_an_existing_output_are_refused(
    checkpoints, inputs, tmp_path
) -> None:
    out = tmp_path / "a.npz"
    res = invoke(["attribute", "--checkpoint", checkpoints["reg"], "--sequences", inputs["fasta"],
                  "--target", "pos", "--out", out])  # fmt: skip
    assert res.exit_code == 2 and "regression model" in res.output and not out.exists()
    out.write_bytes(b"old")
    res = invoke(["attribute", "--checkpoint", checkpoints["lm"], "--sequences", inputs["fasta"],
                  "--out", out])  # fmt: skip
    assert res.exit_code == 2 and "--force" in res.output and out.read_bytes() == b"old"


def test_check_outputs_refuses_an_out_that_cannot_be_written(tmp_path) -> None:
    """The library checks the files it will write, not only their formats, before any work
    (the command makes this one call)."""
    from goatdna.errors import GoatDNAError
    from goatdna.inference.attribute_run import check_outputs

    folder = tmp_path / "a.npz"
    folder.mkdir()
    with pytest.raises(GoatDNAError, match=r"--out .*a\.npz is a folder, not a file"):
        check_outputs([folder], bed_input=False)
    assert check_outputs([tmp_path / "b.npz"], bed_input=False) == ["npz"]
