"""Fit a logistic regression on goatdna embeddings: real genomic windows vs shuffled ones.

Each example is a window of a reference sequence; half of them are shuffled base by base, which
keeps the base composition (so GC content cannot tell them apart) but destroys the order a
language model has learned. A linear classifier on mean-pooled embeddings separates them as far
as the model captured local sequence structure.

    pip install -r examples/requirements.txt
    python examples/embeddings_logistic_regression.py --checkpoint runs/goat/checkpoints/best.ckpt \
        --fasta ../shared/data/grch37_chr20_1000001-2000000.fa.gz

``--checkpoint`` may also be a `goatdna export` folder. Plain or gzipped FASTA; the first record
is used. ``../shared/data`` (the real chr20 piece) is there only in this project's own checkout;
without it, run the demo first and use its synthetic genome and model:

    goatdna demo --out demo
    python examples/embeddings_logistic_regression.py \
        --checkpoint demo/runs/goat/checkpoints/best.ckpt --fasta demo/shards/synthetic.fa
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from goatdna.checkpoint import load_checkpoint
from goatdna.inference.embed import embed


def first_record(path: Path) -> str:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        lines = []
        for line in handle:
            if line.startswith(">"):
                if lines:
                    break
                continue
            lines.append(line.strip())
    return "".join(lines).upper()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, type=Path)
    parser.add_argument("--fasta", required=True, type=Path)
    parser.add_argument("--windows", type=int, default=400, help="examples (half shuffled)")
    parser.add_argument("--length", type=int, default=256, help="bases per window")
    parser.add_argument("--layer", type=int, default=None, help="1-based block (default: final)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    genome = first_record(args.fasta)
    starts = rng.choice(len(genome) - args.length, size=args.windows, replace=False)
    windows = [genome[s : s + args.length] for s in starts]
    windows = [w for w in windows if "N" not in w]
    labels = np.arange(len(windows)) % 2  # 1: shuffled
    examples = [
        "".join(rng.permutation(list(w))) if label else w
        for w, label in zip(windows, labels, strict=True)
    ]

    loaded = load_checkpoint(args.checkpoint)
    model = loaded.model
    features = embed(
        model, examples, config=dict(loaded.run_config), layer=args.layer, pool="mean"
    )  # (n, d)
    x_train, x_test, y_train, y_test = train_test_split(
        features, labels, test_size=0.3, random_state=args.seed, stratify=labels
    )
    classifier = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    classifier.fit(x_train, y_train)
    print(f"{len(examples)} windows of {args.length} bases, embeddings of dim {features.shape[1]}")
    print(f"held-out accuracy (real vs shuffled): {classifier.score(x_test, y_test):.3f}")


if __name__ == "__main__":
    main()
