"""`goatdna attention`: per-head weights and their two terms, checked against float64 brute force.

The brute force rebuilds a layer's attention from the paper's definitions with no goatdna
attention code: the block's input from `DNADecoder.hidden` (its ``states``), the content
logits from the layer's q/k projections, GOAT's prior from its parameters (Eqs. (12)-(22):
``K_ij = sum_r a_r cos(w_r(i-j)) + b_r sin(w_r(i-j)) + slope j + g(phi(j)) + sink 1{j=0}``),
ALiBi's as ``-m_h (i - j)``, RoPE's rotation of q and k, in float64; and ``weights @ V`` equals
what the fused kernel handed to the output projection. Then the command: outputs, summaries,
and every bad input one ``error:`` line with nothing written.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import invoke

from goatdna.analysis.attention import attention_maps
from goatdna.checkpoint import save_checkpoint
from goatdna.configfile import to_dict
from goatdna.locking import folder_lock
from goatdna.model import DNADecoder, ModelConfig
from goatdna.model.alibi import slopes_on
from goatdna.model.goat import goat_frequencies

pytestmark = pytest.mark.usefixtures("one_thread")
SCHEMES = ("goat", "rope", "alibi", "nope")
SEQUENCE = "ACGTTGCAAGGCTTACNACGGATCCATGCA"  # 30 bases, an N among them


def _model(positional: str) -> DNADecoder:
    """A 2-layer decoder, every weight (GOAT's prior too) moved far from its init."""
    torch.manual_seed(2)
    config = ModelConfig(
        positional=positional, n_layers=2, d_model=48, n_heads=2, mlp_hidden=64,
        train_length=16, goat_modes=3, goat_mlp_hidden=8,
    )  # fmt: skip
    model = DNADecoder(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    return model


def _brute_prior(prior: torch.nn.Module, length: int) -> np.ndarray:
    """GOAT's K_ij (H, L, L) from its parameters, float64, straight from Eqs. (12)-(22)."""
    p = {name: t.detach().double().numpy() for name, t in prior.named_parameters()}
    w = goat_frequencies(prior.num_modes, prior.freq_base).numpy()  # (R,)
    i = np.arange(length)[:, None]
    j = np.arange(length)[None, :]
    t = (i - j)[None, :, :, None] * w  # (1, L, L, R)
    rel = (p["alpha"][:, None, None, :] * np.cos(t) + p["beta"][:, None, None, :] * np.sin(t)).sum(
        -1
    )
    pos = np.arange(length, dtype=np.float64)
    phi = np.concatenate(
        [
            np.cos(pos[:, None] * w),
            np.sin(pos[:, None] * w),
            (pos / prior.train_length)[:, None],
            (np.log1p(pos) / math.log1p(prior.train_length))[:, None],
        ],
        axis=1,
    )  # (L, 2R + 2)
    hidden = np.einsum("lf,hfm->hlm", phi, p["mlp_w1"]) + p["mlp_b1"][:, None, :]
    hidden = hidden / (1 + np.exp(-hidden))  # SiLU
    g = np.einsum("hlm,hm->hl", hidden, p["mlp_w2"]) + p["mlp_b2"][:, None]
    u = p["slope"][:, None] * pos + g + p["sink"][:, None] * (pos == 0)  # (H, L)
    return rel + u[:, None, :]


def _brute_layer(model: DNADecoder, ids: torch.Tensor, layer: int) -> tuple[np.ndarray, np.ndarray]:
    """(weights (H, L, L), weights @ V (L, H * d_h)) of one layer in float64."""
    config = model.config
    H, dh, dqk = config.n_heads, config.head_dim, config.content_dim
    states: list[torch.Tensor] = []
    with torch.no_grad():
        model.hidden(ids, states=states)
        block = model.blocks[layer]
        x = block.attn_norm(states[layer])[0].double().numpy()  # (L, d_model)
    L = x.shape[0]
    q, k, v = (
        x @ getattr(block.attn, f"{name}_proj").weight.detach().double().numpy().T for name in "qkv"
    )
    q = q.reshape(L, H, dqk).transpose(1, 0, 2)
    k = k.reshape(L, H, dqk).transpose(1, 0, 2)
    v = v.reshape(L, H, dh).transpose(1, 0, 2)
    if config.positional == "rope":  # rotate pairs (x[k], x[k + d/2]) by pos * base^(-2k/d)
        theta = config.rope_base ** (-np.arange(0, dh, 2) / dh)
        angle = np.arange(L)[:, None] * theta[None, :]
        cos, sin = np.cos(np.tile(angle, 2)), np.sin(np.tile(angle, 2))
        q, k = (
            t * cos + np.concatenate([-t[..., dh // 2 :], t[..., : dh // 2]], -1) * sin
            for t in (q, k)
        )
    logits = q @ k.transpose(0, 2, 1) / math.sqrt(dqk)  # (H, L, L)
    if config.positional == "goat":
        logits = logits + _brute_prior(block.attn.prior, L)
    elif config.positional == "alibi":
        m = slopes_on(H, torch.device("cpu")).numpy()
        logits = logits - m[:, None, None] * (np.arange(L)[:, None] - np.arange(L)[None, :])
    logits = np.where(np.tril(np.ones((L, L), bool)), logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return weights, (weights @ v).transpose(1, 0, 2).reshape(L, H * dh)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_maps_equal_a_float64_brute_force_and_the_fused_output(scheme: str) -> None:
    from goatdna.io.tokens import encode
    from goatdna.model.attention_maps import attention_terms

    model = _model(scheme)
    tokens = encode(SEQUENCE)
    ids = torch.as_tensor(tokens.astype(np.int64))[None]
    maps = attention_maps(model, tokens, [0, 1])
    fused: list[torch.Tensor] = []
    hooks = [
        b.attn.o_proj.register_forward_pre_hook(lambda _m, a: fused.append(a[0]))
        for b in model.blocks
    ]
    with torch.no_grad():
        model(ids)
        terms = attention_terms(model, ids, [0, 1])
    for hook in hooks:
        hook.remove()
    for row, layer in enumerate((0, 1)):
        weights, output = _brute_layer(model, ids, layer)
        np.testing.assert_allclose(maps.weights[row], weights, atol=1e-5, rtol=0)
        B, H, L, d = terms[row].output.shape
        got = terms[row].output.transpose(1, 2).reshape(B, L, H * d)[0]
        np.testing.assert_allclose(got.numpy(), output, atol=1e-5, rtol=0)
        torch.testing.assert_close(got, fused[layer][0], atol=1e-5, rtol=0)
        # the two terms add up to the logits the weights came from
        logits = maps.content[row] + (maps.prior[row] if maps.prior is not None else 0.0)
        masked = np.where(np.tril(np.ones((L, L), bool)), logits, -np.inf)
        np.testing.assert_allclose(
            maps.weights[row], np.exp(masked) / np.exp(masked).sum(-1, keepdims=True), atol=1e-5
        )
    if scheme == "alibi":  # its prior, relative to the query, is exactly its bias -m d
        m = slopes_on(2, torch.device("cpu")).numpy()
        np.testing.assert_allclose(
            maps.prior_profile[0], -m[:, None] * np.arange(len(tokens)), atol=1e-4, rtol=0
        )
    if scheme in ("rope", "nope"):
        assert maps.prior is None and maps.prior_profile is None
        assert np.isnan(maps.prior_share).all()
    else:
        assert ((maps.prior_share >= 0) & (maps.prior_share <= 1)).all()


def test_prior_share_tells_a_positional_head_from_a_content_head() -> None:
    """Head 0 with its content queries zeroed (logits = prior only) is positional (share 1);
    head 1 with a zero prior (logits = content only) is content-driven (share 0)."""
    model = _model("goat")
    dqk = model.config.content_dim
    prior = model.prior(0)
    with torch.no_grad():
        model.blocks[0].attn.q_proj.weight[:dqk].zero_()  # head 0's content queries
        for name in ("alpha", "beta", "slope", "sink", "mlp_b2"):
            getattr(prior, name)[1] = 0.0
        prior.mlp_w2[1] = 0.0  # head 1: K == 0
    from goatdna.io.tokens import encode

    maps = attention_maps(model, encode(SEQUENCE), [0])
    assert maps.prior_share[0, 0] == pytest.approx(1.0, abs=1e-6)
    assert maps.prior_share[0, 1] == pytest.approx(0.0, abs=1e-6)
    assert (maps.head_kind(0, 0), maps.head_kind(0, 1)) == ("positional", "content")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("attention_ckpts")
    return {
        scheme: save_checkpoint(folder / f"{scheme}.ckpt", model, {"model": to_dict(model.config)})
        for scheme in ("goat", "rope")
        for model in [_model(scheme)]
    }


@pytest.fixture(scope="module")
def fasta(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("attention_fasta") / "ref.fa"
    path.write_text(f">chrA\n{SEQUENCE}\n{SEQUENCE.lower()}\n>chrB\nACGT\n")
    return path


def test_the_command_writes_the_arrays_and_the_figure(checkpoints, fasta, tmp_path) -> None:
    npz, png = tmp_path / "a.npz", tmp_path / "a.png"
    args = ["attention", "-c", str(checkpoints["goat"]), "-f", str(fasta), "-r", "chrA:1-40"]
    res = invoke([*args, "--layer", "1", "-o", str(npz), "-o", str(png), "--head", "1"])
    assert res.exit_code == 0, res.output
    assert "prior_share" in res.output and "positional" in res.output or "content" in res.output
    with np.load(npz) as data:
        assert str(data["scheme"]) == "goat" and list(data["layers"]) == [1]
        assert str(data["sequence"]) == (SEQUENCE + SEQUENCE)[:40].upper()
        assert (
            data["weights"].shape == data["content"].shape == data["prior"].shape == (1, 2, 40, 40)
        )
        assert data["prior_share"].shape == (1, 2) and data["weight_profile"].shape == (1, 2, 40)
        from goatdna.io.tokens import encode

        want = attention_maps(_model("goat"), encode((SEQUENCE * 2)[:40]), [1])
        np.testing.assert_allclose(data["weights"], want.weights, atol=1e-6)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # RoPE: no prior, said so; every layer by default
    out = tmp_path / "rope.npz"
    res = invoke(
        ["attention", "-c", str(checkpoints["rope"]), "--sequence", SEQUENCE, "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "RoPE has no additive prior" in res.output
    with np.load(out) as data:
        assert "prior" not in data and list(data["layers"]) == [0, 1]
        assert "no additive prior" in str(data["note"])


def test_bad_inputs_are_one_line_errors_without_output(checkpoints, fasta, tmp_path) -> None:
    out = tmp_path / "o" / "a.npz"
    out.parent.mkdir()
    ckpt = str(checkpoints["goat"])

    def bad(message: str, *args: str, outs: tuple[Path, ...] = (out,)) -> None:
        given = [a for path in outs for a in ("-o", str(path))]
        res = invoke(["attention", "-c", ckpt, *given, *args])
        assert res.exit_code == 2, res.output + str(res.exception)
        assert res.stderr.startswith("error: ") and len(res.stderr.strip().splitlines()) == 1
        assert message in res.stderr, res.stderr
        assert {p.name for p in out.parent.iterdir()} - {"keep.npz"} == set()

    bad("exactly one of --sequence or --fasta")
    bad(
        "exactly one of --sequence or --fasta",
        "--sequence",
        "ACGT",
        "-f",
        str(fasta),
        "-r",
        "chrA:1-4",
    )
    bad("--fasta needs --region", "-f", str(fasta))
    bad("--region needs --fasta", "--sequence", "ACGT", "-r", "chrA:1-4")
    bad("unknown extension .csv", "--sequence", "ACGT", outs=(tmp_path / "o" / "a.csv",))
    bad("--sequence", "--sequence", "ACGX")
    bad("at least 2", "--sequence", "A")
    bad("--layer 2: the model has 2 layers", "--sequence", "ACGT", "--layer", "2")
    bad("--head 5: the model has 2 heads", "--sequence", "ACGT", "--head", "5")
    bad("ends beyond contig 'chrA'", "-f", str(fasta), "-r", "chrA:1-100")
    bad("is not in ref.fa", "-f", str(fasta), "-r", "chrZ:1-10")
    bad("expected contig:start-end", "-f", str(fasta), "-r", "chrA")
    bad(
        "a map shows at most 2,048 bases",
        "--sequence",
        "A" * 3000,
        outs=(tmp_path / "o" / "a.png",),
    )
    bad("above the 8 GiB bound: ask for at most 1 layer(s) with --layer", "--sequence",
        "ACGT" * 2625)  # 10,500 bases: one of the two layers fits  # fmt: skip
    bad("read at most 11,151 bases (--sequence) with one --layer", "--sequence", "A" * 12000)
    bad("bound: read at most 11,151 bases (--sequence)", "--sequence", "A" * 12000, "--layer", "1")
    png = tmp_path / "a.png"
    with folder_lock(png, "--out"):  # this process plays a first run still writing a.png
        res = invoke(["attention", "-c", ckpt, "-o", str(out), "-o", str(png),
                                  "--sequence", "ACGT"])  # fmt: skip
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.output
    assert f"--out {png} is in use by another goatdna process (pid {os.getpid()}" in res.stderr
    assert not out.exists() and not png.exists()
    # a refusal after the outputs' locks were taken leaves no folder the locks made for them
    bad("--sequence", "--sequence", "ACGX", outs=(tmp_path / "new" / "deep" / "a.npz",))
    assert not (tmp_path / "new").exists()
    keep = out.parent / "keep.npz"
    keep.write_bytes(b"keep me")
    bad("exists; pass --force", "--sequence", "ACGT", outs=(keep,))
    assert keep.read_bytes() == b"keep me"
    res = invoke(["attention", "-c", ckpt, "-o", str(keep), "--sequence", "ACGT", "--force"])
    assert res.exit_code == 0, res.output
    with np.load(keep) as data:
        assert data["weights"].shape == (2, 2, 4, 4)


PEAK_SCRIPT = """
import json, sys
from pathlib import Path
import numpy as np, torch
from goatdna.analysis.attention import attention_maps, write_npz
from goatdna.model import DNADecoder, ModelConfig

def status(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) * 1024

torch.manual_seed(0)
config = ModelConfig(positional=sys.argv[1], n_layers=3, d_model=32, n_heads=4, mlp_hidden=32,
                     train_length=16, goat_modes=2, goat_mlp_hidden=8)
model = DNADecoder(config).eval()
tokens = np.random.default_rng(0).integers(0, 4, 2048).astype(np.uint8)
for case in json.loads(sys.argv[2]):
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = status("VmRSS")
    maps = attention_maps(model, tokens[: case["length"]], case["layers"])
    write_npz(maps, Path(sys.argv[3]))
    del maps
    print(json.dumps({**case, "peak": status("VmHWM") - before}), flush=True)
"""


@pytest.mark.parametrize("positional", ["goat", "rope"])
def test_peak_memory_estimate_bounds_the_measured_peak(positional, tmp_path) -> None:
    """`peak_bytes` >= the peak resident memory `attention_maps` (and the .npz) really take, at
    a few lengths and layer counts, and not far above it: the old check counted the output maps
    alone and was ~5x under (6,500 bases, one layer: 9.6 GB past a 2 GiB check).

    Measured in a fresh process (torch's memory is not Python's, so not tracemalloc: VmHWM of
    /proc/self/status, reset to VmRSS before each case through /proc/self/clear_refs), the cases
    in growing size: heap pages freed by earlier work would hide a peak in this one."""
    import json
    import os
    import subprocess
    import sys

    from goatdna.analysis.attention import FIXED_PEAK_BYTES, peak_bytes

    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("peak RSS cannot be reset here (no /proc/self/clear_refs)")
    cases = [{"length": 512, "layers": [0, 1, 2]}, {"length": 1024, "layers": [1]},
             {"length": 1024, "layers": [0, 1, 2]}, {"length": 2048, "layers": [2]}]  # fmt: skip
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }
    done = subprocess.run(
        [sys.executable, "-c", PEAK_SCRIPT, positional, json.dumps(cases), str(tmp_path / "a.npz")],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    measured = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(measured) == len(cases), done.stdout
    for case in measured:
        estimate = peak_bytes(case["length"], 4, len(case["layers"]), positional == "goat")
        what = (case, estimate)
        assert case["peak"] <= estimate, what
        # a sane factor: what grows with H L^2 is at most 4x the measured peak (3.4x at most
        # here: the heap slack of small maps), 1.2x-1.6x where the maps dominate
        assert estimate - FIXED_PEAK_BYTES <= 4 * case["peak"], what


def test_the_command_is_one_library_call(checkpoints, fasta, tmp_path) -> None:
    """`goatdna attention` only builds an `AttentionRequest`: `attention_run.attention` reads the
    sequence (the FASTA through the reader it is given), computes the maps and writes them."""
    from goatdna.analysis.attention_run import AttentionRequest, attention, read_sequence
    from goatdna.errors import GoatDNAError
    from goatdna.inference.reference import read_region
    from goatdna.io.tokens import encode

    npz = tmp_path / "a.npz"
    request = AttentionRequest(
        checkpoints["goat"], (npz,), fasta=fasta, region="chrA:1-40", layers=(1,)
    )
    result = attention(request, read_region)
    assert (result.label, result.bases, result.positional) == ("chrA:1-40", 40, "goat")
    assert result.written == [npz] and result.train_length == 16
    want = attention_maps(_model("goat"), encode((SEQUENCE * 2)[:40]), [1])
    with np.load(npz) as data:
        np.testing.assert_allclose(data["weights"], want.weights, atol=1e-6)
    calls: list[tuple] = []
    inline = AttentionRequest(checkpoints["goat"], (npz,), sequence="ACGT")
    tokens, label = read_sequence(inline, lambda *args: calls.append(args))  # type: ignore[arg-type,return-value]
    assert label == "--sequence" and list(tokens) == [0, 1, 2, 3] and calls == []
    with pytest.raises(GoatDNAError, match="exactly one of --sequence or --fasta"):
        read_sequence(AttentionRequest(checkpoints["goat"], (npz,)), read_region)
