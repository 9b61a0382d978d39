"""score-track: bases/s GOAT vs RoPE on the 1 Mbp chr20 piece, and peak memory at 1 vs 10 Mbp.

Side by side in one run, on randomly initialised models (speed and memory do not depend on the
weights), fp32 on CPU:

- speed: `write_tracks` over the shared 1 Mbp GRCh37 chr20 piece (bigWig, logp, both strands,
  C = training length, S = C/2: the defaults), GOAT and RoPE decoders of the same small shape
  (2 layers, d_model 64, training length 128, as the tests' tiny runs); one untimed warm-up
  call per model, then ``--rounds`` alternating GOAT, RoPE / RoPE, GOAT, best round each;
- memory: the same pipeline in a fresh subprocess per size, on one region of 1 Mbp and of 10 Mbp
  (the piece tiled 10 times into one contig), peak RSS (ru_maxrss) of the process and its growth
  over the RSS just before scoring. A 1-layer model with C=32, S=31 on the forward strand keeps
  the 10 Mbp run to minutes on a shared CPU; what could grow with the region (reads, values,
  the bigWig writer) does not depend on the model.

    python benchmarks/track_bench.py [--threads 2] [--mbp 1.0] [--sizes 1,10] [--rounds 2]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from goatdna.configfile import from_dict, load_yaml
from goatdna.inference.reference import Reference
from goatdna.inference.tracks import TrackOptions, TrackRequest, write_tracks
from goatdna.io.regions import Region
from goatdna.model import DNADecoder, ModelConfig

ROOT = Path(__file__).resolve().parents[1]
PIECE = ROOT.parent / "shared" / "data" / "grch37_chr20_1000001-2000000.fa.gz"
SMALL = {"n_layers": 2, "d_model": 64, "n_heads": 2, "mlp_hidden": 176, "goat_modes": 4}
MICRO = {"n_layers": 1, "d_model": 32, "n_heads": 1, "mlp_hidden": 64, "goat_modes": 4}
MEMORY_CONTEXT, MEMORY_STRIDE = 32, 31
MODELS = ("goat", "rope")


def _model(
    positional: str, shape: dict | None = None, train_length: int | None = None
) -> DNADecoder:
    data = load_yaml(ROOT / "configs" / f"{positional}-tiny.yaml")["model"]
    data.update(shape or {})
    if train_length:
        data["train_length"] = train_length
    torch.manual_seed(0)
    return DNADecoder(from_dict(ModelConfig, data, "model")).eval()


def _write_fasta(path: Path, copies: int) -> None:
    """The piece's bases, ``copies`` times over, as one 60-column contig ``tiled``."""
    with gzip.open(PIECE, "rt") as handle:
        handle.readline()
        bases = "".join(line.strip() for line in handle)
    line = 60
    with open(path, "w") as out:
        out.write(">tiled\n")
        carry = ""
        for _ in range(copies):  # wrap across copies: every full line has 60 bases
            text = carry + bases
            full = len(text) // line * line
            out.writelines(text[i : i + line] + "\n" for i in range(0, full, line))
            carry = text[full:]
        if carry:
            out.write(carry + "\n")


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _current_rss_mib() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def speed(args: argparse.Namespace, work: Path) -> list[dict]:
    """Both models over the same region, after one untimed warm-up call each.

    The first `write_tracks` call of a process imports what the pipeline needs (transformers and
    Lightning through the Fabric, the bigWig writer): ~5 CPU seconds, which used to be charged
    to GOAT, timed first (GOAT 1,100 vs RoPE 3,465 bases/s over 50 kbp in one such run, 0.68 vs
    0.82 s once warm). The timed calls then alternate GOAT, RoPE / RoPE, GOAT over ``--rounds``
    and each model's best round is kept.
    """
    fasta = work / "piece.fa"
    _write_fasta(fasta, 1)
    n = int(args.mbp * 1_000_000)
    models = {positional: _model(positional, SMALL, train_length=128) for positional in MODELS}
    best = dict.fromkeys(MODELS, float("inf"))
    with Reference(fasta) as reference:

        def run(positional: str, bases: int) -> float:
            model = models[positional]
            C = model.config.train_length
            out = work / f"{positional}.bw"
            start = time.perf_counter()
            request = TrackRequest(out, TrackOptions(C, C // 2), force=True)
            write_tracks(model, reference, [Region("tiled", 0, bases)], request)
            return time.perf_counter() - start

        for positional in MODELS:
            run(positional, 2_000)  # warm-up: first-call costs stay out of the timings
        for r in range(args.rounds):
            for positional in MODELS if r % 2 == 0 else MODELS[::-1]:
                best[positional] = min(best[positional], run(positional, n))
    C = models["goat"].config.train_length
    return [
        {"model": positional, "context": C, "bases": n, "seconds": best[positional]}
        for positional in MODELS
    ]


OUTPUTS = {  # memory variants: output name, bigWig zoom levels
    "bedGraph": ("m.bedGraph", 0),
    "bigWig, --zoom-levels 0": ("m.bw", 0),
    "bigWig, 10 zoom levels (default)": ("m.bw", 10),
}


def memory_child(size_mbp: int, fasta: Path, variant: str) -> None:
    """One track of ``size_mbp`` Mbp in this process; prints JSON with the RSS numbers."""
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    model = _model("goat", MICRO, train_length=MEMORY_CONTEXT)
    with Reference(fasta) as reference:
        n = size_mbp * 1_000_000
        region = Region("tiled", 0, n)
        before = _current_rss_mib()
        start = time.perf_counter()
        options = TrackOptions(MEMORY_CONTEXT, MEMORY_STRIDE, strands="forward")
        name, zooms = OUTPUTS[variant]
        out = fasta.with_name(name)
        write_tracks(model, reference, [region], TrackRequest(out, options, zoom_levels=zooms))
        seconds = time.perf_counter() - start
    peak = _rss_mib()
    print(
        json.dumps(
            {
                "mbp": size_mbp,
                "variant": variant,
                "before": before,
                "peak": peak,
                "seconds": seconds,
            }
        )
    )


def memory(args: argparse.Namespace, work: Path) -> list[dict]:
    sizes = [int(s) for s in args.sizes.split(",")]
    fasta = work / "tiled.fa"
    _write_fasta(fasta, max(sizes))
    Reference(fasta).close()  # index once, outside the measured processes
    rows = []
    env = dict(os.environ, BENCH_THREADS=str(args.threads))
    for variant in OUTPUTS:
        for size in sizes:
            cmd = [sys.executable, __file__, "--memory-child", str(size), str(fasta), variant]
            done = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--mbp", type=float, default=1.0, help="bases of the speed run (Mbp)")
    parser.add_argument("--sizes", default="1,10", help="region sizes of the memory runs (Mbp)")
    parser.add_argument("--parts", default="speed,memory", help="speed, memory or both")
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds of the speed part")
    parser.add_argument("--memory-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        size, fasta, variant = args.memory_child
        memory_child(int(size), Path(fasta), variant)
        return
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        parts = args.parts.split(",")
        rows = speed(args, work) if "speed" in parts else []
        base = rows[0]["bases"] / rows[0]["seconds"] if rows else 1.0
        if rows:
            print(
                "\nscore-track speed (2 layers, d_model 64; bigWig, logp, both strands, "
                "C = training length 128, S = C/2)\n"
            )
            print("| model | context C | bases | seconds | bases/s | ratio to GOAT |")
            print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for r in rows:
            rate = r["bases"] / r["seconds"]
            print(
                f"| {r['model']} | {r['context']} | {r['bases']:,} | {r['seconds']:.1f} | "
                f"{rate:,.0f} | {rate / base:.2f} |"
            )
        if "memory" not in parts:
            return
        mem = memory(args, work)
        print(
            "\nscore-track peak memory (one region; GOAT 1 layer, d_model 32; C=32, S=31, "
            "forward strand)\n"
        )
        print(
            "| output | region | seconds | RSS before scoring MiB | peak RSS MiB | growth MiB "
            "| peak / 1 Mbp peak |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        first = {}
        for r in mem:
            first.setdefault(r["variant"], r["peak"])
            print(
                f"| {r['variant']} | {r['mbp']} Mbp | {r['seconds']:.1f} | {r['before']:.0f} | "
                f"{r['peak']:.0f} | {r['peak'] - r['before']:.0f} | "
                f"{r['peak'] / first[r['variant']]:.3f} |"
            )


if __name__ == "__main__":
    main()
