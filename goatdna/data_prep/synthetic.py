"""A deterministic synthetic "genome" with the structure that makes real DNA learnable.

Fresh machines have no hg38, so `goatdna prepare --synthetic` builds this instead. What it carries,
and why (each is a signal a real genomic LM picks up first):

* GC isochores: long regions (~100 kb) of different base composition, as in mammalian genomes.
* CpG depletion: CG dinucleotides decay to ~25% of their expected count (methylated C deaminates
  to T), the strongest short-range signal in human DNA; applied after everything else is placed.
* Interspersed repeat families (SINE-/LINE-like): consensus sequences copied hundreds of times on
  both strands with 5'-truncation and per-copy substitutions, soft-masked (lowercase).
* Tandem and simple repeats: microsatellites (units of 1-6 bp) and satellite arrays (~171 bp
  monomers), with a little mutation, also soft-masked.
* N gaps: runs of N such as assembly gaps.

Everything is vectorised numpy driven by one seeded generator: the same config gives the same
bytes on every machine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from goatdna.errors import GoatDNAError

_ASCII_UPPER = np.frombuffer(b"ACGTN", dtype=np.uint8)
_ASCII_LOWER = np.frombuffer(b"acgtn", dtype=np.uint8)
_COMPLEMENT = np.array([3, 2, 1, 0, 4], dtype=np.uint8)
A, C, G, T, N = 0, 1, 2, 3, 4


@dataclass
class SyntheticGenomeConfig:
    """Size and structure of the synthetic genome (defaults: ~4 Mbp in 4 contigs)."""

    total_length: int = 4_000_000
    n_contigs: int = 4
    seed: int = 0
    isochore_gc: tuple[float, ...] = (0.37, 0.41, 0.46, 0.53)
    isochore_mean_length: int = 100_000
    cpg_retention: float = 0.25  # fraction of CG dinucleotides that survive deamination
    repeat_families: int = 12
    repeat_fraction: float = 0.35  # interspersed repeats, share of each contig
    repeat_divergence: tuple[float, float] = (0.02, 0.15)  # per-family substitution rate range
    tandem_fraction: float = 0.06  # micro- and satellites
    gap_fraction: float = 0.01  # N gaps
    line_width: int = 60
    contig_prefix: str = "syn"

    def validate(self) -> None:
        if self.total_length < 10_000 * self.n_contigs or self.n_contigs < 1:
            raise GoatDNAError(
                "synthetic genome: need n_contigs >= 1 and at least 10,000 bases per contig"
            )
        fractions = self.repeat_fraction + self.tandem_fraction + self.gap_fraction
        if not 0 <= fractions < 0.9:
            raise GoatDNAError("synthetic genome: repeat + tandem + gap fractions must be < 0.9")
        if not all(0 < gc < 1 for gc in self.isochore_gc):
            raise GoatDNAError("synthetic genome: isochore GC values must lie in (0, 1)")
        if self.line_width < 1:
            raise GoatDNAError("synthetic genome: line_width must be >= 1")


def _random_bases(rng: np.random.Generator, gc: np.ndarray | float, n: int) -> np.ndarray:
    """Bases 0..3 with P(C)=P(G)=gc/2, P(A)=P(T)=(1-gc)/2; ``gc`` per position or scalar."""
    u = rng.random(n)
    at = (1 - np.asarray(gc)) / 2
    out = np.where(
        u < at, A, np.where(u < 2 * at, T, np.where(u < 2 * at + (1 - 2 * at) / 2, C, G))
    )
    return out.astype(np.uint8)


def _mutate(rng: np.random.Generator, seq: np.ndarray, rate: float) -> np.ndarray:
    """Substitute each base with probability ``rate`` by a different random base."""
    seq = seq.copy()
    hits = np.flatnonzero(rng.random(seq.size) < rate)
    seq[hits] = (seq[hits] + rng.integers(1, 4, hits.size, dtype=np.uint8)) % 4
    return seq


def _isochore_gc(
    rng: np.random.Generator, length: int, config: SyntheticGenomeConfig
) -> np.ndarray:
    gc = np.empty(length)
    pos = 0
    levels = np.asarray(config.isochore_gc)
    while pos < length:
        seg = int(max(10_000, rng.exponential(config.isochore_mean_length)))
        gc[pos : pos + seg] = levels[rng.integers(levels.size)]
        pos += seg
    return gc


@dataclass(frozen=True)
class _Family:
    consensus: np.ndarray
    divergence: float
    weight: float  # how often it is picked


def _families(rng: np.random.Generator, config: SyntheticGenomeConfig) -> list[_Family]:
    """Repeat families: many short SINE-like ones copied often, a few long LINE-like ones."""
    fams = []
    lo, hi = config.repeat_divergence
    for i in range(config.repeat_families):
        # every third family is LINE-like (long, 5'-truncated when copied), the rest SINE-like
        line_like = i % 3 == 2
        length = int(rng.integers(2_000, 6_000) if line_like else rng.integers(120, 400))
        consensus = _random_bases(rng, float(rng.uniform(0.38, 0.56)), length)
        fams.append(_Family(consensus, float(rng.uniform(lo, hi)), float(rng.uniform(0.5, 2.0))))
    return fams


def _place(seq: np.ndarray, mask: np.ndarray, pos: int, piece: np.ndarray) -> None:
    end = min(seq.size, pos + piece.size)
    seq[pos:end] = piece[: end - pos]
    mask[pos:end] = True


def _add_interspersed(rng, seq, mask, families, config) -> None:
    target = int(config.repeat_fraction * seq.size)
    weights = np.array([f.weight for f in families])
    weights /= weights.sum()
    placed = 0
    while placed < target:
        fam = families[rng.choice(len(families), p=weights)]
        cons = fam.consensus
        if cons.size > 1000:  # LINE-like: keep a random 3' fragment
            frag_len = int(min(cons.size, max(100, rng.exponential(900))))
            piece = cons[cons.size - frag_len :]
        else:  # SINE-like: nearly full length, with an A-rich tail as Alu copies carry
            piece = cons[int(rng.integers(0, max(1, cons.size // 10))) :]
            piece = np.concatenate([piece, np.full(int(rng.integers(8, 30)), A, np.uint8)])
        piece = _mutate(rng, piece, fam.divergence * float(rng.uniform(0.5, 1.5)))
        if rng.random() < 0.5:
            piece = _COMPLEMENT[piece[::-1]]
        pos = int(rng.integers(0, seq.size - piece.size))
        _place(seq, mask, pos, piece)
        placed += piece.size


def _add_tandem(rng, seq, mask, config) -> None:
    target = int(config.tandem_fraction * seq.size)
    placed = 0
    while placed < target:
        if rng.random() < 0.85:  # microsatellite: (A)n, (CA)n, (TTAGGG)n, ...
            unit = _random_bases(rng, 0.4, int(rng.integers(1, 7)))
            copies = int(rng.integers(8, 40))
            rate = 0.02
        else:  # satellite array of ~171 bp monomers
            unit = _random_bases(rng, 0.38, int(rng.integers(150, 190)))
            copies = int(rng.integers(5, 30))
            rate = 0.03
        piece = _mutate(rng, np.tile(unit, copies), rate)
        pos = int(rng.integers(0, seq.size - piece.size))
        _place(seq, mask, pos, piece)
        placed += piece.size


def _deplete_cpg(rng, seq, retention: float) -> None:
    """CG -> TG or CA with probability 1 - retention (cannot create new CGs)."""
    cg = np.flatnonzero((seq[:-1] == C) & (seq[1:] == G))
    hit = cg[rng.random(cg.size) >= retention]
    left = rng.random(hit.size) < 0.5
    seq[hit[left]] = T
    seq[hit[~left] + 1] = A


def _add_gaps(rng, seq, mask, config) -> None:
    target = int(config.gap_fraction * seq.size)
    placed = 0
    while placed < target:
        length = int(min(target - placed, max(100, rng.exponential(5_000))))
        pos = int(rng.integers(1_000, max(1_001, seq.size - length - 1_000)))
        seq[pos : pos + length] = N
        mask[pos : pos + length] = False  # assembly gaps are uppercase N, as in hg38
        placed += length


def synthetic_contig(rng: np.random.Generator, length: int, families, config) -> np.ndarray:
    """ASCII bytes of one contig (lowercase = soft-masked repeat)."""
    seq = _random_bases(rng, _isochore_gc(rng, length, config), length)
    mask = np.zeros(length, dtype=bool)
    _add_interspersed(rng, seq, mask, families, config)
    _add_tandem(rng, seq, mask, config)
    _deplete_cpg(rng, seq, config.cpg_retention)
    _add_gaps(rng, seq, mask, config)
    return np.where(mask, _ASCII_LOWER[seq], _ASCII_UPPER[seq])


def _contig_lengths(rng: np.random.Generator, config: SyntheticGenomeConfig) -> list[int]:
    weights = rng.uniform(0.6, 1.4, config.n_contigs)
    lengths = np.floor(weights / weights.sum() * config.total_length).astype(int)
    lengths[0] += config.total_length - lengths.sum()
    return [int(x) for x in lengths]


def _wrap(ascii_seq: np.ndarray, width: int) -> bytes:
    """FASTA lines of ``width`` bases, each ending in a newline."""
    full = ascii_seq.size // width * width
    body = ascii_seq[:full].reshape(-1, width)
    lines = np.concatenate([body, np.full((body.shape[0], 1), ord("\n"), np.uint8)], axis=1)
    out = lines.tobytes()
    if full < ascii_seq.size:
        out += ascii_seq[full:].tobytes() + b"\n"
    return out


def synthetic_fasta_bytes(config: SyntheticGenomeConfig) -> bytes:
    """The whole FASTA file as bytes (deterministic for the config)."""
    config.validate()
    rng = np.random.default_rng(config.seed)
    families = _families(rng, config)
    parts = []
    for i, length in enumerate(_contig_lengths(rng, config)):
        name = f"{config.contig_prefix}{i + 1}"
        parts.append(f">{name} synthetic seed={config.seed} length={length}\n".encode())
        parts.append(_wrap(synthetic_contig(rng, length, families, config), config.line_width))
    return b"".join(parts)


def write_synthetic_fasta(path: Path, config: SyntheticGenomeConfig) -> Path:
    """Write the synthetic FASTA to ``path`` (atomically; an identical file is left untouched,
    so its mtime, and with it an interrupted run's resume plan, stays valid)."""
    return write_bytes_if_changed(Path(path), synthetic_fasta_bytes(config))


def write_bytes_if_changed(path: Path, data: bytes) -> Path:
    """Atomically write ``data`` unless ``path`` already holds exactly these bytes."""
    if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path
