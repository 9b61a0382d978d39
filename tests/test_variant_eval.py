"""`goatdna eval-variants`: metrics equal scikit-learn (a test-only dependency), ties included;
joins of scores with labels; the synthetic truth set that the demo's models separate."""

from __future__ import annotations

import gzip
import math

import numpy as np
import pytest
from helpers import assert_one_error_line, invoke, tiny_config

from goatdna.analysis import variant_metrics as vm

sklearn_metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn is in the dev extra")


def _cases():
    rng = np.random.default_rng(0)
    yield np.array([1, 0, 1, 0, 1]), np.array([0.9, 0.1, 0.8, 0.4, 0.2])  # crafted
    yield np.array([1, 0, 1, 0]), np.array([0.5, 0.5, 0.5, 0.5])  # all tied
    yield np.array([1, 1, 0, 0, 0, 1]), np.array([3.0, 1.0, 1.0, 2.0, 3.0, 1.0])  # ties across
    yield np.array([0, 0, 1]), np.array([1.0, 2.0, 3.0])  # perfect
    yield np.array([1, 0, 0]), np.array([1.0, 2.0, 3.0])  # reversed
    for n in (10, 57, 400):
        labels = rng.random(n) < rng.uniform(0.1, 0.6)
        labels[:2] = [True, False]
        scores = np.round(rng.normal(size=n) + labels, 1)  # rounded: many ties
        yield labels.astype(int), scores


@pytest.mark.parametrize("case", list(_cases()))
def test_binary_metrics_equal_sklearn(case) -> None:
    labels, scores = case
    assert vm.auroc(labels, scores) == pytest.approx(
        sklearn_metrics.roc_auc_score(labels, scores), abs=1e-12
    )
    assert vm.average_precision(labels, scores) == pytest.approx(
        sklearn_metrics.average_precision_score(labels, scores), abs=1e-12
    )
    fpr, tpr, _ = sklearn_metrics.roc_curve(labels, scores, drop_intermediate=False)
    ours = vm.roc_points(labels, scores)
    np.testing.assert_allclose(ours[0], fpr)
    np.testing.assert_allclose(ours[1], tpr)


def test_correlations_equal_scipy_and_pairwise_accuracy_brute_force() -> None:
    from scipy.stats import pearsonr, spearmanr

    rng = np.random.default_rng(1)
    x = np.round(rng.normal(size=200), 1)
    y = np.round(x + rng.normal(size=200), 1)
    assert vm.spearman(x, y) == pytest.approx(spearmanr(x, y)[0], abs=1e-12)
    assert vm.pearson(x, y) == pytest.approx(pearsonr(x, y)[0], abs=1e-12)
    assert math.isnan(vm.spearman(x, np.ones(200)))
    labels = rng.random(300) < 0.3
    scores = np.round(rng.normal(size=300) + labels, 1)
    groups = rng.integers(0, 40, 300)
    right = pairs = 0.0
    for g in np.unique(groups):
        for i in np.flatnonzero((groups == g) & labels):
            for j in np.flatnonzero((groups == g) & ~labels):
                pairs += 1
                right += 1.0 if scores[i] > scores[j] else 0.5 if scores[i] == scores[j] else 0.0
    assert vm.pairwise_accuracy(labels, scores, groups) == pytest.approx(right / pairs, abs=1e-12)
    # one group holding everything: the AUROC
    one = np.zeros(300, dtype=int)
    assert vm.pairwise_accuracy(labels, scores, one) == pytest.approx(vm.auroc(labels, scores))
    assert math.isnan(vm.pairwise_accuracy(labels, scores, np.arange(300)))


def test_bootstrap_intervals_are_seeded_and_cover_the_value() -> None:
    rng = np.random.default_rng(2)
    labels = rng.random(300) < 0.3
    scores = rng.normal(size=300) + labels
    a = vm.bootstrap_binary(vm.auroc, labels, scores, 200, seed=3)
    b = vm.bootstrap_binary(vm.auroc, labels, scores, 200, seed=3)
    assert a == b and a.low < a.value < a.high
    assert a.high - a.low < 0.2
    c = vm.bootstrap_paired(vm.spearman, scores, scores + rng.normal(size=300), 200, seed=3)
    assert c.low < c.value < c.high
    groups = np.arange(300) // 5
    d = vm.bootstrap_grouped(labels, scores, groups, 200, seed=3)
    assert d.low < d.value < d.high


# ---------------------------------------------------------------- the CLI: joins, counts, outputs

import json  # noqa: E402
import os  # noqa: E402
from pathlib import Path  # noqa: E402

import pandas as pd  # noqa: E402


def _scores(tmp_path: Path) -> Path:
    """A score-variants-like table: 40 alleles, 4 not scored, labels carried."""
    rng = np.random.default_rng(4)
    n = 40
    label = (np.arange(n) % 3 == 0).astype(int)
    frame = pd.DataFrame({
        "chrom": ["20"] * n, "pos": np.arange(n) * 10 + 1, "ref": ["A"] * n, "alt": ["G"] * n,
        "label": label, "effect": rng.normal(size=n), "subset": np.where(np.arange(n) < 20, "x", "y"),
        "group": [f"g{i // 4}" for i in range(n)],
        "llr": np.round(-label + rng.normal(size=n), 2), "status": ["ok"] * n,
    })  # fmt: skip
    frame.loc[[3, 7], "status"] = "ref_mismatch"
    frame.loc[[3, 7, 11, 13], "llr"] = np.nan
    frame.loc[11, "status"] = "too_long"
    frame.loc[13, "status"] = "symbolic"
    path = tmp_path / "scores.tsv"
    frame.to_csv(path, sep="\t", index=False)
    return path


def _invoke(*args: str):
    res = invoke(["eval-variants", *args])
    assert res.exit_code == 0, res.output + str(res.exception)
    return res


def test_eval_cli_counts_every_row_and_equals_sklearn(tmp_path: Path) -> None:
    scores = _scores(tmp_path)
    out, plots = tmp_path / "m.json", tmp_path / "plots"
    res = _invoke("--scores", str(scores), "--subset", "subset", "--match-group", "group",
                  "--out", str(out), "--plots", str(plots), "--bootstrap", "50")  # fmt: skip
    assert (
        "40 rows: 36 evaluated, 4 unscored (ref_mismatch 2, symbolic 1, too_long 1)" in res.stdout
    )
    result = json.loads(out.read_text())
    assert result["unscored"] == {"ref_mismatch": 2, "symbolic": 1, "too_long": 1}
    assert result["evaluated"] == 36 and result["unlabelled"] == 0 and result["kind"] == "binary"
    table = pd.read_csv(scores, sep="\t")
    ok = table[table.status == "ok"]
    by = {(m["subset"], m["metric"]): m for m in result["metrics"]}
    assert by["all", "auroc"]["value"] == pytest.approx(
        sklearn_metrics.roc_auc_score(ok.label, -ok.llr)
    )
    assert by["all", "auprc"]["value"] == pytest.approx(
        sklearn_metrics.average_precision_score(ok.label, -ok.llr)
    )
    x = ok[ok.subset == "x"]
    assert by["x", "auroc"]["value"] == pytest.approx(
        sklearn_metrics.roc_auc_score(x.label, -x.llr)
    )
    assert by["all", "pairwise_accuracy"]["n"] == 36
    assert by["all", "auroc"]["low"] <= by["all", "auroc"]["value"] <= by["all", "auroc"]["high"]
    assert (plots / "roc.png").stat().st_size > 1000 and (plots / "pr.png").is_file()
    # the sign is the user's: |llr| and llr give other numbers, stated in the output
    flipped = _invoke("--scores", str(scores), "--score", "llr", "--bootstrap", "0",
                      "--out", str(tmp_path / "f.tsv"))  # fmt: skip
    assert "score llr" in flipped.stdout
    metrics = pd.read_csv(tmp_path / "f.tsv", sep="\t")
    auroc_llr = metrics[metrics.metric == "auroc"].value.iloc[0]
    assert auroc_llr == pytest.approx(1 - by["all", "auroc"]["value"], abs=1e-6)
    # continuous label: Spearman and Pearson against scipy
    cont = _invoke("--scores", str(scores), "--label", "effect", "--bootstrap", "50",
                   "--out", str(tmp_path / "c.json"))  # fmt: skip
    assert "continuous" in cont.stdout
    c = {m["metric"]: m for m in json.loads((tmp_path / "c.json").read_text())["metrics"]}
    from scipy.stats import spearmanr

    assert c["spearman"]["value"] == pytest.approx(spearmanr(-ok.llr, ok.effect)[0])


def test_labels_from_a_table_and_from_a_vcf_info_field(tmp_path: Path) -> None:
    scores = _scores(tmp_path)
    table = pd.read_csv(scores, sep="\t", dtype={"chrom": str})
    labels = table[["chrom", "pos", "ref", "alt"]].iloc[:30].copy()  # 10 alleles without a label
    terms = ["Pathogenic", "Benign", "Uncertain_significance", "Likely_pathogenic"]
    labels["CLNSIG"] = [terms[i % 4] for i in range(30)]
    labels.to_csv(tmp_path / "labels.csv", index=False)
    source = pd.read_csv(scores, sep="\t").drop(columns=["label"])
    source.to_csv(tmp_path / "bare.tsv", sep="\t", index=False)
    common = ["--scores", str(tmp_path / "bare.tsv"), "--label", "CLNSIG",
              "--positive", "Pathogenic,Likely_pathogenic", "--negative", "Benign",
              "--bootstrap", "0"]  # fmt: skip
    res = _invoke(
        *common, "--labels", str(tmp_path / "labels.csv"), "--out", str(tmp_path / "t.json")
    )
    from_table = json.loads((tmp_path / "t.json").read_text())
    # 36 scored: 10 without a label row, and Uncertain_significance is in neither list
    ok = table.status == "ok"
    has_row = np.arange(40) < 30
    uncertain = np.arange(40) % 4 == 2
    assert from_table["unlabelled"] == int((ok & ~(has_row & ~uncertain)).sum())
    assert from_table["evaluated"] == int((ok & has_row & ~uncertain).sum())
    assert "unlabelled" in res.stdout
    # the same labels as INFO/CLNSIG of a VCF
    header = ["##fileformat=VCFv4.2", "##contig=<ID=20>",
              '##INFO=<ID=CLNSIG,Number=.,Type=String,Description="clinical significance">',
              "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]  # fmt: skip
    rows = [f"20\t{r.pos}\t.\tA\tG\t.\t.\tCLNSIG={r.CLNSIG}" for r in labels.itertuples()]
    (tmp_path / "labels.vcf").write_text("\n".join(header + rows) + "\n")
    _invoke(*common, "--labels", str(tmp_path / "labels.vcf"), "--out", str(tmp_path / "v.json"))
    from_vcf = json.loads((tmp_path / "v.json").read_text())
    assert from_vcf["metrics"] == from_table["metrics"]


def _bad(args: list[str], message: str) -> None:
    assert_one_error_line(invoke(["eval-variants", *args]), message)


def test_bad_eval_inputs_are_one_line_errors(tmp_path: Path) -> None:
    scores = str(_scores(tmp_path))
    _bad(["--scores", scores, "--label", "nothing"], "no column 'nothing'")
    _bad(["--scores", scores, "--label", "subset"], "holds text; name the positive values")
    _bad(["--scores", scores, "--score", "-lrr"], "no column 'lrr'")
    _bad(["--scores", scores, "--out", str(tmp_path / "m.csv")], "must end in .tsv or .json")
    _bad(["--scores", str(tmp_path / "absent.tsv")], "file not found")
    _bad(["--scores", str(tmp_path / "absent.vcf.gz")], "--scores")  # the option it came by
    _bad(["--scores", scores, "--out", f"{scores}/m.tsv"], "is a file, so the file cannot")
    _bad(["--scores", scores, "--kind", "ordinal"], "--kind 'ordinal'")
    dup = tmp_path / "dup.tsv"
    dup.write_text("chrom\tpos\tref\talt\tlabel\n20\t1\tA\tG\t1\n20\t1\tA\tG\t0\n")
    _bad(["--scores", scores, "--labels", str(dup)], "row 2 repeats the allele")
    # a --positive or --negative that names no label value: every metric n/a, with exit 0
    _bad(["--scores", scores, "--positive", "Pathogenic"],
         "--positive Pathogenic: no row's --label 'label' is one of these; its values are 0, 1")  # fmt: skip
    _bad(["--scores", scores, "--label", "subset", "--positive", "x", "--negative", "z,w"],
         "--negative z,w: no row's --label 'subset' is one of these; its values are x, y")  # fmt: skip
    _bad(["--scores", scores, "--label", "group", "--positive", "g"],
         "its values are g0, g1, g2, g3, g4, g5, g6, g7, ... (10 values)")  # fmt: skip
    out = tmp_path / "exists.json"
    out.write_text("{}")
    _bad(["--scores", scores, "--out", str(out)], "exists; pass --force")
    assert out.read_text() == "{}"


# ---------------------------------------------------------------- labelled data with known truth


def test_variant_task_is_deterministic_and_true_to_its_definition(synthetic_shards, tmp_path):
    fasta = synthetic_shards / "synthetic.fa"
    outs = [tmp_path / "a.tsv", tmp_path / "b.tsv"]
    for out in outs:
        res = invoke(["make-variant-task", "--fasta", str(fasta), "--out", str(out),
                                  "--positives", "80"])  # fmt: skip
        assert res.exit_code == 0, res.output + str(res.exception)
    assert outs[0].read_bytes() == outs[1].read_bytes()
    task = pd.read_csv(outs[0], sep="\t")
    from goatdna.io.fasta import read_fasta_text

    contigs = dict(read_fasta_text(fasta))
    assert set(task.element) == {"homopolymer", "new_cpg", "background"}
    assert (task.label == (task.element != "background")).all()
    assert task.label.sum() == 80 and (task.label == 0).sum() == 240
    for row in task.itertuples():
        seq = contigs[row.chrom]
        i = row.pos - 1
        assert i >= int(len(seq) * 0.9)  # held out of training
        assert seq[i].upper() == row.ref != row.alt
        if row.element == "homopolymer":  # soft-masked, inside a run of one base
            assert seq[i].islower()
            assert (
                seq[i - 1 : i + 2].upper() == row.ref * 3
                or row.ref * 4 in seq[i - 3 : i + 4].upper()
            )
        else:  # background: no soft-masked base or N within 50
            assert seq[i - 50 : i + 51].isupper() and "N" not in seq[i - 50 : i + 51]
            created = seq[i - 1] + row.alt == "CG" or row.alt + seq[i + 1] == "CG"
            assert created == (row.element == "new_cpg")
            assert "CG" not in seq[i - 1 : i + 2] or row.element == "new_cpg"
    res = invoke(["make-variant-task", "--fasta", str(fasta), "--out", str(outs[0])])
    assert res.exit_code == 2 and "exists; pass --force" in res.stderr
    below_a_file = outs[0] / "task.tsv"  # --out under a file: one line before any work
    res = invoke(["make-variant-task", "--fasta", str(fasta), "--out", str(below_a_file)])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "is a file, so the file cannot be written below it" in res.stderr
    from goatdna.locking import folder_lock

    held = tmp_path / "held.tsv"  # another run writes it: refused at once, nothing written
    with folder_lock(held, "--out"):
        res = invoke(["make-variant-task", "--fasta", str(fasta), "--out", str(held)])
    assert res.exit_code == 2 and "is in use" in res.stderr and not held.exists()


def test_demo_models_separate_the_synthetic_truth(
    synthetic_shards, tiny_runs, tmp_path, one_thread
):
    """score-variants -> eval-variants on the task: the tiny GOAT model separates it clearly."""
    fasta = synthetic_shards / "synthetic.fa"
    task, scores, metrics = tmp_path / "task.tsv", tmp_path / "scores.tsv", tmp_path / "m.json"
    for args in (
        ["make-variant-task", "--fasta", str(fasta), "--out", str(task), "--positives", "100"],
        ["score-variants", "-c", str(tiny_runs["goat"] / "checkpoints" / "best.ckpt"),
         "--fasta", str(fasta), "--variants", str(task), "--out", str(scores)],
        ["eval-variants", "--scores", str(scores), "--match-group", "match_group",
         "--subset", "gc_band", "--bootstrap", "200", "--out", str(metrics)],
    ):  # fmt: skip
        res = invoke(args)
        assert res.exit_code == 0, res.output + str(res.exception)
    result = json.loads(metrics.read_text())
    by = {(m["subset"], m["metric"]): m for m in result["metrics"]}
    print({k: round(v["value"], 3) for k, v in by.items()})  # the numbers for the docs
    assert result["evaluated"] == 400
    assert by["all", "auroc"]["value"] > 0.8 and by["all", "auroc"]["low"] > 0.7
    assert by["all", "pairwise_accuracy"]["value"] > 0.75


@pytest.mark.shared_data
def test_1000_genomes_singletons_as_a_weak_label(chr20_reference, kgp_vcf, tmp_path, one_thread):
    """The shared chr20 sample: INFO/AC == 1 (singleton) against the rest, from the VCF itself.

    A random-init model knows nothing of human DNA, so the AUROC is whatever it is; the test
    proves the path (VCF INFO labels, per-ALT values, unscored symbolic alleles counted)."""
    import pysam
    import torch

    from goatdna.checkpoint import save_checkpoint
    from goatdna.configfile import to_dict
    from goatdna.model import DNADecoder

    torch.manual_seed(0)
    config = tiny_config(train_length=16)
    ckpt = save_checkpoint(tmp_path / "m.ckpt", DNADecoder(config), {"model": to_dict(config)})
    head = tmp_path / "head.vcf.gz"
    with pysam.VariantFile(str(kgp_vcf)) as src:
        dst = pysam.VariantFile(str(head), "wz", header=src.header)
        for i, record in enumerate(src):
            if i >= 3000:
                break
            dst.write(record)
        dst.close()
    pysam.tabix_index(str(head), preset="vcf", force=True)
    scores, metrics = tmp_path / "kgp.tsv", tmp_path / "kgp.json"
    for args in (
        ["score-variants", "-c", str(ckpt), "--fasta", str(chr20_reference), "--variants",
         str(head), "--out", str(scores), "--window", "16", "--batch-size", "512"],
        ["eval-variants", "--scores", str(scores), "--labels", str(head), "--label", "AC",
         "--positive", "1", "--bootstrap", "100", "--out", str(metrics)],
    ):  # fmt: skip
        res = invoke(args)
        assert res.exit_code == 0, res.output + str(res.exception)
    result = json.loads(metrics.read_text())
    table = pd.read_csv(scores, sep="\t")
    assert result["rows"] == len(table)
    assert result["evaluated"] + sum(result["unscored"].values()) == len(table)
    assert result["unlabelled"] == 0
    auroc = next(m for m in result["metrics"] if m["metric"] == "auroc")
    print(f"1000 Genomes singletons, random-init model: AUROC {auroc['value']:.3f}")
    with pysam.VariantFile(str(head)) as handle:
        ac = [r.info["AC"][i] for r in handle for i in range(len(r.alts))]
    ok = (table.status == "ok").to_numpy()
    singleton = np.array(ac)[ok] == 1
    assert auroc["n_positive"] == int(singleton.sum()) > 100
    assert auroc["value"] == pytest.approx(sklearn_metrics.roc_auc_score(singleton, -table.llr[ok]))


def test_variant_task_warns_without_planted_truth_and_when_short(synthetic_shards, tmp_path):
    """Before: a non-synthetic FASTA, or a --held-out that leaves a handful of positions, gave a
    task without a word (labels without truth; 3 positives where 200 were asked)."""
    rng = np.random.default_rng(4)
    pieces = []
    for _ in range(40):  # background with soft-masked homopolymer runs, as a real genome has
        pieces.append("".join(rng.choice(list("ACGT"), 400)) + rng.choice(list("acgt")) * 20)
    plain = tmp_path / "real.fa"
    plain.write_text(">chr1\n" + "".join(pieces) + "\n")
    out = tmp_path / "task.tsv"
    res = invoke(["make-variant-task", "--fasta", str(plain), "--out", str(out),
                              "--positives", "200", "--held-out", "0.01"])  # fmt: skip
    assert res.exit_code == 0, res.output + str(res.exception)
    assert "no planted truth" in res.stderr
    made = int(pd.read_csv(out, sep="\t").label.sum())
    assert made < 200 and f"made {made} positives" in res.stderr
    synthetic = tmp_path / "syn.tsv"
    res = invoke(["make-variant-task", "--fasta", str(synthetic_shards / "synthetic.fa"),
                              "--out", str(synthetic), "--positives", "20"])  # fmt: skip
    assert res.exit_code == 0 and "warning" not in res.stderr, res.stderr


# ----------------------------------------------------------------------------- refused inputs


def _fail(*args: str) -> str:
    return assert_one_error_line(invoke(["eval-variants", *args]))


def _variant_table(tmp_path: Path, **columns) -> Path:
    frame = pd.read_csv(_scores(tmp_path), sep="\t")
    for name, values in columns.items():
        frame[name] = values
    path = tmp_path / "edited.tsv"
    frame.to_csv(path, sep="\t", index=False)
    return path


def test_ambiguous_labels_scores_and_groups_are_refused_in_one_line(tmp_path: Path) -> None:
    n = 40
    effect = np.random.default_rng(0).normal(size=n)
    stray = (np.arange(n) % 3 == 0).astype(int)
    stray[5] = 2
    table = _variant_table(tmp_path, effect=effect, signed=np.where(np.arange(n) % 3, -1, 1),
                           stray=stray, gene=["BRCA1"] * n)  # fmt: skip
    s = ["--scores", str(table), "--bootstrap", "0"]
    # a continuous label has no pairs to compare within a match group
    assert "--match-group 'group'" in _fail(*s, "--label", "effect", "--match-group", "group")
    # -1/1: two values, but which is positive is the user's to say
    line = _fail(*s, "--label", "signed")
    assert "two values (-1, 1)" in line and "--positive 1" in line
    # a text column as the score is not n/a with exit 0
    assert "column 'gene' holds text ('BRCA1' in row 1)" in _fail(*s, "--score", "gene")
    # one resample: an "interval" that need not contain the estimate
    assert "at least 40" in _fail("--scores", str(table), "--bootstrap", "1")
    assert "at least 40" in _fail("--scores", str(table), "--bootstrap", "39")
    # --seed -1 and an out-of-range --bootstrap are refused by the shared range check
    assert "--seed" in _fail(*s, "--seed", "-1")
    assert "--bootstrap" in _fail("--scores", str(table), "--bootstrap", "100000000")
    # a 0/1 label with a stray 2 is not silently read as continuous: a note says so
    res = invoke(["eval-variants", *s, "--label", "stray"])
    assert res.exit_code == 0, res.output
    assert "note: --label 'stray' takes 3 values (0, 1, 2)" in res.output
    assert "continuous" in res.output


def test_empty_subset_and_group_cells_count_in_all_only(tmp_path: Path) -> None:
    frame = pd.read_csv(_scores(tmp_path), sep="\t")
    frame.loc[[0, 1, 2, 4], "group"] = None  # g0 keeps only row 3 (no pair left in it)
    frame.loc[[5, 6], "subset"] = None
    path = tmp_path / "holes.tsv"
    frame.to_csv(path, sep="\t", index=False)
    out = tmp_path / "m.json"
    _invoke("--scores", str(path), "--subset", "subset", "--match-group", "group",
            "--bootstrap", "0", "--out", str(out))  # fmt: skip
    metrics = json.loads(out.read_text())["metrics"]
    by = {(m["subset"], m["metric"]): m for m in metrics}
    ok = frame[frame.status == "ok"]
    assert by["all", "auroc"]["n"] == len(ok)  # empty cells still count in "all"
    assert by["x", "auroc"]["n"] + by["y", "auroc"]["n"] == len(ok) - 2
    assert by["all", "pairwise_accuracy"]["n"] == int(ok.group.notna().sum())
    assert {m["subset"] for m in metrics} == {"all", "x", "y"}


def test_plots_are_checked_before_any_work(tmp_path: Path) -> None:
    scores = _scores(tmp_path)
    a_file = tmp_path / "plots.png"
    a_file.write_text("not a folder")
    line = _fail("--scores", str(scores), "--bootstrap", "0", "--plots", str(a_file))
    assert "--plots" in line and "is a file" in line
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):  # root writes anywhere: nothing to prove here
            return
        res = invoke(["eval-variants", "--scores", str(scores), "--bootstrap", "0",
                                  "--plots", str(locked / "plots")])  # fmt: skip
        assert res.exit_code == 2 and "--plots" in res.output, res.output
        assert "auroc" not in res.output  # refused before the metrics were computed
    finally:
        locked.chmod(0o700)


def test_eval_variants_takes_the_out_lock(tmp_path: Path) -> None:
    from goatdna.locking import folder_lock

    scores, out = _scores(tmp_path), tmp_path / "m.tsv"
    with folder_lock(out, "--out"):
        line = _fail("--scores", str(scores), "--bootstrap", "0", "--out", str(out))
    assert "--out" in line
    assert not out.exists()


def test_a_bootstrap_of_hours_is_refused_before_any_resample() -> None:
    from goatdna.analysis.variant_eval import EvalOptions, check_bootstrap_cost
    from goatdna.errors import GoatDNAError

    keys = {"subset": np.array(["x", "y"])}
    check_bootstrap_cost(EvalOptions(resamples=1000), 100_000, keys, "binary", True)  # minutes
    with pytest.raises(GoatDNAError, match=r"--bootstrap 100000: .* minutes; use at most"):
        check_bootstrap_cost(EvalOptions(resamples=100_000), 1_000_000, keys, "binary", True)


def test_a_long_bootstrap_shows_progress_with_time_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A progress line on stderr every few seconds (0 here), counting every resample of every
    metric; the numbers are those of a run without it."""
    from goatdna.analysis.variant_eval import EvalOptions, evaluate_variants
    from goatdna.cli.common import ProgressLine

    frame = pd.read_csv(_scores(tmp_path), sep="\t")
    seen: list[tuple[int, int]] = []
    options = EvalOptions(resamples=40, subsets=("subset",))
    shown = evaluate_variants(frame, options, lambda done, total: seen.append((done, total)))
    assert seen[-1] == (40 * 2 * 3, 40 * 2 * 3)  # 2 metrics x (all, x, y)
    assert [d for d, _ in seen] == list(range(1, 241))
    assert shown.metrics == evaluate_variants(frame, options).metrics
    monkeypatch.setattr(ProgressLine, "EVERY_S", 0.0)
    res = invoke(["eval-variants", "--scores", str(_scores(tmp_path)),
                              "--bootstrap", "40"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "bootstrap: 1/80 resamples" in res.stderr and "s left" in res.stderr


def test_positive_names_a_number_of_a_label_column_read_as_floats(tmp_path: Path) -> None:
    """A 0/1 column with an empty cell is read as floats (1.0, 0.0, NaN): ``--positive 1`` was
    refused for naming no value ("its values are 0.0, 1.0"). A number now matches its value."""
    frame = pd.read_csv(_scores(tmp_path), sep="\t")
    frame["label"] = frame["label"].astype(float)
    frame.loc[0, "label"] = None
    path = tmp_path / "blank.tsv"
    frame.to_csv(path, sep="\t", index=False)
    numbers, named = tmp_path / "numbers.json", tmp_path / "named.json"
    _invoke("--scores", str(path), "--bootstrap", "0", "--out", str(numbers))
    _invoke("--scores", str(path), "--bootstrap", "0", "--positive", "1", "--negative", "0",
            "--out", str(named))  # fmt: skip
    as_numbers, as_named = json.loads(numbers.read_text()), json.loads(named.read_text())
    assert as_named["metrics"] == as_numbers["metrics"]
    assert as_named["unlabelled"] == as_numbers["unlabelled"] == 1


def test_eval_tables_are_read_as_score_variants_reads_them(tmp_path: Path) -> None:
    """eval-variants had its own table reader: a comma-separated --labels named .tsv said
    "no column 'chrom' to join on", a gzipped one named .tsv a codec error, and a padded
    header (" chrom") did not name chrom. It reads with score-variants' reader now
    (`goatdna.io.tables.read_frame`), so each says what is wrong, and a padded header works."""
    scores = str(_scores(tmp_path))
    commas = tmp_path / "labels.tsv"
    commas.write_text("chrom,pos,ref,alt,truth\n20,1,A,G,1\n")
    _bad(["--scores", scores, "--labels", str(commas), "--label", "truth"],
         f"--labels {commas}: the separator looks wrong")  # fmt: skip
    zipped = tmp_path / "zipped.tsv"
    zipped.write_bytes(gzip.compress(b"chrom\tpos\tref\talt\ttruth\n20\t1\tA\tG\t1\n"))
    _bad(["--scores", scores, "--labels", str(zipped), "--label", "truth"],
         f"--labels {zipped}: the file is gzip-compressed")  # fmt: skip
    padded = tmp_path / "padded.tsv"
    rows = "".join(f"20\t{i * 10 + 1}\tA\tG\t{i % 2}\n" for i in range(40))
    padded.write_text(" chrom\t pos \tref\talt\ttruth\n" + rows)
    res = _invoke("--scores", scores, "--labels", str(padded), "--label", "truth",
                  "--bootstrap", "0")  # fmt: skip
    assert "40 rows: 36 evaluated" in res.stdout


def test_make_variant_task_is_one_library_call_writing_the_commands_bytes(
    synthetic_shards: Path, tmp_path: Path
) -> None:
    """`goatdna make-variant-task` only builds a `VariantTaskRequest`: `write_variant_task`
    checks it, writes the command's table byte for byte and returns what the command prints."""
    from goatdna.data_prep.variant_task import (
        VariantTaskOptions,
        VariantTaskRequest,
        write_variant_task,
    )
    from goatdna.errors import GoatDNAError

    fasta = synthetic_shards / "synthetic.fa"
    cli_out, lib_out = tmp_path / "cli.tsv", tmp_path / "lib.tsv"
    res = invoke(["make-variant-task", "--fasta", fasta, "--out", cli_out, "--positives", "6",
                  "--seed", "2"])  # fmt: skip
    assert res.exit_code == 0, res.output
    options = VariantTaskOptions(positives=6, seed=2)
    result = write_variant_task(VariantTaskRequest(fasta, lib_out, options))
    assert lib_out.read_bytes() == cli_out.read_bytes()
    counts = ", ".join(f"{k} {v:,}" for k, v in sorted(result.counts.items()))
    assert res.stdout == f"{result.rows:,} SNVs: {counts}\nwrote {cli_out}\n"
    assert result.warnings == [] and res.stderr == "" and result.rows == 4 * 6
    with pytest.raises(GoatDNAError, match="--positives 0: must be >= 1"):
        write_variant_task(VariantTaskRequest(fasta, tmp_path / "x.tsv", VariantTaskOptions(0)))
    with pytest.raises(GoatDNAError, match="--force"):
        write_variant_task(VariantTaskRequest(fasta, lib_out, options))
    assert not (tmp_path / "x.tsv").exists() and lib_out.read_bytes() == cli_out.read_bytes()
