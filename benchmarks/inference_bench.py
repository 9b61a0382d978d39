"""GOAT vs RoPE time at inference: score-track, embed, evaluate and score-variants, side by side.

One run, randomly initialised fp32 models (speed does not depend on the weights), on the shared
GRCh37 chr20 piece and 1000 Genomes VCF, for each model shape:

- ``small``: 2 layers x d_model 64, training length 128 (track_bench's shape);
- ``tiny``: configs/*-tiny.yaml, 4 x 128, training length 256 (embed/variants/analysis benches);
- ``125m``: configs/*-125m.yaml, 18 x 768 (few windows, context ``--big-context``).

Workloads, each through the library function behind its command:

- score-track: `write_tracks` (bigWig, logp, both strands, C = the context, S = C/2);
- embed: `embed_records` of 1 kbp sequences, mean-pooled, M = the context;
- evaluate: `score_windows` over evenly spaced windows of the context length;
- score-variants: `score_alleles` with the shared prefix (W = the context, both strands), and for
  the shared-prefix speed-up also with two full windows per allele.

Each round runs every (workload, model) once, GOAT, GOAT without its window cache (the slots
recomputed every call, as before the cache) and RoPE in an order rotated every round, so load
from other processes hits all alike; the table gives each one's median seconds and the medians
of the per-round ratios. Times are CPU seconds of this process (torch runs ``--threads``
threads; with one, CPU seconds are what an idle core would take, and far less noisy than the
wall clock on a shared machine); ``--clock wall`` reports wall-clock seconds instead.

    python benchmarks/inference_bench.py [--threads 1] [--rounds 5] [--shapes small,tiny,125m]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_data import DATA, FASTA, VCF, chr20_piece, chr20_reference, write_fasta  # noqa: E402

from goatdna.configfile import from_dict, load_yaml  # noqa: E402
from goatdna.inference.embed import EmbedOptions, SequenceRecord, embed_records  # noqa: E402
from goatdna.inference.reference import Reference  # noqa: E402
from goatdna.inference.tracks import TrackOptions, TrackRequest, write_tracks  # noqa: E402
from goatdna.inference.variant_io import read_alleles  # noqa: E402
from goatdna.inference.variants import VariantOptions, allele_status, score_alleles  # noqa: E402
from goatdna.io.regions import Region  # noqa: E402
from goatdna.io.tokens import TOKEN_MASK, encode  # noqa: E402
from goatdna.model import DNADecoder, ModelConfig  # noqa: E402
from goatdna.model.goat import WINDOW_CACHE_ENTRIES, GoatPrior  # noqa: E402


@dataclass(frozen=True)
class Shape:
    config: str  # configs/{positional}-{config}.yaml
    overrides: dict
    context: int
    track_bases: int
    embed_sequences: int
    eval_windows: int
    alleles: int
    batch_size: int


SHAPES = {
    "small": Shape(
        "tiny",
        {"n_layers": 2, "d_model": 64, "n_heads": 2, "mlp_hidden": 176, "goat_modes": 4,
         "train_length": 128},
        128, 20_000, 64, 256, 100, 64,
    ),
    "tiny": Shape("tiny", {"train_length": 256}, 256, 10_000, 32, 128, 100, 64),
    "125m": Shape("125m", {"attention": "sdpa"}, 256, 256, 1, 4, 1, 8),
}  # fmt: skip


def _model(positional: str, shape: Shape) -> DNADecoder:
    data = load_yaml(ROOT / "configs" / f"{positional}-{shape.config}.yaml")["model"]
    data.update(shape.overrides)
    data["positional"] = positional
    torch.manual_seed(0)
    model = DNADecoder(from_dict(ModelConfig, data, "model")).eval()
    if positional == "goat":  # a prior with every term switched on (zero init would be trivial)
        with torch.no_grad():
            for layer in range(model.n_layers):
                prior = model.prior(layer)
                assert prior is not None
                for p in prior.parameters():
                    p.normal_(0, 0.1)
    return model


@contextlib.contextmanager
def _uncached(model: DNADecoder) -> Iterator[None]:
    """GOAT with its window cache switched off: every call recomputes the position slots."""
    priors = [p for i in range(model.n_layers) if isinstance(p := model.prior(i), GoatPrior)]
    for prior in priors:
        prior._window_tails.entries = 0
        prior._window_tails.clear()
    try:
        yield
    finally:
        for prior in priors:
            prior._window_tails.entries = WINDOW_CACHE_ENTRIES


class Workloads:
    """The four commands' library calls on fixed inputs, for one shape."""

    def __init__(self, shape: Shape, work: Path, piece: str) -> None:
        self.shape = shape
        self.work = work
        C = shape.context
        start = 100_000  # past the piece's leading N run
        self.track_ref = Reference(write_fasta(work / "track.fa", "piece", piece[start:]), work)
        self.track_options = TrackOptions(C, C // 2)
        tokens = encode(piece[start : start + 400_000]) & TOKEN_MASK
        self.embed_records = [
            SequenceRecord(str(i), tokens[i * 1000 : (i + 1) * 1000])
            for i in range(shape.embed_sequences)
        ]
        self.eval_tokens = tokens
        self.eval_starts = np.linspace(0, tokens.size - C - 2, shape.eval_windows).astype(np.int64)
        # score-variants: contig 20 = 1 Mbp of N + the piece, as benchmarks/variants_bench.py
        self.variant_ref = Reference(chr20_reference(work, piece), work)
        self.alleles = read_alleles(VCF).alleles[: shape.alleles]
        self.statuses = [allele_status(a, self.variant_ref) for a in self.alleles]

    def score_track(self, model: DNADecoder) -> None:
        region = Region("piece", 0, self.shape.track_bases)
        out = self.work / "track.bw"
        write_tracks(
            model, self.track_ref, [region], TrackRequest(out, self.track_options, force=True)
        )

    def embed(self, model: DNADecoder) -> None:
        C = self.shape.context
        embed_records(model, self.embed_records, EmbedOptions(max_length=C), C)

    def evaluate(self, model: DNADecoder) -> None:
        from goatdna.analysis.evaluate import score_windows

        C = self.shape.context
        batch = max(1, 16384 // C)
        score_windows(model, self.eval_tokens, self.eval_starts, C, batch)

    def _variants(self, model: DNADecoder, shared: bool) -> np.ndarray:
        options = VariantOptions(self.shape.context, "both", self.shape.batch_size, shared)
        return score_alleles(model, self.alleles, self.statuses, self.variant_ref, options)[0]

    def variants_shared(self, model: DNADecoder) -> None:
        self._variants(model, True)

    def variants_full(self, model: DNADecoder) -> None:
        self._variants(model, False)

    def all(self) -> dict[str, Callable[[DNADecoder], None]]:
        return {
            "score-track": self.score_track,
            "embed": self.embed,
            "evaluate": self.evaluate,
            "score-variants (shared prefix)": self.variants_shared,
            "score-variants (two full windows)": self.variants_full,
        }


CLOCK = time.process_time


def _timed(run: Callable[[], None]) -> float:
    start = CLOCK()
    run()
    return CLOCK() - start


def bench_shape(name: str, shape: Shape, rounds: int, piece: str) -> list[dict]:
    goat, rope = _model("goat", shape), _model("rope", shape)
    kinds: dict[str, Callable[[Callable[[DNADecoder], None]], float]] = {
        "goat": lambda job: _timed(lambda: job(goat)),
        "goat uncached": lambda job: _uncached_time(goat, job),
        "rope": lambda job: _timed(lambda: job(rope)),
    }
    order = list(kinds)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        loads = Workloads(shape, Path(tmp), piece)
        for workload, job in loads.all().items():
            for kind in order:  # warm-up: first-call costs (tables, allocator) stay out
                kinds[kind](job)
            times: dict[str, list[float]] = {k: [] for k in order}
            for r in range(rounds):
                for kind in order[r % 3 :] + order[: r % 3]:
                    times[kind].append(kinds[kind](job))
            ratio = [g / o for g, o in zip(times["goat"], times["rope"], strict=True)]
            before = [g / o for g, o in zip(times["goat uncached"], times["rope"], strict=True)]
            rows.append({
                "shape": name, "workload": workload,
                **{k: statistics.median(v) for k, v in times.items()},
                "goat/rope": statistics.median(ratio),
                "goat/rope range": (min(ratio), max(ratio)),
                "uncached/rope": statistics.median(before),
                "times": times,
            })  # fmt: skip
            print(_row(rows[-1]), flush=True)
        tokens = {shared: _tokens_run(goat, loads, shared) for shared in (True, False)}
        rows.extend(_shared_prefix_rows(name, rows, tokens[False] / tokens[True]))
    return rows


def _tokens_run(model: DNADecoder, loads: Workloads, shared: bool) -> int:
    """Token positions the decoder runs for score-variants (counted at the embedding)."""
    count = [0]

    def hook(_module: torch.nn.Module, inputs: tuple, _output: torch.Tensor) -> None:
        count[0] += inputs[0].numel()

    handle = model.embed.register_forward_hook(hook)
    try:
        (loads.variants_shared if shared else loads.variants_full)(model)
    finally:
        handle.remove()
    return count[0]


def _uncached_time(model: DNADecoder, job: Callable[[DNADecoder], None]) -> float:
    with _uncached(model):
        return _timed(lambda: job(model))


def _shared_prefix_rows(name: str, rows: list[dict], token_ratio: float) -> list[dict]:
    """score-variants' speed-up of the shared prefix over two full windows, per round's pair."""
    by = {r["workload"]: r for r in rows if r["shape"] == name}
    shared = by.get("score-variants (shared prefix)")
    full = by.get("score-variants (two full windows)")
    if not shared or not full:
        return []
    out = []
    for kind in ("goat", "goat uncached", "rope"):
        speedups = [f / s for f, s in zip(full["times"][kind], shared["times"][kind], strict=True)]
        out.append({
            "shape": name, "speed-up of": kind, "median": statistics.median(speedups),
            "range": (min(speedups), max(speedups)), "token ratio": token_ratio,
        })  # fmt: skip
    return out


def _row(r: dict) -> str:
    lo, hi = r["goat/rope range"]
    return (
        f"| {r['shape']} | {r['workload']} | {r['goat']:.3f} | {r['goat uncached']:.3f} | "
        f"{r['rope']:.3f} | {r['goat/rope']:.3f} ({lo:.2f}-{hi:.2f}) | {r['uncached/rope']:.3f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shapes", default="small,tiny,125m")
    parser.add_argument("--big-context", type=int, default=256, help="context of the 125m shape")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    torch.set_num_threads(args.threads)
    if not FASTA.is_file() or not VCF.is_file():
        sys.exit(f"needs the shared data in {DATA}")
    piece = chr20_piece()
    print(f"inference_bench {date.today()}, torch {torch.__version__}, {args.threads} thread(s), "
          f"{args.rounds} rounds, {args.clock} seconds\n")  # fmt: skip
    print("| shape | workload | GOAT s | GOAT uncached s | RoPE s | GOAT / RoPE (range) "
          "| uncached / RoPE |")  # fmt: skip
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    rows: list[dict] = []
    for name in args.shapes.split(","):
        shape = SHAPES[name]
        if name == "125m":
            shape = Shape(**{**shape.__dict__, "context": args.big_context})
        rows.extend(bench_shape(name, shape, args.rounds, piece))
    print("\nscore-variants: two full windows / shared prefix, median of the per-round ratios\n")
    print("| shape | model | speed-up, median (range) | tokens run, full / shared |")
    print("| --- | --- | ---: | ---: |")
    for r in rows:
        if "speed-up of" in r:
            lo, hi = r["range"]
            print(
                f"| {r['shape']} | {r['speed-up of']} | {r['median']:.2f}x ({lo:.2f}-{hi:.2f}) "
                f"| {r['token ratio']:.2f}x |"
            )


if __name__ == "__main__":
    main()
