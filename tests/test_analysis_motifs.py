"""`goatdna motifs` and `make-task --label motif`: planted PWMs come back, the MEME file reads
back per the MEME suite's minimal format, seqlets sit where the motifs were planted, no pattern
comes out of attributions that hold none, and bad input is one `error:` line.

The attributions here are a known truth built in the test (the planted PWM's log-odds where a
motif was planted, noise elsewhere), so they check `motifs` alone: each planted PWM is recovered
(Pearson of aligned columns >= 0.9, its own or its reverse complement, any offset) and no
pattern comes from attributions without motifs. The end-to-end run (make-task -> finetune ->
attribute -> motifs) is the docs' tutorial (docs/tutorial-motifs.md, docs/tutorial_motifs_figure.py).
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_one_error_line, invoke

from goatdna.analysis.motifs import best_match
from goatdna.data_prep.tasks import (
    PlantedMotif,
    plant_motifs,
    read_meme_motifs,
    reads_as,
)
from goatdna.locking import folder_lock

REPO = Path(__file__).resolve().parents[1]
MOTIFS = REPO / "examples" / "planted_motifs.meme"
FAST = ["--leiden-runs", "2"]


def _planted_set(
    tmp: Path, n: int = 240, length: int = 48, plant: bool = True
) -> tuple[Path, list]:
    """An `attribute`-format .npz: random sequences, half with planted motifs, hypothetical
    contributions = the PWM's log-odds over the planted bases plus small noise."""
    rng = np.random.default_rng(1)
    motifs = read_meme_motifs(MOTIFS)
    tokens = rng.integers(0, 4, size=(n, length)).astype(np.uint8)
    hypothetical = rng.normal(0, 0.05, size=(n, length, 4)).astype(np.float32)
    where = []
    for i in range(n):
        placed = plant_motifs(tokens[i], motifs, 0.7, rng) if plant and i % 2 == 0 else []
        for instance in placed:
            name, start, strand = instance.split(":")
            pwm = next(m.pwm for m in motifs if m.name == name)
            pwm = pwm if strand == "+" else pwm[::-1, ::-1]
            s = int(start)
            hypothetical[i, s : s + len(pwm)] += np.log(pwm / 0.25).astype(np.float32)
            where.append((i, s, s + len(pwm)))
    sequences = np.array(["".join("ACGT"[t] for t in row) for row in tokens])
    path = tmp / ("planted.npz" if plant else "none.npz")
    np.savez(path, attributions=hypothetical, hypothetical=hypothetical, sequences=sequences,
             names=np.array([f"seq{i}" for i in range(n)]))  # fmt: skip
    return path, where


def parse_meme_minimal(text: str) -> dict[str, np.ndarray]:
    """A reader written from the MEME minimal-format spec (meme-suite.org/meme/doc/meme-format.html):
    a ``MEME version`` line first, ``ALPHABET= ACGT``, ``strands: + -``, the background line
    after ``Background letter frequencies``, then ``MOTIF id`` and ``letter-probability
    matrix: alength= 4 w= W nsites= S`` followed by exactly W rows of 4 probabilities summing to 1."""
    lines = [line.strip() for line in text.splitlines()]
    assert re.fullmatch(r"MEME version \d+(\.\d+)*", lines[0]), lines[0]
    assert "ALPHABET= ACGT" in lines and "strands: + -" in lines
    background = lines[lines.index(next(x for x in lines if x.startswith("Background"))) + 1]
    freqs = background.split()
    assert freqs[0::2] == list("ACGT") and abs(sum(map(float, freqs[1::2])) - 1) < 1e-4
    found: dict[str, np.ndarray] = {}
    i = 0
    while i < len(lines):
        if lines[i].startswith("MOTIF "):
            name = lines[i].split()[1]
            header = re.fullmatch(
                r"letter-probability matrix: alength= 4 w= (\d+) nsites= (\d+).*", lines[i + 1]
            )
            assert header, lines[i + 1]
            width = int(header.group(1))
            rows = np.array([[float(v) for v in lines[i + 2 + k].split()] for k in range(width)])
            assert rows.shape == (width, 4) and np.allclose(rows.sum(axis=1), 1, atol=1e-4)
            found[name] = rows
            i += 2 + width
        else:
            i += 1
    return found


def test_motifs_recovers_each_planted_pwm_and_writes_its_three_files(tmp_path: Path) -> None:
    src, where = _planted_set(tmp_path)
    out = tmp_path / "motifs"
    result = invoke(["motifs", "--attributions", str(src), "--out", str(out), *FAST])
    assert result.exit_code == 0, (result.output, result.exception)
    meme = (out / "motifs.meme").read_text()
    found = parse_meme_minimal(meme)
    from Bio import motifs as bio_motifs  # an independent reader (it rounds counts: atol)

    with open(out / "motifs.meme") as handle:
        bio = {
            m.name: np.array([m.pwm[b] for b in "ACGT"]).T
            for m in bio_motifs.parse(handle, "minimal")
        }
    assert bio.keys() == found.keys() and all(
        np.allclose(bio[k], found[k], atol=0.01) for k in found
    )
    for planted in read_meme_motifs(MOTIFS):
        best = max(best_match(pwm, planted.pwm)[0] for pwm in found.values())
        assert best >= 0.9, (planted.name, best)
    assert all(name.startswith("pos_") for name in found)  # nothing lowers this output
    # seqlets: every one of a recovered pattern overlaps a planted instance
    lines = (out / "seqlets.tsv").read_text().splitlines()
    assert lines[0] == "sequence\tstart\tend\tstrand\tpattern"
    rows = [line.split("\t") for line in lines[1:]]
    assert {r[4] for r in rows} == set(found) and {r[3] for r in rows} <= {"+", "-"}
    planted_at = {}
    for i, a, b in where:
        planted_at.setdefault(f"seq{i}", []).append((a, b))
    hits = [any(int(r[1]) < b and a < int(r[2]) for a, b in planted_at.get(r[0], [])) for r in rows]
    assert np.mean(hits) > 0.95
    page = (out / "motifs.html").read_text()
    for name in found:
        count = sum(r[4] == name for r in rows)
        assert f"{name}: {count} seqlets" in page
        assert f"alt='{name} contribution logo'" in page and f"alt='{name} PWM logo'" in page


def test_no_pattern_where_none_was_planted(tmp_path: Path) -> None:
    src, _ = _planted_set(tmp_path, plant=False)
    out = tmp_path / "none"
    result = invoke(["motifs", "--attributions", str(src), "--out", str(out), *FAST])
    assert result.exit_code == 0, (result.output, result.exception)
    assert parse_meme_minimal((out / "motifs.meme").read_text()) == {}
    assert "No pattern was found" in (out / "motifs.html").read_text()


def test_motifs_force_replaces_only_an_earlier_output_under_its_lock(tmp_path: Path) -> None:
    src, _ = _planted_set(tmp_path, n=60, plant=False)
    out = tmp_path / "m"
    args = ["motifs", "--attributions", str(src), "--out", str(out), *FAST]
    with folder_lock(out, "--out"):  # this process plays a first run still writing --out
        assert_one_error_line(
            invoke(args), f"is in use by another goatdna process (pid {os.getpid()}"
        )
    assert not out.exists()
    first = invoke(args)
    assert first.exit_code == 0, (first.output, first.exception)
    assert_one_error_line(invoke(args), "exists; pass --force")
    (out / "notes.txt").write_text("mine")  # the folder now holds a file goatdna did not write
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert_one_error_line(invoke([*args, "--force"]), "does not write (notes.txt)")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # --force used to delete it
    (out / "notes.txt").unlink()
    again = invoke([*args, "--force"])
    assert again.exit_code == 0, (again.output, again.exception)
    assert sorted(p.name for p in out.iterdir()) == ["motifs.html", "motifs.meme", "seqlets.tsv"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m", "none.npz"]  # no lock, no temp


def test_make_task_plants_motifs_in_one_class_on_both_strands(synthetic_shards, tmp_path) -> None:
    import csv

    out = tmp_path / "task"
    result = invoke(["make-task", "--data", str(synthetic_shards), "--out", str(out),
                                 "--label", "motif", "--motifs", str(MOTIFS), "--window", "48",
                                 "--max-train", "400", "--max-eval", "40", "--plant-rate", "0.5"])  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader((out / "train.csv").open()))
    motifs = {m.name: m.pwm for m in read_meme_motifs(MOTIFS)}
    strands = set()
    per_motif = dict.fromkeys(motifs, 0)
    reads: list[bool] = []  # a draw from the PWM sometimes misses (0.09 per column here)
    for row in rows:
        instances = [x for x in row["planted"].split(";") if x]
        assert (row["label"] == "motif") == bool(instances)
        for instance in instances:
            name, start, strand = instance.split(":")
            site = row["sequence"][int(start) : int(start) + len(motifs[name])]
            pwm = motifs[name] if strand == "+" else motifs[name][::-1, ::-1]
            log_odds = sum(np.log(pwm[k, "ACGT".index(b)] / 0.25) for k, b in enumerate(site))
            reads.append(log_odds > 3.0)  # the site reads as the PWM on its strand
            strands.add(strand)
            per_motif[name] += 1
    assert strands == {"+", "-"} and np.mean(reads) > 0.9
    n_motif = sum(r["label"] == "motif" for r in rows)
    assert abs(n_motif - len(rows) / 2) <= 1
    for count in per_motif.values():  # rate 0.5 each, at least one per window: ~0.58 per window
        assert 0.45 * n_motif < count < 0.75 * n_motif


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--attributions", "missing.npz"], "no such file"),
        (["--attributions", "junk.npz"], "not a readable .npz"),
        (["--attributions", "other.npz"], "holds neither"),
        (["--attributions", "ok.npz", "--window", "0"], "--window 0"),
        (["--attributions", "ok.npz", "--window", "60"], "shorter than --window"),
        (["--attributions", "ok.npz", "--out", "file.txt"], "is a file"),
        # legal values modisco-lite cannot take: one line naming the flag, not its traceback
        (["--attributions", "ok.npz", "--trim", "100"], "lower --trim to at most 15"),
        (["--attributions", "ok.npz", "--max-seqlets", "1"], "raise --max-seqlets"),
        # malformed files: the array that is wrong or missing is named
        (["--attributions", "flat.npz"], "hypothetical is a 2-d float64 array"),
        (["--attributions", "numbered.npz"], "sequences is a 1-d int64 array"),
        (["--attributions", "texts.npz"], "hypothetical is a 3-d <U1 array"),
        (["--attributions", "names.npz"], "names holds 1 names for 2 sequences"),
        (["--attributions", "empty.npz"], "holds no bases"),
        (["--attributions", "half.npz"], "missing sequences"),
        (["--attributions", "ism.npz"], "scores is a 1-d float64 array"),
        (["--attributions", "ism_wide.npz"], "scores has shape (20, 4), not (L, 4) with L = 5"),
        # the output folder: never the current one, never one holding the input
        (["--attributions", "ok.npz", "--out", ".", "--force"], "is the current folder"),
        (["--attributions", "proj/ok.npz", "--out", "proj", "--force"], "an input of this run"),
    ],
)
def test_bad_motif_input_is_one_error_line(tmp_path, monkeypatch, args, needle) -> None:
    monkeypatch.chdir(tmp_path)
    Path("junk.npz").write_bytes(b"not a zip")
    np.savez("other.npz", x=np.zeros(3))
    ok = {"hypothetical": np.zeros((2, 20, 4)), "sequences": np.array(["A" * 20] * 2)}
    np.savez("ok.npz", **ok)
    Path("proj").mkdir()
    np.savez("proj/ok.npz", **ok)
    np.savez("flat.npz", hypothetical=np.zeros((2, 20)), sequences=ok["sequences"])
    np.savez("numbered.npz", hypothetical=ok["hypothetical"], sequences=np.array([1, 2]))
    np.savez("texts.npz", hypothetical=np.full((2, 1, 4), "x"), sequences=ok["sequences"])
    np.savez("names.npz", **ok, names=np.array(["a"]))
    np.savez("empty.npz", hypothetical=np.zeros((0, 20, 4)), sequences=np.array([], dtype=str))
    np.savez("half.npz", hypothetical=ok["hypothetical"])
    np.savez("ism.npz", scores=np.zeros(20), ref=np.array("ACGTA"))
    np.savez("ism_wide.npz", scores=np.zeros((20, 4)), ref=np.array("ACGTA"))
    Path("file.txt").write_text("x")
    if "--out" not in args:
        args = [*args, "--out", "motifs"]
    before = sorted(str(p) for p in Path().rglob("*"))
    result = invoke(["motifs", *args])
    assert result.exit_code == 2, (result.output, result.exception)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], lines
    assert not Path("motifs").exists()
    assert sorted(str(p) for p in Path().rglob("*")) == before  # nothing deleted or left


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--label", "motif"], "--motifs FILE.meme"),
        (["--label", "gc", "--motifs", str(MOTIFS)], "only --label motif"),
        (["--label", "motif", "--motifs", str(MOTIFS), "--plant-rate", "0"], "--plant-rate 0"),
        (["--label", "motif", "--motifs", "bad.meme"], "MEME minimal-format"),
        (["--label", "motif", "--motifs", "wide.meme", "--window", "8"], "wider than --window"),
        (["--label", "motif", "--motifs", str(MOTIFS), "--decoys", "random"], "--decoys 'random'"),
    ],
)
def test_bad_planting_input_is_one_error_line(
    synthetic_shards, tmp_path, monkeypatch, args, needle
):
    monkeypatch.chdir(tmp_path)
    Path("bad.meme").write_text(
        "MEME version 5\n\nMOTIF x\nletter-probability matrix: alength= 4 w= 2\n0.5 0.5\n"
    )
    rows = "\n".join(["0.25 0.25 0.25 0.25"] * 9)
    Path("wide.meme").write_text(
        f"MEME version 5\n\nALPHABET= ACGT\n\nBackground letter frequencies\nA 0.25 C 0.25 G 0.25 T 0.25\n\nMOTIF w\nletter-probability matrix: alength= 4 w= 9\n{rows}\n"
    )
    result = invoke(["make-task", "--data", str(synthetic_shards), "--out", "task", *args])
    assert result.exit_code == 2, (result.output, result.exception)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], lines
    assert not Path("task").exists()


def test_planted_motif_reading_keeps_the_pwms() -> None:
    motifs = read_meme_motifs(MOTIFS)
    assert [m.name for m in motifs] == ["GATA_like", "CACGTG_box"]
    assert isinstance(motifs[0], PlantedMotif) and motifs[0].pwm.shape == (8, 4)
    assert np.allclose(motifs[0].pwm.sum(axis=1), 1) and motifs[0].pwm[0, 2] == pytest.approx(0.91)


def _half_words(pwm: np.ndarray) -> set[str]:
    """Every word of half the PWM's width that reads as part of it (each letter more likely than
    1/4 in its aligned column, either strand), spelled out: an independent form of `reads_as`."""
    half = -(-len(pwm) // 2)
    words = set()
    for motif in (pwm, pwm[::-1, ::-1]):
        for j in range(len(motif) - half + 1):
            columns = [
                [b for k, b in enumerate("ACGT") if p[k] > 0.25] for p in motif[j : j + half]
            ]
            words |= {"".join(w) for w in itertools.product(*columns)}
    return words


def _reads(text: str, words: set[str]) -> bool:
    return any(w in text for w in words)


def test_a_decoy_is_the_instance_it_replaces_with_its_letters_reordered() -> None:
    """Same generator state: the decoy and the instance share motif, place and strand draws; the
    decoy holds the instance's letters, in an order in which no half of the motif can be read,
    not even across its edges into the genome around it."""
    motifs = read_meme_motifs(MOTIFS)
    for motif in motifs:
        words = _half_words(motif.pwm)
        reach = len(next(iter(words))) - 1
        same = 0
        for seed in range(200):
            genome = np.random.default_rng(1000 + seed).integers(0, 4, 40).astype(np.uint8)
            real, decoy = genome.copy(), genome.copy()
            where = plant_motifs(real, [motif], 1.0, np.random.default_rng(seed))
            assert (
                plant_motifs(decoy, [motif], 1.0, np.random.default_rng(seed), shuffle=True)
                == where
            )
            _, start, _ = where[0].split(":")
            site = slice(int(start), int(start) + len(motif.pwm))
            assert sorted(decoy[site]) == sorted(real[site])  # the same letter counts
            around = decoy[max(0, site.start - reach) : site.stop + reach]
            assert not _reads("".join("ACGT"[b] for b in around), words)  # but not the motif
            assert reads_as(around, motif.pwm) is False
            outside = np.ones(40, dtype=bool)
            outside[site] = False
            assert (decoy[outside] == genome[outside]).all()
            same += bool((decoy[site] == real[site]).all())
        assert same == 0, (motif.name, same)


def _letter_frequencies(rows: list[dict], column: str, widths: dict[str, int]) -> dict:
    """Per motif: the A C G T frequencies over the sites a CSV column lists."""
    counts = {name: np.zeros(4) for name in widths}
    for row in rows:
        for instance in filter(None, row[column].split(";")):
            name, start, _ = instance.split(":")
            for letter in row["sequence"][int(start) : int(start) + widths[name]]:
                counts[name]["ACGT".index(letter)] += 1
    return {name: c / c.sum() for name, c in counts.items()}


def test_make_task_decoys_match_the_planted_letters_in_the_other_class(
    synthetic_shards, tmp_path
) -> None:
    import csv
    import json

    args = ["make-task", "--data", str(synthetic_shards), "--label", "motif", "--motifs",
            str(MOTIFS), "--window", "40", "--max-train", "600", "--max-eval", "40"]  # fmt: skip
    result = invoke([*args, "--out", str(tmp_path / "task")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "task" / "task.json").read_text())["options"]["decoys"] == (
        "shuffled"
    )
    rows = list(csv.DictReader((tmp_path / "task" / "train.csv").open()))
    for row in rows:  # decoys only in the background class, planted instances only in the other
        assert bool(row["decoys"]) == (row["label"] == "background")
        assert bool(row["planted"]) == (row["label"] == "motif")
    motifs = {m.name: m.pwm for m in read_meme_motifs(MOTIFS)}
    widths = {name: len(pwm) for name, pwm in motifs.items()}
    planted = _letter_frequencies(rows, "planted", widths)
    decoys = _letter_frequencies(rows, "decoys", widths)
    words = set().union(*map(_half_words, motifs.values()))  # no decoy reads as any motif
    reach = len(next(iter(words))) - 1
    for name, pwm in motifs.items():  # ~300 sites x 8 letters per class: sampling sd ~0.01
        assert np.abs(planted[name] - decoys[name]).max() < 0.04, (name, planted, decoys)
        for row in rows:
            for instance in filter(None, row["decoys"].split(";")):
                n, start, _ = instance.split(":")
                if n == name:
                    begin = max(0, int(start) - reach)
                    around = row["sequence"][begin : int(start) + len(pwm) + reach]
                    assert not _reads(around, words), (name, around)
    result = invoke([*args, "--out", str(tmp_path / "plain"), "--decoys", "none"])
    assert result.exit_code == 0, result.output
    header = (tmp_path / "plain" / "train.csv").read_text().splitlines()[0]
    assert header == "id,sequence,label,planted"
    info = json.loads((tmp_path / "plain" / "task.json").read_text())
    assert info["options"]["decoys"] == "none"


def _meme_file(path: Path, motifs: dict[str, np.ndarray], alphabet: str = "ACGT",
               nsites: int | None = 100) -> Path:  # fmt: skip
    """A MEME minimal-format file of ``motifs`` (name: (w, 4) rows) as databases write them."""
    background = " ".join(f"{letter} 0.25" for letter in alphabet)
    parts = [f"MEME version 5\n\nALPHABET= {alphabet}\n\nstrands: + -\n\n"
             f"Background letter frequencies\n{background}\n"]  # fmt: skip
    for name, rows in motifs.items():
        sites = f" nsites= {nsites}" if nsites else ""
        body = "\n".join(" ".join(f"{p:.3f}" for p in row) for row in rows)
        parts.append(
            f"\nMOTIF {name}\nletter-probability matrix: alength= 4 w= {len(rows)}{sites}\n{body}\n"
        )
    path.write_text("".join(parts))
    return path


def _reads_spelled_out(letters: np.ndarray, pwm: np.ndarray) -> bool:
    """`reads_as` by its definition, one offset and place at a time (any width)."""
    half = -(-len(pwm) // 2)
    for motif in (pwm, pwm[::-1, ::-1]):
        for j in range(len(motif) - half + 1):
            for i in range(len(letters) - half + 1):
                if all(motif[j + t, letters[i + t]] > 0.25 for t in range(half)):
                    return True
    return False


def test_reads_as_is_its_definition_at_every_width() -> None:
    rng = np.random.default_rng(5)
    seen = set()
    for width in [1, 2, 3, 5, 8, 13, 40, 81]:
        for _ in range(40):
            pwm = rng.dirichlet([0.4] * 4, size=width)
            letters = rng.integers(0, 4, size=int(rng.integers(0, 2 * width + 6))).astype(np.uint8)
            expected = _reads_spelled_out(letters, pwm)
            assert reads_as(letters, pwm) is expected, (width, letters, pwm)
            seen.add(expected)
    assert seen == {True, False}


def test_make_task_plants_a_long_rna_matrix(synthetic_shards, tmp_path) -> None:
    """A 40-column PWM (JASPAR and HOCOMOCO hold many) in an RNA alphabet: planted and decoyed
    in seconds (a table of every half word took 1 TiB), U read as T."""
    import csv

    rows = np.random.default_rng(2).dirichlet([0.3] * 4, size=40)
    meme = _meme_file(tmp_path / "long.meme", {"long": rows}, alphabet="ACGU")
    dna = read_meme_motifs(_meme_file(tmp_path / "dna.meme", {"long": rows}))
    assert np.array_equal(read_meme_motifs(meme)[0].pwm, dna[0].pwm)
    out = tmp_path / "task"
    result = invoke(["make-task", "--data", str(synthetic_shards), "--out", str(out),
                                 "--label", "motif", "--motifs", str(meme), "--window", "100",
                                 "--max-train", "60", "--max-eval", "10"])  # fmt: skip
    assert result.exit_code == 0, (result.output, result.exception)
    pwm = dna[0].pwm
    table = list(csv.DictReader((out / "train.csv").open()))
    sites = {"planted": 0, "decoys": 0}
    for row in table:
        sequence = np.array(["ACGT".index(b) for b in row["sequence"]])
        for column in sites:
            for instance in filter(None, row[column].split(";")):
                _, start, strand = instance.split(":")
                site = sequence[int(start) : int(start) + 40]
                sites[column] += 1
                if column == "decoys":  # reordered until no half of it reads as the motif
                    assert not _reads_spelled_out(site, pwm)
                else:
                    aligned = pwm if strand == "+" else pwm[::-1, ::-1]
                    log_odds = np.log(aligned[np.arange(40), site] / 0.25).sum()
                    assert log_odds > 10, (row["id"], log_odds)
    assert sites["planted"] >= 30 and sites["decoys"] >= 30


def test_meme_probabilities_are_read_as_written(tmp_path) -> None:
    """Biopython's reader rounds p * nsites (20 without nsites) to a whole count: 0.02 became 0
    and 0.3 0.3 0.2 0.2 at nsites= 1 a row of zeros."""
    rows = np.array([[0.02, 0.02, 0.94, 0.02], [0.3, 0.3, 0.2, 0.2]])
    for nsites in (None, 1):
        pwm = read_meme_motifs(_meme_file(tmp_path / "m.meme", {"m": rows}, nsites=nsites))[0].pwm
        assert np.allclose(pwm, rows), (nsites, pwm)


def test_an_all_zero_row_is_one_error_line_naming_file_motif_and_row(
    synthetic_shards, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    rows = np.array([[0.1, 0.2, 0.3, 0.4], [0.0, 0.0, 0.0, 0.0], [0.25] * 4])
    ok = np.full((3, 4), 0.25)
    _meme_file(tmp_path / "zero.meme", {"fine": ok, "typo": rows})
    result = invoke(["make-task", "--data", str(synthetic_shards), "--out", "task",
                                 "--label", "motif", "--motifs", "zero.meme"])  # fmt: skip
    assert result.exit_code == 2, (result.output, result.exception)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --motifs zero.meme:"), lines
    assert "motif 'typo' row 2 (of 3) is all zeros" in lines[0], lines
    assert not Path("task").exists()


def _signed_set(tmp: Path, hypothetical: np.ndarray) -> Path:
    """An `attribute`-format .npz of random sequences with the given hypothetical contributions."""
    n, length, _ = hypothetical.shape
    rng = np.random.default_rng(2)
    sequences = np.array(["".join(rng.choice(list("ACGT"), length)) for _ in range(n)])
    path = tmp / "given.npz"
    np.savez(path, hypothetical=hypothetical, sequences=sequences)
    return path


@pytest.mark.parametrize("value", [0.0, 0.5])
def test_contributions_all_equal_give_an_empty_result(tmp_path: Path, value: float) -> None:
    """Attributions that are all zero (or one value everywhere) hold no seqlet: modisco-lite's
    null estimate fails on them (an IndexError traceback); `motifs` writes the empty result
    and says why in one note."""
    src = _signed_set(tmp_path, np.full((40, 48, 4), value))
    out = tmp_path / "flat"
    result = invoke(["motifs", "--attributions", src, "--out", out, *FAST])
    assert result.exit_code == 0, (result.output, result.exception)
    notes = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(notes) == 1 and notes[0].startswith("note: ") and "the same" in notes[0], notes
    assert parse_meme_minimal((out / "motifs.meme").read_text()) == {}
    assert "No pattern was found" in (out / "motifs.html").read_text()
    assert "0 pattern(s)" in result.stdout


@pytest.mark.parametrize("sign", [1, -1])
def test_one_signed_contributions_are_one_error_line(tmp_path: Path, sign: int) -> None:
    """modisco-lite sets its seqlet thresholds from windows of both signs; contributions of one
    sign only (an ISM matrix where every mutation lowers the likelihood) ended in sklearn's
    "Sample weights must contain at least one non-zero number" traceback: one line instead,
    and no output folder."""
    rng = np.random.default_rng(3)
    src = _signed_set(tmp_path, sign * np.abs(rng.normal(0, 1, (40, 48, 4))))
    out = tmp_path / "signed"
    result = invoke(["motifs", "--attributions", src, "--out", out, *FAST])
    word = "negative" if sign > 0 else "positive"
    assert_one_error_line(result, str(src), f"none is {word}", "both signs")
    assert not out.exists()
