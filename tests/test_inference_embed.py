"""`embed`: equals the model's hooked hidden states, the chunking rule at M, strand averaging,
the input/output formats and every bad input (one line, exit 2, nothing written)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import assert_one_error_line, invoke

from goatdna.checkpoint import save_checkpoint
from goatdna.configfile import to_dict
from goatdna.inference.embed import EmbedOptions, SequenceRecord, embed, embed_records
from goatdna.io.tokens import encode, reverse_complement
from goatdna.model import DNADecoder, ModelConfig

REPO = Path(__file__).resolve().parents[1]
TINY = {"n_layers": 2, "d_model": 32, "n_heads": 2, "mlp_hidden": 64, "train_length": 16}


def _model(positional: str = "goat") -> DNADecoder:
    torch.manual_seed(0)
    model = DNADecoder(ModelConfig(positional=positional, goat_modes=3, **TINY))
    with torch.no_grad():  # a nonzero prior, so positions matter
        for block in model.blocks:
            if block.attn.prior is not None:
                block.attn.prior.alpha.normal_(0, 0.5)
                block.attn.prior.slope.normal_(0, 0.05)
                block.attn.prior.sink.normal_(0, 1.0)
    return model.eval()


def _random_dna(length: int, seed: int) -> str:
    return "".join(np.random.default_rng(seed).choice(list("ACGT"), size=length))


def _hooked(model: DNADecoder, sequence: str, layer: int | None) -> np.ndarray:
    """The model's own hidden states for ``sequence`` (one forward at positions 0..), via hooks."""
    module = model.norm if layer is None else model.blocks[layer - 1]
    seen: list[torch.Tensor] = []
    handle = module.register_forward_hook(lambda _m, _a, out: seen.append(out))
    try:
        with torch.no_grad():
            model(torch.from_numpy(encode(sequence).astype(np.int64) & 0x7F)[None])
    finally:
        handle.remove()
    return seen[0][0].numpy()  # (L, d)


@pytest.mark.parametrize("positional", ["goat", "rope"])
@pytest.mark.parametrize("layer", [1, 2, None])
def test_embed_equals_hooked_hidden_states(positional: str, layer: int | None) -> None:
    model = _model(positional)
    seqs = [_random_dna(40, 1), _random_dna(25, 2)]
    per_base = embed(model, seqs, layer=layer, pool="none", max_length=64)
    means = embed(model, seqs, layer=layer, pool="mean", max_length=64, batch_size=1)
    lasts = embed(model, seqs, layer=layer, pool="last", max_length=64)
    for i, seq in enumerate(seqs):
        hidden = _hooked(model, seq, layer)
        np.testing.assert_allclose(per_base[i], hidden, atol=1e-5, rtol=0)
        np.testing.assert_allclose(means[i], hidden.mean(0), atol=1e-5, rtol=0)
        np.testing.assert_allclose(lasts[i], hidden[-1], atol=1e-5, rtol=0)


@pytest.mark.parametrize("length", [15, 16, 17, 32, 33])
def test_chunking_rule_at_the_boundary(length: int) -> None:
    """Sequences of M-1, M, M+1, 2M, 2M+1 bases: chunks of M at positions 0.., independent."""
    M = 16
    model = _model()
    seq = _random_dna(length, length)
    chunks = [seq[s : s + M] for s in range(0, length, M)]
    hidden = [_hooked(model, c, None) for c in chunks]
    per_base = embed(model, [seq], pool="none", max_length=M)[0]
    mean = embed(model, [seq], pool="mean", max_length=M)[0]
    last = embed(model, [seq], pool="last", max_length=M)[0]
    np.testing.assert_allclose(per_base, np.concatenate(hidden), atol=1e-5, rtol=0)
    np.testing.assert_allclose(mean, np.concatenate(hidden).mean(0), atol=1e-5, rtol=0)
    np.testing.assert_allclose(last, hidden[-1][-1], atol=1e-5, rtol=0)
    assert len(chunks) == -(-length // M)
    if length > M:  # chunked really differs from one long pass (context is cut at M)
        assert not np.allclose(per_base, _hooked(model, seq, None), atol=1e-4)


def test_strand_averaging() -> None:
    model = _model()
    seq = _random_dna(30, 7)
    rc = "".join("TGCA"["ACGT".index(b)] for b in reversed(seq))
    fwd_hidden, rc_hidden = _hooked(model, seq, 1), _hooked(model, rc, 1)
    both_none = embed(model, [seq], layer=1, pool="none", strands="both", max_length=64)[0]
    both_mean = embed(model, [seq], layer=1, pool="mean", strands="both", max_length=64)[0]
    both_last = embed(model, [seq], layer=1, pool="last", strands="both", max_length=64)[0]
    # per base: base i of the forward strand meets position L-1-i of the reverse complement
    np.testing.assert_allclose(both_none, (fwd_hidden + rc_hidden[::-1]) / 2, atol=1e-5, rtol=0)
    np.testing.assert_allclose(
        both_mean, (fwd_hidden.mean(0) + rc_hidden.mean(0)) / 2, atol=1e-5, rtol=0
    )
    np.testing.assert_allclose(both_last, (fwd_hidden[-1] + rc_hidden[-1]) / 2, atol=1e-5, rtol=0)
    # a sequence and its reverse complement have the same both-strand mean
    np.testing.assert_allclose(
        embed(model, [rc], layer=1, strands="both", max_length=64)[0], both_mean, atol=1e-5
    )


def test_default_max_length_and_batching_invariance() -> None:
    model = _model()
    seqs = [_random_dna(n, n) for n in (70, 64, 5, 130)]
    one = embed(model, seqs, batch_size=1)  # default M = 4 x 16 = 64 for GOAT
    many = embed(model, seqs, batch_size=16)
    np.testing.assert_allclose(one, many, atol=1e-5, rtol=0)
    chunked = embed(model, [seqs[0]], pool="none")[0]
    head = _hooked(model, seqs[0][:64], None)
    np.testing.assert_allclose(chunked[:64], head, atol=1e-5, rtol=0)


# ------------------------------------------------------------------------------------- CLI
@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = _model()
    config = {"model": to_dict(model.config), "data": {"seq_len": 16}}
    return save_checkpoint(tmp_path_factory.mktemp("ckpt") / "m.ckpt", model, config)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ref") / "ref.fa"
    path.write_text(f">chrA\n{_random_dna(200, 11)}\n>chrB\n{_random_dna(90, 12)}\n")
    return path


def test_cli_bed_to_npz(checkpoint: Path, reference: Path, tmp_path: Path) -> None:
    bed = tmp_path / "regions.bed"
    bed.write_text("track name=x\nchrB\t10\t60\tr1\nchrA\t0\t150\nchrA\t5\t45\tr3\t0\t-\n")
    out = tmp_path / "emb.npz"
    res = invoke(["embed", "-c", str(checkpoint), "--fasta", str(reference),
                              "--bed", str(bed), "--out", str(out), "--layer", "2",
                              "--max-length", "32"])  # fmt: skip
    assert res.exit_code == 0, res.output
    data = np.load(out)
    assert list(data["names"]) == ["r1", "chrA:1-150", "r3"]
    model = _model()
    text = reference.read_text().split("\n")
    seqs = [text[3][10:60], text[1][0:150], _rc(text[1][5:45])]
    expected = embed(model, seqs, layer=2, max_length=32)
    np.testing.assert_allclose(data["embeddings"], expected, atol=1e-5, rtol=0)
    # the same through Lightning's predict loop (--devices) on one CPU
    out2 = tmp_path / "emb2.npz"
    res = invoke(["embed", "-c", str(checkpoint), "--fasta", str(reference),
                              "--bed", str(bed), "--out", str(out2), "--layer", "2",
                              "--max-length", "32", "--devices", "1"])  # fmt: skip
    assert res.exit_code == 0, res.output
    np.testing.assert_allclose(np.load(out2)["embeddings"], expected, atol=1e-5, rtol=0)


def _rc(seq: str) -> str:
    return "".join("TGCA"["ACGT".index(b)] for b in reversed(seq))


def test_cli_sequences_none_pooling_npz(checkpoint: Path, tmp_path: Path) -> None:
    fasta = tmp_path / "s.fa"
    fasta.write_text(">x desc\nACGTACGTAAAC\nGGT\n>y\nacgtnryACGT\n")
    out = tmp_path / "per_base.npz"
    res = invoke(["embed", "-c", str(checkpoint), "--sequences", str(fasta),
                              "--pool", "none", "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    data = np.load(out)
    assert list(data["names"]) == ["x", "y"] and list(data["offsets"]) == [0, 15, 26]
    expected = embed(_model(), ["ACGTACGTAAACGGT", "ACGTNNNACGT"], pool="none")
    np.testing.assert_allclose(data["embeddings"], np.concatenate(expected), atol=1e-5, rtol=0)


def test_cli_table_to_parquet_carries_columns(checkpoint: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    import pandas as pd

    table = tmp_path / "s.tsv"
    table.write_text("label\tsequence\tname\n1\tACGTTG\tp\n0\tGGGCCCAT\tq\n")
    out = tmp_path / "emb.parquet"
    res = invoke(["embed", "-c", str(checkpoint), "--sequences", str(table),
                              "--out", str(out), "--pool", "last"])  # fmt: skip
    assert res.exit_code == 0, res.output
    frame = pd.read_parquet(out)
    assert list(frame["name"]) == ["p", "q"] and list(frame["label"]) == ["1", "0"]
    expected = embed(_model(), ["ACGTTG", "GGGCCCAT"], pool="last")
    np.testing.assert_allclose(np.stack(frame["embedding"]), expected, atol=1e-5, rtol=0)


def test_cli_zarr(checkpoint: Path, tmp_path: Path) -> None:
    zarr = pytest.importorskip("zarr")
    fasta = tmp_path / "s.fa"
    fasta.write_text(">x\nACGTACGTAAACGGT\n>y\nTTTT\n")
    out = tmp_path / "emb.zarr"
    res = invoke(["embed", "-c", str(checkpoint), "--sequences", str(fasta),
                              "--out", str(out), "--strands", "both"])  # fmt: skip
    assert res.exit_code == 0, res.output
    group = zarr.open_group(str(out), mode="r")
    expected = embed(_model(), ["ACGTACGTAAACGGT", "TTTT"], strands="both")
    np.testing.assert_allclose(group["embeddings"][:], expected, atol=1e-5, rtol=0)
    assert list(group["names"][:]) == ["x", "y"]
    # an existing store is replaced only with --force; a folder that is not a zarr store never
    again = ["embed", "-c", str(checkpoint), "--sequences", str(fasta), "--out", str(out),
             "--pool", "none"]  # fmt: skip
    res = invoke(again)
    assert res.exit_code == 2 and "pass --force to replace it" in res.stderr
    assert group["embeddings"].shape == (2, expected.shape[1])  # untouched
    res = invoke([*again, "--force"])
    assert res.exit_code == 0 and zarr.open_group(str(out), mode="r")["offsets"][:].tolist() == [
        0, 15, 19,
    ]  # fmt: skip
    # --force replaces only what goatdna writes in a store: a user's file in it, or the input
    # itself kept there, stops the run and stays (they used to go with the old store)
    (out / "notes.txt").write_text("mine")
    res = invoke([*again, "--force"])
    assert res.exit_code == 2 and "does not write (notes.txt)" in res.stderr, res.stderr
    assert (out / "notes.txt").read_text() == "mine" and (out / "zarr.json").is_file()
    (out / "notes.txt").unlink()
    inside = out / "s.fa"
    inside.write_text(fasta.read_text())
    res = invoke(["embed", "-c", str(checkpoint), "--sequences", str(inside),
                              "--out", str(out), "--force"])  # fmt: skip
    assert res.exit_code == 2 and "an input of this run" in res.stderr, res.stderr
    assert inside.read_text() == fasta.read_text()
    precious = tmp_path / "data.zarr"
    precious.mkdir()
    (precious / "keep.txt").write_text("mine")
    res = invoke(["embed", "-c", str(checkpoint), "--sequences", str(fasta),
                              "--out", str(precious), "--force"])  # fmt: skip
    assert res.exit_code == 2 and "is a folder" in res.stderr
    assert (precious / "keep.txt").read_text() == "mine"


def _bad(args: list[str], message: str, out: Path) -> None:
    assert_one_error_line(invoke(args), message)
    assert not out.exists() and not list(out.parent.glob(f".{out.name}*"))


def test_cli_bad_inputs(checkpoint: Path, reference: Path, tmp_path: Path) -> None:
    good = tmp_path / "good.fa"
    good.write_text(">a\nACGT\n")
    out = tmp_path / "o" / "emb.npz"
    base = ["embed", "-c", str(checkpoint), "--out", str(out)]
    _bad([*base, "--sequences", str(good), "--layer", "3"], "--layer 3: the model has 2", out)
    _bad([*base, "--sequences", str(good), "--layer", "0"], "--layer 0: must be >= 1", out)
    _bad([*base, "--sequences", str(good), "--layer", "3"], "choose 1..2", out)
    parquet = tmp_path / "o" / "emb.parquet"
    _bad(["embed", "-c", str(checkpoint), "--sequences", str(good), "--pool", "none",
          "--out", str(parquet)], "parquet row cannot hold", parquet)  # fmt: skip
    empty = tmp_path / "empty.fa"
    empty.write_text(">a\nACGT\n>blank\n\n")
    _bad([*base, "--sequences", str(empty)], "record 'blank' (#2): empty sequence", out)
    bad_char = tmp_path / "bad.csv"
    bad_char.write_text("name,sequence\nok,ACGT\nweird,ACXGT\n")
    _bad([*base, "--sequences", str(bad_char)], "row 2 (name 'weird'): invalid nucleotide 'X'", out)
    no_column = tmp_path / "nocol.csv"
    no_column.write_text("name,seq\na,ACGT\n")
    _bad([*base, "--sequences", str(no_column)], "no 'sequence' column", out)
    bed = tmp_path / "r.bed"
    bed.write_text("chrA\t10\t10\n")
    _bad([*base, "--fasta", str(reference), "--bed", str(bed)], "line 1: empty region", out)
    bed.write_text("chrZ\t1\t10\n")
    _bad([*base, "--fasta", str(reference), "--bed", str(bed)], "contig 'chrZ' is not in", out)
    bed.write_text("chrB\t1\t100\n")
    _bad([*base, "--fasta", str(reference), "--bed", str(bed)], "past the end of chrB", out)
    _bad([*base, "--sequences", str(good), "--pool", "max"], "--pool 'max'", out)
    _bad([*base, "--sequences", str(good), "--max-length", "0"], "--max-length", out)
    _bad([*base], "give --sequences FILE", out)
    txt = tmp_path / "o" / "emb.txt"
    _bad(["embed", "-c", str(checkpoint), "--sequences", str(good), "--out", str(txt)],
         "--out must end in", txt)  # fmt: skip


def test_records_api_keeps_order() -> None:
    model = _model()
    records = [SequenceRecord(str(n), encode(_random_dna(n, n)) & 0x7F) for n in (3, 90, 17, 64)]
    vectors = embed_records(model, records, EmbedOptions(batch_size=2), 32)
    for record, vector in zip(records, vectors, strict=True):
        alone = embed_records(model, [record], EmbedOptions(batch_size=1), 32)[0]
        np.testing.assert_allclose(vector, alone, atol=1e-5, rtol=0)
    rc = reverse_complement(records[0].tokens)
    assert rc.shape == records[0].tokens.shape


def test_memory_is_bounded_by_max_length() -> None:
    """A long sequence never reaches the model longer than M, nor in batches above batch_size."""
    model = _model()
    shapes: list[tuple[int, ...]] = []
    handle = model.embed.register_forward_hook(lambda _m, args, _o: shapes.append(args[0].shape))
    try:
        vector = embed(model, [_random_dna(2000, 3)], max_length=64, batch_size=4)
    finally:
        handle.remove()
    assert max(s[1] for s in shapes) == 64 and max(s[0] for s in shapes) == 4
    assert sum(s[0] * s[1] for s in shapes) == 2000 and vector.shape == (1, 32)


@pytest.mark.slow
def test_two_processes_give_the_embeddings_of_one(
    checkpoint: Path, tmp_path: Path, one_thread: None
) -> None:
    """Per-base vectors (uneven lengths) of 5 records in groups of 2: rank 0 embeds two groups,
    rank 1 one; the gathered vectors are the one-process vectors to the byte, in input order.
    Both sides run one torch thread: a 2-thread matmul rounds differently (one ULP seen)."""
    sequences = tmp_path / "seqs.fa"
    sequences.write_text("".join(f">s{i}\n{_random_dna(20 + 7 * i, 40 + i)}\n" for i in range(5)))
    args = ["embed", "-c", str(checkpoint), "--sequences", str(sequences), "--pool", "none",
            "--max-length", "16", "--batch-size", "2", "--accelerator", "cpu"]  # fmt: skip
    one, two = tmp_path / "one.npz", tmp_path / "two.npz"
    res = invoke([*args, "--out", str(one), "--devices", "1"])
    assert res.exit_code == 0, res.output
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "goatdna.cli.app", *args, "--out", str(two), "--devices", "2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "GLOBAL_RANK: 1, MEMBER: 2/2" in proc.stderr + proc.stdout  # two ranks really ran
    with np.load(one) as a, np.load(two) as b:
        assert list(b["names"]) == [f"s{i}" for i in range(5)]
        for key in ("embeddings", "offsets", "names"):
            assert a[key].dtype == b[key].dtype and a[key].tobytes() == b[key].tobytes()


def test_cli_bed_from_plain_gzip_fasta_in_a_read_only_folder(
    checkpoint: Path, reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BED regions come through the one reference reader score-variants uses: a plain-gzip
    FASTA (not bgzip) in a folder goatdna may not write to (no index beside it) embeds the same
    as the plain file (pyfaidx refused both before)."""
    import gzip
    import os
    import stat

    folder = tmp_path / "ro"
    folder.mkdir()
    packed = folder / "ref.fa.gz"
    packed.write_bytes(gzip.compress(reference.read_bytes()))
    bed = tmp_path / "regions.bed"
    bed.write_text("chrB\t10\t60\tr1\nchrA\t5\t45\tr3\t0\t-\n")
    monkeypatch.setenv("GOATDNA_CACHE", str(tmp_path / "cache"))
    os.chmod(folder, stat.S_IRUSR | stat.S_IXUSR)
    outs = []
    try:
        for i, fasta in enumerate((reference, packed)):
            out = tmp_path / f"emb{i}.npz"
            res = invoke(["embed", "-c", str(checkpoint), "--fasta", str(fasta),
                                      "--bed", str(bed), "--out", str(out),
                                      "--max-length", "32"])  # fmt: skip
            assert res.exit_code == 0, res.output
            outs.append(np.load(out)["embeddings"])
    finally:
        os.chmod(folder, stat.S_IRWXU)
    np.testing.assert_array_equal(outs[0], outs[1])
    assert not list(folder.glob("*.fai"))


def test_embed_is_one_library_call_writing_the_commands_bytes(
    checkpoint: Path, reference: Path, tmp_path: Path
) -> None:
    """`goatdna embed` only builds an `EmbedRequest`: the library call with the same request
    writes the same arrays, and the devices are parsed only once the inputs are checked."""
    from goatdna.errors import GoatDNAError
    from goatdna.inference.embed_run import EmbedRequest
    from goatdna.inference.embed_run import embed as run
    from goatdna.runtime import Runtime

    bed = tmp_path / "regions.bed"
    bed.write_text("chrB\t10\t60\tr1\nchrA\t0\t150\n")
    cli_out, lib_out = tmp_path / "cli.npz", tmp_path / "lib.npz"
    args = ["embed", "-c", str(checkpoint), "--fasta", str(reference), "--bed", str(bed)]
    res = invoke([*args, "--out", str(cli_out), "--pool", "last"])
    assert res.exit_code == 0, res.output
    request = EmbedRequest(checkpoint, lib_out, reference, bed, pool="last")
    result = run(request, Runtime)
    assert result is not None and result.records == 2 and result.options.pool == "last"
    assert result.max_length == 64  # 4x the training length of a GOAT model
    with np.load(cli_out) as want, np.load(lib_out) as got:
        assert sorted(got.files) == sorted(want.files) == ["embeddings", "names"]
        for name in want.files:
            np.testing.assert_array_equal(got[name], want[name])
    parsed: list[Runtime] = []

    def devices() -> Runtime:
        parsed.append(Runtime())
        return parsed[-1]

    with pytest.raises(GoatDNAError, match="not both"):
        run(EmbedRequest(checkpoint, tmp_path / "x.npz", reference, bed, sequences=bed), devices)
    assert parsed == [] and not (tmp_path / "x.npz").exists()
