"""mutagenesis speed: `full` and `local` against scoring the same SNVs one allele at a time.

Side by side in one run, on a region of the shared GRCh37 chr20 piece (a contig `20` of 1,000,000
N + the piece, as the score-variants benchmark builds it) with randomly initialised models of the
tiny configs' shape (speed does not depend on the weights). Every method scores the same
``positions x 3`` SNVs on both strands at the same window:

- per allele, shared prefix: `score_alleles` (what `goatdna score-variants` runs: per allele and
  strand one pass over s_ref fills the KV cache and s_alt's suffix runs on it, ~1.5 windows);
- per allele, two full windows: s_ref and s_alt from position 0 (2 windows per allele and strand;
  the "6 windows per position" the issue counts);
- full: `goatdna mutagenesis --method full` (the flank once, then REF + 3 ALT suffixes on it,
  ~2.5 windows per position and strand); its LLRs are checked equal to the per-allele ones;
- local: `--method local` (one causal pass per chunk of W - W//2 positions and strand).

Each round times all four back to back; ratios are medians of the per-round ratios (robust to
load that changes between rounds), throughputs each method's best round.

    python benchmarks/mutagenesis_bench.py [--positions 64] [--window 256] [--rounds 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from bench_data import chr20_reference, tiny_model  # noqa: E402 (this folder)

from goatdna.inference.mutagenesis import MutagenesisOptions, combine, full_scores, local_scores
from goatdna.inference.reference import Reference
from goatdna.inference.variants import Allele, VariantOptions, combine_strands, score_alleles
from goatdna.model import DNADecoder

REGION_START = 1_500_000  # 0-based, inside the real piece


def _alleles(contig: np.ndarray, positions: range) -> tuple[list[Allele], np.ndarray, np.ndarray]:
    alleles, rows, columns = [], [], []
    for row, p in enumerate(positions):
        ref = int(contig[p])
        if ref >= 4:
            continue
        for b in range(4):
            if b != ref:
                alleles.append(Allele(0, "20", p + 1, ".", "ACGT"[ref], "ACGT"[b]))
                rows.append(row)
                columns.append(b)
    return alleles, np.array(rows), np.array(columns)


def _timed(action: Callable[[], np.ndarray]) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def _methods(model: DNADecoder, reference: Reference, contig: np.ndarray, positions: range,
             alleles: list[Allele], args: argparse.Namespace,
             names: tuple[str, ...]) -> dict[str, Callable[[], np.ndarray]]:  # fmt: skip
    """The four ways of scoring the same SNVs, each a call that returns its scores."""
    statuses = ["ok"] * len(alleles)
    full = MutagenesisOptions(args.window, "full", "both", args.batch_size)
    local = MutagenesisOptions(args.window, "local", "both", args.batch_size)
    return {
        names[0]: lambda: score_alleles(
            model, alleles, statuses, reference,
            VariantOptions(args.window, "both", args.batch_size, True),
        )[0],
        names[1]: lambda: score_alleles(
            model, alleles, statuses, reference,
            VariantOptions(args.window, "both", args.batch_size, False),
        )[0],
        names[2]: lambda: full_scores(model, contig, positions, full),
        names[3]: lambda: local_scores(model, contig, positions.start, positions, local),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=64, help="region length (positions)")
    parser.add_argument("--window", type=int, default=256, help="W (tiny training length: 256)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    methods = ("per allele, shared prefix", "per allele, two full windows", "full", "local")
    with tempfile.TemporaryDirectory() as tmp:
        reference = Reference(chr20_reference(Path(tmp)), Path(tmp))
        contig = reference.contig_tokens("20")
        positions = range(REGION_START, REGION_START + args.positions)
        alleles, rows, columns = _alleles(contig, positions)
        print(
            f"20:{positions.start + 1}-{positions.stop}: {len(positions)} positions, "
            f"{len(alleles)} SNVs, window {args.window}, both strands, batch {args.batch_size}, "
            f"{args.threads} thread(s), {args.rounds} round(s)\n"
        )
        print(
            "| model | " + " | ".join(f"{m} (SNVs/s)" for m in methods)
            + " | full vs shared prefix | full vs two windows | local vs shared prefix |"
        )  # fmt: skip
        print("| --- |" + " ---: |" * (len(methods) + 3))
        for positional in ("goat", "rope"):
            model = tiny_model(positional)
            full = MutagenesisOptions(args.window, "full", "both", args.batch_size)
            runs = _methods(model, reference, contig, positions, alleles, args, methods)
            best = dict.fromkeys(methods, float("inf"))
            ratios: dict[str, list[float]] = {"full/shared": [], "full/two": [], "local": []}
            results: dict[str, np.ndarray] = {}
            for _ in range(args.rounds):
                took = {}
                for method in methods:
                    took[method], results[method] = _timed(runs[method])
                    best[method] = min(best[method], took[method])
                ratios["full/shared"].append(took[methods[0]] / took["full"])
                ratios["full/two"].append(took[methods[1]] / took["full"])
                ratios["local"].append(took[methods[0]] / took["local"])
            per_allele = combine_strands(results[methods[0]], "both")["llr"]
            mine = combine(results["full"], full)[rows, columns]
            diff = float(np.abs(per_allele - mine).max())
            speeds = " | ".join(f"{len(alleles) / best[m]:,.1f}" for m in methods)
            shown = " | ".join(
                f"{np.median(r):.2f}x ({min(r):.2f}-{max(r):.2f})" for r in ratios.values()
            )
            print(
                f"| {positional}-tiny | {speeds} | {shown} |  (max |full - per allele| {diff:.1e})"
            )


if __name__ == "__main__":
    main()
