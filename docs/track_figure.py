"""Draw docs/track_example.png: a score-track logp track beside GC, and what a longer C does.

    python docs/track_figure.py --goat runs/chr20-goat/checkpoints/best.ckpt \
        --rope runs/chr20-rope/checkpoints/best.ckpt [--region ...] [--long 1024]

Runs `goatdna score-track` (bigWig, both strands) for each model at its training length and at
``--long``, reads the tracks back with pyBigWig and plots them (100-bp means) above the GC
fraction of the same 100-bp bins.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pyBigWig
from typer.testing import CliRunner

from goatdna.cli.app import app
from goatdna.inference.reference import Reference
from goatdna.io.regions import parse_region

ROOT = Path(__file__).resolve().parents[1]
PIECE = ROOT.parent / "shared" / "data" / "grch37_chr20_1000001-2000000.fa.gz"
REGION = "chr20:1000001-2000000:950001-960000"  # in the held-out last 5% of the piece
BIN = 100


def _track(ckpt: Path, context: int | None, out: Path, region: str, fasta: Path) -> np.ndarray:
    args = ["score-track", "-c", str(ckpt), "-f", str(fasta), "-r", region, "-o", str(out)]
    if context is not None:
        args += ["--context", str(context)]
    result = CliRunner().invoke(app, args)
    if result.exit_code != 0:
        raise SystemExit(result.output)
    r = parse_region(region)
    with pyBigWig.open(str(out)) as bw:
        return np.array(bw.values(r.contig, r.start, r.end), dtype=np.float64)


def _bins(values: np.ndarray) -> np.ndarray:
    n = values.size // BIN * BIN
    return np.nanmean(values[:n].reshape(-1, BIN), axis=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goat", type=Path, required=True)
    parser.add_argument("--rope", type=Path, required=True)
    parser.add_argument("--fasta", type=Path, default=PIECE)
    parser.add_argument("--region", default=REGION)
    parser.add_argument("--long", type=int, default=1024, help="extrapolated context C")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "track_example.png")
    parser.add_argument(
        "--offset",
        type=int,
        default=1_000_000,
        help="added to contig positions on the x axis (the sample starts at GRCh37 20:1,000,001)",
    )
    parser.add_argument("--axis-label", default="GRCh37 chr20 position (Mbp)")
    args = parser.parse_args()
    region = parse_region(args.region)
    with Reference(args.fasta) as ref:
        tokens = ref.read(ref.contig(region.contig), region.start, region.end)
    gc = _bins(np.isin(tokens, (1, 2)).astype(np.float64))
    x = (args.offset + region.start + BIN * (np.arange(gc.size) + 0.5)) / 1e6
    tracks = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, ckpt in (("GOAT", args.goat), ("RoPE", args.rope)):
            tracks[name, "train"] = _track(ckpt, None, Path(tmp) / "a.bw", args.region, args.fasta)
            tracks[name, "long"] = _track(
                ckpt, args.long, Path(tmp) / "b.bw", args.region, args.fasta
            )
    fig, axes = plt.subplots(3, 1, figsize=(10, 7), sharex=True, height_ratios=[2, 2, 1])
    for name, color in (("GOAT", "tab:blue"), ("RoPE", "tab:orange")):
        values = tracks[name, "train"]
        axes[0].plot(
            x, _bins(values), color=color, lw=1, label=f"{name} (mean {values.mean():.3f})"
        )
        long = tracks[name, "long"]
        axes[1].plot(
            x,
            _bins(long) - _bins(values),
            color=color,
            lw=1,
            label=f"{name}: C={args.long} minus training C (mean {long.mean() - values.mean():+.3f})",
        )
    axes[0].set_ylabel(f"logp, nats\n({BIN}-bp mean)")
    axes[0].set_title(f"goatdna score-track, region {region.label} (context C = training length)")
    axes[0].legend(loc="lower right", fontsize=8)
    axes[1].axhline(0, color="grey", lw=0.5)
    axes[1].set_ylabel("logp change, nats\n(longer context)")
    axes[1].legend(loc="lower right", fontsize=8)
    axes[2].plot(x, gc, color="tab:green", lw=1)
    axes[2].set_ylabel(f"GC fraction\n({BIN}-bp bins)")
    axes[2].set_xlabel(args.axis_label)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    corr = {name: np.corrcoef(_bins(tracks[name, "train"]), gc)[0, 1] for name in ("GOAT", "RoPE")}
    for name in ("GOAT", "RoPE"):
        train, long = tracks[name, "train"], tracks[name, "long"]
        print(
            f"{name}: mean logp {train.mean():.4f} at training C, {long.mean():.4f} at "
            f"C={args.long}; corr(100-bp logp, GC) = {corr[name]:+.3f}"
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
