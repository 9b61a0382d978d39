"""Draw docs/attention_example.png: `goatdna attention` of a trained GOAT model on real chr20.

    python docs/attention_figure.py --checkpoint runs/chr20-goat/checkpoints/best.ckpt \
        [--region ...] [--head 0] [--out docs/attention_example.png]

Runs `goatdna attention` (every layer; the maps of ``--head`` of layer 0) on a held-out piece
of the shared GRCh37 chr20 sample and prints the per-head summary table the command prints.
The figure in the docs came from `configs/goat-tiny.yaml` trained (300 steps) on that sample's
training split: ``goatdna prepare <sample> -o shards`` then ``goatdna train --config
configs/goat-tiny.yaml -d shards -o runs/chr20-goat``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from typer.testing import CliRunner

from goatdna.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
PIECE = ROOT.parent / "shared" / "data" / "grch37_chr20_1000001-2000000.fa.gz"
REGION = "chr20:1000001-2000000:960001-960256"  # 256 bases in the held-out last 5% of the piece


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--fasta", type=Path, default=PIECE)
    parser.add_argument("--region", default=REGION)
    parser.add_argument("--head", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "attention_example.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            "attention", "-c", str(args.checkpoint), "-f", str(args.fasta), "-r", args.region,
            "--head", str(args.head), "--cache-dir", tmp, "-o", str(args.out), "--force",
        ]  # fmt: skip
        result = CliRunner().invoke(app, command)
    print(result.output)
    if result.exit_code != 0:
        raise SystemExit(result.exit_code)


if __name__ == "__main__":
    main()
