"""Inputs several benchmarks share: the shared chr20 piece as contig ``20`` and tiny models.

Imported by the benchmark scripts (run as ``python benchmarks/NAME.py``, so this folder is on
``sys.path``), so they all score the same reference the same way.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import torch

from goatdna.configfile import from_dict, load_yaml
from goatdna.model import DNADecoder, ModelConfig

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
FASTA = DATA / "grch37_chr20_1000001-2000000.fa.gz"
VCF = DATA / "1kgp3_chr20_1000001-2000000.sites.vcf.gz"
PIECE_OFFSET = 1_000_000  # the piece is GRCh37 chr20:1,000,001-2,000,000


def chr20_piece() -> str:
    """The shared 1 Mbp of chr20 as text (soft-masking kept)."""
    with gzip.open(FASTA, "rt") as handle:
        return "".join(line.strip() for line in handle if not line.startswith(">"))


def write_fasta(path: Path, name: str, sequence: str) -> Path:
    """One record, 60 bases per line."""
    lines = "\n".join(sequence[i : i + 60] for i in range(0, len(sequence), 60))
    path.write_text(f">{name}\n{lines}\n")
    return path


def chr20_reference(folder: Path, piece: str | None = None) -> Path:
    """``folder/chr20.fa``: contig ``20`` = 1 Mbp of N + the piece, so the 1000 Genomes VCF's
    GRCh37 positions fall on the right bases."""
    sequence = "N" * PIECE_OFFSET + (chr20_piece() if piece is None else piece)
    return write_fasta(folder / "chr20.fa", "20", sequence)


def tiny_model(positional: str) -> DNADecoder:
    """configs/<positional>-tiny.yaml's shape, seeded random weights (speed does not depend on
    them), in eval mode."""
    data = load_yaml(f"configs/{positional}-tiny.yaml")["model"]
    torch.manual_seed(0)
    return DNADecoder(from_dict(ModelConfig, data, "model")).eval()
