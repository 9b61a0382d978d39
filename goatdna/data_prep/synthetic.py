"""A deterministic synthetic "genome" with the structure that makes real DNA learnable.

Fresh machines have no hg38, so `goatdna prepare --synthetic` builds this instead. What it carries,
and why (each is a signal a real genomic LM picks up first):

* A Markov background: outside repeats, bases follow an order-2 Markov chain (16 context states),
  not i.i.d. draws. An i.i.d. background is almost all irreducible entropy, so a model could only
  learn the base composition and tests or demos comparing models would see nothing. The chain's
  table is drawn once per genome: dinucleotide preferences (by the previous base) times a
  per-context modulation, both Dirichlet, tempered to `background_entropy_bits` (1.75 bits/base
  before the isochore tilt; the tilted levels land at ~1.69-1.82). Most of the structure is
  dinucleotide-level, as in real DNA, though stronger than hg38's (whose order-2 background is
  ~1.9 bits; its repeats carry the rest): tiny models must show learning within ~100 steps. The
  chain is strand-symmetric (a k-mer and its reverse complement equally frequent, Chargaff's
  second rule; training reverse-complements half its windows) and CG-neutral before the CpG
  step below. A 6-mer Markov model fitted on train scores ~1.79 bits/base on val (i.i.d.: 2.0).
* GC isochores: long regions (~100 kb) of different base composition, as in mammalian genomes;
  each isochore level has its own tilt of the chain, solved to hit the level's GC exactly.
* CpG depletion: CG dinucleotides decay to ~25% of their expected count (methylated C deaminates
  to T), the strongest short-range signal in human DNA; applied after everything else is placed.
* Interspersed repeat families (SINE-/LINE-like): consensus sequences drawn from the background
  chain, copied hundreds of times on both strands with 5'-truncation and per-copy substitutions,
  soft-masked (lowercase).
* Tandem and simple repeats: microsatellites (units of 1-6 bp) and satellite arrays (~171 bp
  monomers), with a little mutation, also soft-masked.
* N gaps: runs of N such as assembly gaps.

Everything is vectorised numpy driven by one seeded generator: the same config gives the same
bytes on every machine. The chain is sampled exactly without a per-base Python loop (see
`_sample_chain`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from goatdna.atomic import atomic_write_bytes
from goatdna.configfile import COUNT, SEED, bounded
from goatdna.errors import GoatDNAError
from goatdna.io.tokens import LOWER_DECODE, UPPER_DECODE, A, C, G, N, T, reverse_complement

_ORDER = 2  # the background chain conditions on the previous two bases


@dataclass
class SyntheticGenomeConfig:
    """Size and structure of the synthetic genome (defaults: ~4 Mbp in 4 contigs)."""

    total_length: int = bounded(4_000_000, COUNT)
    n_contigs: int = bounded(4, COUNT)
    seed: int = bounded(0, SEED)
    isochore_gc: tuple[float, ...] = (0.37, 0.41, 0.46, 0.53)
    isochore_mean_length: int = 100_000
    # Background: an order-2 Markov chain. Its table is one Dirichlet(concentration) draw per
    # genome (lower = more uneven context preferences), tempered to this entropy rate.
    background_concentration: float = 1.0
    background_entropy_bits: float = 1.75
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
        if not self.background_concentration > 0:
            raise GoatDNAError("synthetic genome: background_concentration must be > 0")
        if not 1.0 <= self.background_entropy_bits < 2.0:
            raise GoatDNAError("synthetic genome: background_entropy_bits must lie in [1, 2)")
        if self.line_width < 1:
            raise GoatDNAError("synthetic genome: line_width must be >= 1")


def _random_bases(rng: np.random.Generator, gc: float, n: int) -> np.ndarray:
    """I.i.d. bases 0..3 with P(C)=P(G)=gc/2, P(A)=P(T)=(1-gc)/2 (microsatellite units)."""
    u = rng.random(n)
    at = (1 - gc) / 2
    out = np.where(u < at, A, np.where(u < 2 * at, T, np.where(u < 2 * at + gc / 2, C, G)))
    return out.astype(np.uint8)


_STATES = 4**_ORDER  # context states of the background chain: the previous _ORDER bases
_IS_GC = np.array([0.0, 1.0, 1.0, 0.0])


def _next_state_index(state: np.ndarray | int) -> np.ndarray:
    """State reached from ``state`` by each next base z: (state * 4 + z) mod 4**_ORDER."""
    return (np.asarray(state)[..., None] * 4 + np.arange(4)) % _STATES


def _stationary(transition: np.ndarray) -> np.ndarray:
    """Stationary distribution over context states of a (states, 4) transition table."""
    step = np.zeros((_STATES, _STATES))  # (from state, to state)
    step[np.arange(_STATES)[:, None], _next_state_index(np.arange(_STATES))] = transition
    # pi (step - I) = 0 with one equation replaced by sum(pi) = 1
    system = step.T - np.eye(_STATES)
    system[-1] = 1.0
    rhs = np.zeros(_STATES)
    rhs[-1] = 1.0
    pi = np.clip(np.linalg.solve(system, rhs), 0.0, None)
    return pi / pi.sum()


def _symmetric_joint(transition: np.ndarray) -> np.ndarray:
    """Joint frequencies P(context, next base), shape (states, 4), of the strand-symmetric
    version of a chain: its (order+1)-mer frequencies averaged with their reverse complements'.

    Real DNA obeys Chargaff's second rule (a k-mer and its reverse complement are about equally
    frequent), and training reverse-complements half its windows, so a strand-biased background
    would only blur what a model can learn. The joint g(w) = pi(context) P(next | context) of a
    stationary chain and its reverse complement g(rc w) have the same context marginals, so their
    average is again the joint of a stationary chain (its row sums are that chain's stationary
    distribution), with the same GC content.
    """
    joint = (_stationary(transition)[:, None] * transition).reshape((4,) * (_ORDER + 1))
    rc = np.flip(joint).transpose(tuple(range(_ORDER, -1, -1)))  # rc[w] = joint[rc(w)]
    return ((joint + rc) / 2).reshape(_STATES, 4)


def _conditional(joint: np.ndarray) -> np.ndarray:
    """Transition table P(next | context) of a (states, 4) joint."""
    return joint / joint.sum(axis=1, keepdims=True)


def _joint_entropy_bits(joint: np.ndarray) -> float:
    """Entropy rate (bits/base) of the stationary chain with this (states, 4) joint."""
    chain = _conditional(joint)
    return float(-(joint * np.log2(np.where(chain > 0, chain, 1.0))).sum())


def entropy_rate_bits(chain: np.ndarray) -> float:
    """Entropy rate (bits/base) of a stationary chain with a (states, 4) transition table."""
    return _joint_entropy_bits(_stationary(chain)[:, None] * chain)


def _calibrated(base: np.ndarray, gc: float) -> np.ndarray:
    """``base`` tilted to an isochore: the weight of every next G/C scaled by exp(lam) and that
    of G after C by r, strand-symmetrised, with (lam, r) solved so that the chain's stationary
    GC content equals ``gc`` and its CG observed/expected ratio is 1. CpG depletion is applied
    afterwards to the whole sequence (repeats included), so the chain itself must be neutral."""
    ends_in_c = np.arange(_STATES) % 4 == C
    log_odds = np.log(gc / (1 - gc))
    lam = log_r = 0.0
    for _ in range(200):  # a fixed-point iteration; typically converges in 25-50 steps
        weighted = base * np.exp(lam * _IS_GC)
        weighted[ends_in_c, G] *= np.exp(log_r)
        joint = _symmetric_joint(_conditional(weighted))  # (states, next base)
        base_freq = joint.sum(axis=0)
        now_gc = base_freq[C] + base_freq[G]
        gc_step = log_odds - np.log(now_gc / (1 - now_gc))
        cg_step = -np.log(joint[ends_in_c, G].sum() / (base_freq[C] * base_freq[G]))
        if max(abs(gc_step), abs(cg_step)) < 1e-12:
            break
        lam += gc_step
        log_r += cg_step
    return _conditional(joint)


def _tempered(base: np.ndarray, bits: float) -> np.ndarray:
    """``base`` raised to the power beta (rows renormalised), with beta found by bisection so
    that its strand-symmetric chain has an entropy rate of ``bits``: every seed then gets an
    equally predictable background, whatever its Dirichlet draw."""
    lo, hi = 0.0, 8.0  # beta = 0: uniform (2 bits); larger beta: sharper rows, lower entropy
    for _ in range(40):
        beta = (lo + hi) / 2
        table = _conditional(base**beta)
        if _joint_entropy_bits(_symmetric_joint(table)) > bits:
            lo = beta
        else:
            hi = beta
    return table


def background_chain(rng: np.random.Generator, config: SyntheticGenomeConfig) -> np.ndarray:
    """Transition tables of the background Markov chain, one per isochore GC level; shape
    (levels, 4**_ORDER, 4). One Dirichlet draw per genome, tempered to the configured entropy
    rate, then tilted toward each level's GC (which moves the entropy a little)."""
    alpha = np.full(4, config.background_concentration)
    # dinucleotide preferences (by the previous base) modulated per full context
    base = rng.dirichlet(alpha, size=4)[np.arange(_STATES) % 4] * rng.dirichlet(alpha, _STATES)
    base = _tempered(_conditional(base), config.background_entropy_bits)
    return np.stack([_calibrated(base, gc) for gc in config.isochore_gc])


def _chain_maps(chain: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every map state -> next base that one uniform can induce, per isochore level.

    With inverse-CDF sampling, the next base from state s is the number of s's CDF thresholds
    <= u. Sorting a level's 3 * 4**_ORDER thresholds cuts [0, 1) into intervals on which that
    count is constant for every state, so an interval index names the whole map.
    Returns (sorted thresholds (levels, 3S), next base (levels * (3S + 1), S) uint8,
    next state (levels * (3S + 1), S) int64).
    """
    thresholds = np.cumsum(chain, axis=2)[:, :, :3]  # (levels, S, 3)
    cuts = np.sort(thresholds.reshape(len(chain), -1), axis=1)  # (levels, 3S)
    # interval k >= 1 is [cuts[k-1], cuts[k]); interval 0 is [0, cuts[0]) where every count is 0
    low = np.concatenate([np.full((len(chain), 1), -1.0), cuts], axis=1)  # (levels, 3S + 1)
    base = (thresholds[:, None, :, :] <= low[:, :, None, None]).sum(axis=3)  # (levels, 3S+1, S)
    base = base.reshape(-1, _STATES).astype(np.uint8)
    return cuts, base, (np.arange(_STATES) * 4 + base) % _STATES


def _sample_chain(
    rng: np.random.Generator, chain: np.ndarray, level: np.ndarray, block: int | None = None
) -> np.ndarray:
    """Exact, vectorised draw of the Markov chain; ``level[t]`` picks the table used at base t.

    Base t is the inverse CDF of one uniform u_t under the row of the current state, so u_t
    defines a map f_t: state -> next state for every state at once (an index into the table
    of _chain_maps), and the sequence is x_t = f_t(x_(t-1)). A two-level scan composes these
    maps: the sequence is cut into blocks of ``block`` bases (default ~sqrt(n)); pass 1 follows
    every block from all 4**_ORDER start states at once (``block`` numpy gathers over a
    (blocks, states) array), which gives each block's composed map; a short loop over blocks
    chains them into each block's true start state; pass 2 replays the blocks from those
    states and records the bases. Work is O(n * states) with about 3 * sqrt(n) Python steps,
    and the result equals the sequential draw x_t = f_t(x_(t-1)) bit for bit.
    """
    n = level.size
    block = block or max(8, int(np.sqrt(n)))
    n_blocks = -(-n // block)
    u = rng.random(n)
    first = int(rng.integers(_STATES))
    cuts, base, next_state = _chain_maps(chain)
    width = cuts.shape[1] + 1  # maps per level
    map_id = np.zeros(n_blocks * block, dtype=np.int64)  # padding: any valid map, never read
    for lev in range(len(chain)):
        here = level == lev
        map_id[:n][here] = lev * width + np.searchsorted(cuts[lev], u[here], side="right")
    offset = (map_id * _STATES).reshape(n_blocks, block)  # row offset into the flat tables
    base, next_state = base.ravel(), next_state.ravel()

    state = np.tile(np.arange(_STATES), (n_blocks, 1))  # (blocks, S)
    for t in range(block):  # pass 1: each block's map from every start state
        state = next_state[offset[:, t, None] + state]
    start = np.empty(n_blocks, dtype=np.int64)
    current = first
    for b, block_map in enumerate(state.tolist()):  # chain the block maps
        start[b] = current
        current = block_map[current]
    bases = np.empty((n_blocks, block), dtype=np.uint8)
    state = start  # (blocks,)
    for t in range(block):  # pass 2: replay from the true start states
        index = offset[:, t] + state
        bases[:, t] = base[index]
        state = next_state[index]
    return bases.ravel()[:n]


def _mutate(rng: np.random.Generator, seq: np.ndarray, rate: float) -> np.ndarray:
    """Substitute each base with probability ``rate`` by a different random base."""
    seq = seq.copy()
    hits = np.flatnonzero(rng.random(seq.size) < rate)
    seq[hits] = (seq[hits] + rng.integers(1, 4, hits.size, dtype=np.uint8)) % 4
    return seq


def _isochores(rng: np.random.Generator, length: int, config: SyntheticGenomeConfig) -> np.ndarray:
    """Index into ``config.isochore_gc`` of every base: runs of ~isochore_mean_length bases."""
    level = np.empty(length, dtype=np.int64)
    pos = 0
    while pos < length:
        seg = int(max(10_000, rng.exponential(config.isochore_mean_length)))
        level[pos : pos + seg] = rng.integers(len(config.isochore_gc))
        pos += seg
    return level


@dataclass(frozen=True)
class _Family:
    consensus: np.ndarray
    divergence: float
    weight: float  # how often it is picked


def _families(
    rng: np.random.Generator, chain: np.ndarray, config: SyntheticGenomeConfig
) -> list[_Family]:
    """Repeat families: many short SINE-like ones copied often, a few long LINE-like ones.

    Consensus sequences are drawn from the background chain (at a random isochore level), as
    real transposons arose from genomic sequence."""
    fams = []
    lo, hi = config.repeat_divergence
    for i in range(config.repeat_families):
        # every third family is LINE-like (long, 5'-truncated when copied), the rest SINE-like
        line_like = i % 3 == 2
        length = int(rng.integers(2_000, 6_000) if line_like else rng.integers(120, 400))
        level = np.full(length, rng.integers(len(config.isochore_gc)))
        consensus = _sample_chain(rng, chain, level)
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
            piece = reverse_complement(piece)
        pos = int(rng.integers(0, seq.size - piece.size))
        _place(seq, mask, pos, piece)
        placed += piece.size


def _add_tandem(rng, seq, mask, chain, config) -> None:
    target = int(config.tandem_fraction * seq.size)
    placed = 0
    while placed < target:
        if rng.random() < 0.85:  # microsatellite: (A)n, (CA)n, (TTAGGG)n, ...
            unit = _random_bases(rng, 0.4, int(rng.integers(1, 7)))
            copies = int(rng.integers(8, 40))
            rate = 0.02
        else:  # satellite array of ~171 bp monomers
            unit = _sample_chain(rng, chain, np.zeros(int(rng.integers(150, 190)), np.int64))
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


def synthetic_contig(
    rng: np.random.Generator, length: int, chain: np.ndarray, families, config
) -> np.ndarray:
    """ASCII bytes of one contig (lowercase = soft-masked repeat)."""
    seq = _sample_chain(rng, chain, _isochores(rng, length, config))
    mask = np.zeros(length, dtype=bool)
    _add_interspersed(rng, seq, mask, families, config)
    _add_tandem(rng, seq, mask, chain, config)
    _deplete_cpg(rng, seq, config.cpg_retention)
    _add_gaps(rng, seq, mask, config)
    return np.where(mask, LOWER_DECODE[seq], UPPER_DECODE[seq])


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
    chain = background_chain(rng, config)
    families = _families(rng, chain, config)
    parts = []
    for i, length in enumerate(_contig_lengths(rng, config)):
        name = f"{config.contig_prefix}{i + 1}"
        parts.append(f">{name} synthetic seed={config.seed} length={length}\n".encode())
        parts.append(
            _wrap(synthetic_contig(rng, length, chain, families, config), config.line_width)
        )
    return b"".join(parts)


def write_synthetic_fasta(path: Path, config: SyntheticGenomeConfig) -> Path:
    """Write the synthetic FASTA to ``path`` (atomically; an identical file is left untouched,
    so its mtime, and with it an interrupted run's resume plan, stays valid)."""
    return write_bytes_if_changed(Path(path), synthetic_fasta_bytes(config))


def write_bytes_if_changed(path: Path, data: bytes) -> Path:
    """Atomically write ``data`` unless ``path`` already holds exactly these bytes."""
    if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return path
    return atomic_write_bytes(path, data)
