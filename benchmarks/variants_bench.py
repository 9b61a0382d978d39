"""score-variants speed: shared-prefix KV-cache scoring vs two full windows per allele.

Side by side in one run, on the shared 1000 Genomes VCF (chr20:1,000,001-2,000,000, GRCh37)
scored against a contig `20` built from the shared 1 Mbp piece (1,000,000 N + the piece), with
randomly initialised models of the tiny configs' shape (speed does not depend on the weights):

- shared prefix: the left flank (and the alleles' common leading bases) runs once to fill the KV
  cache, then the REF and ALT suffixes run on top of it (what `goatdna score-variants` does);
- two full windows: s_ref and s_alt each run from position 0 (what scoring without the cache
  costs).

Both give the same LLRs (checked here, and against a brute force in the tests). Each round times
both methods back to back on the same alleles; the speed-up is the median of the per-round
ratios (robust to load that changes between rounds), the throughputs the best round of each.

    python benchmarks/variants_bench.py [--alleles 200] [--window 256] [--rounds 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from bench_data import VCF, chr20_reference, tiny_model  # noqa: E402 (this folder)

from goatdna.inference.reference import Reference
from goatdna.inference.variant_io import read_alleles
from goatdna.inference.variants import VariantOptions, allele_status, score_alleles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alleles", type=int, default=200, help="leading ALT alleles scored")
    parser.add_argument("--window", type=int, default=256, help="W (tiny training length: 256)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--strands", default="both")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        reference = Reference(chr20_reference(Path(tmp)), Path(tmp))
        alleles = read_alleles(VCF).alleles[: args.alleles]
        statuses = [allele_status(a, reference) for a in alleles]
        n_ok = statuses.count("ok")
        print(
            f"{len(alleles)} alleles ({n_ok} scored), window {args.window}, strands "
            f"{args.strands}, batch {args.batch_size}, {args.threads} thread(s)\n"
        )
        print(
            "| model | shared prefix (variants/s) | two full windows (variants/s) "
            "| speed-up, median (range) |"
        )
        print("| --- | ---: | ---: | ---: |")
        for positional in ("goat", "rope"):
            model = tiny_model(positional)
            best = {True: float("inf"), False: float("inf")}
            results, ratios = {}, []
            for _ in range(args.rounds):
                took = {}
                for shared in (True, False):
                    options = VariantOptions(args.window, args.strands, args.batch_size, shared)
                    start = time.perf_counter()
                    scores, _ = score_alleles(model, alleles, statuses, reference, options)
                    took[shared] = time.perf_counter() - start
                    best[shared] = min(best[shared], took[shared])
                    results[shared] = scores
                ratios.append(took[False] / took[True])
            diff = np.nanmax(np.abs(results[True] - results[False]))
            fast, slow = n_ok / best[True], n_ok / best[False]
            spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
            print(
                f"| {positional}-tiny | {fast:,.1f} | {slow:,.1f} | {np.median(ratios):.2f}x "
                f"({spread}) |  (max |LL difference| {diff:.1e})"
            )


if __name__ == "__main__":
    main()
