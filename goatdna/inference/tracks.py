"""Per-base likelihood tracks of a trained model along genomic regions (bigWig or bedGraph).

The track, exactly. A region of ``n`` bases is cut into windows of ``C``
bases (the context) that start at the region start + ``k * S`` (``S`` the stride, ``1 <= S < C``).
The base at offset ``i`` from the region start is scored in window 0 when ``i < C``, else in
window ``(i - C) // S + 1``; within its window it is predicted from the bases before it there, so
every base past the first window sees between ``C - S`` and ``C - 1`` bases of context, and no
window reaches outside the region. Each window is scored from absolute position 0 with
`goatdna.model.scoring.target_log_probs` (the 5-class log-softmax of the training loss).

The reverse strand is scored the same way on the reverse complement of the region, and the two
values of each base are averaged. The region's first base has no forward value and its last base
no reverse value (nothing precedes them on that strand): they take the other strand's value.

- ``logp``: log-probability (nats) of the reference base; an N base has no value.
- ``entropy``: entropy (nats) of the predicted distribution over A/C/G/T (the model's 5-class
  distribution without N, renormalised); strand-symmetric because complementing only permutes
  the four bases. N bases have no value either, so both tracks cover the same bases.

Streaming: a region is processed in blocks of whole windows of the forward grid; the reverse
strand windows that cover the same bases are scored beside them, so memory stays bounded by the
block size whatever the region length. Each finished block is a unit of resumable work
(`goatdna.workdir.WorkDir`); the track files are written from the blocks in coordinate order
(`goatdna.io.bigwig` holds the bigWig/bedGraph writers).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from goatdna.configfile import COUNT_OR_ZERO, bounded, check_bounds
from goatdna.errors import GoatDNAError
from goatdna.inference.loop import (
    Arrays,
    FinishedUnits,
    model_on_device,
    rank_zero_lock,
    run_units,
    save_arrays,
)
from goatdna.inference.memory import MEMORY_BOUND_BYTES, position_bytes
from goatdna.inference.reference import Reference
from goatdna.io.bigwig import DEFAULT_ZOOM_LEVELS, open_track, output_paths
from goatdna.io.regions import Region, read_bed_intervals
from goatdna.io.tokens import N, reverse_complement
from goatdna.runtime import single_process_fabric
from goatdna.workdir import (
    JSONValue,
    WorkDir,
    claim_output,
    input_stamp,
    stops_with_resume_hint,
    work_dir_for,
)

if TYPE_CHECKING:
    import torch
    from lightning_fabric import Fabric

    from goatdna.model import DNADecoder, ModelConfig
    from goatdna.runtime import Runtime

ArrayT = TypeVar("ArrayT", np.ndarray, "torch.Tensor")

WHATS = ("logp", "entropy")
DEFAULT_WHAT = ("logp",)
STRANDS = ("both", "forward")
DEFAULT_BATCH_TOKENS = 16384
DEFAULT_BLOCK_BASES = 1 << 16


# ---------------------------------------------------------------------------------------------
# regions


def read_bed(path: str | Path) -> list[Region]:
    """Regions of a BED file (0-based, half-open; columns beyond the third are ignored).

    Read by `goatdna.io.regions.read_bed_intervals` (comments, ``track``/``browser`` and
    blank lines skipped; a bad line is an error naming it).
    """
    return [Region(i.chrom, i.start, i.end) for i in read_bed_intervals(path, "--bed")]


def resolve_regions(regions: Sequence[Region], reference: Reference) -> list[Region]:
    """Check regions against the FASTA and sort them into the order tracks are written in.

    Each contig must exist (a ``20`` vs ``chr20`` mismatch names the FASTA's spelling), each region
    must lie inside its contig and hold at least 2 bases, and regions must not overlap (a bigWig
    holds one value per base).
    """
    order = {name: index for index, name in enumerate(reference.contig_names)}
    checked = []
    for region in regions:
        info = reference.contig(region.contig, where=f"region {region.label}")
        if region.end > info.length:
            raise GoatDNAError(
                f"region {region.label}: ends beyond contig {info.name!r} "
                f"({info.length:,} bases in {reference.path.name})"
            )
        if region.length < 2:
            raise GoatDNAError(
                f"region {region.label}: has {region.length} base; a track needs at least 2"
            )
        checked.append(region)
    checked.sort(key=lambda r: (order[r.contig], r.start, r.end))
    for before, after in zip(checked, checked[1:], strict=False):
        if before.contig == after.contig and after.start < before.end:
            raise GoatDNAError(
                f"regions {before.label} and {after.label} overlap; a track holds one value "
                "per base: merge them or score them into separate files"
            )
    return checked


# ---------------------------------------------------------------------------------------------
# the window grid


@dataclass(frozen=True)
class TrackOptions:
    """How a track is computed: context C, stride S, the quantities and the strands."""

    context: int
    stride: int
    what: tuple[str, ...] = DEFAULT_WHAT
    strands: str = "both"
    batch_size: int = bounded(
        0, COUNT_OR_ZERO
    )  # per forward pass; 0: DEFAULT_BATCH_TOKENS // context
    block_bases: int = DEFAULT_BLOCK_BASES  # bases per streamed block (memory bound)

    def __post_init__(self) -> None:
        check_bounds(self, GoatDNAError)
        if self.context < 2:
            raise GoatDNAError(f"--context {self.context}: must be >= 2")
        if not 1 <= self.stride < self.context:
            raise GoatDNAError(
                f"--stride {self.stride}: must be between 1 and context - 1 = {self.context - 1} "
                "(a base needs at least one base of context in its window)"
            )
        if not self.what:
            raise GoatDNAError("--what: give at least one of logp, entropy")
        for what in self.what:
            if what not in WHATS:
                raise GoatDNAError(f"--what {what!r}: expected one of {', '.join(WHATS)}")
        if len(set(self.what)) != len(self.what):
            raise GoatDNAError(f"--what {', '.join(self.what)}: each quantity once")
        if self.strands not in STRANDS:
            raise GoatDNAError(f"--strands {self.strands!r}: expected both or forward")

    @property
    def windows_per_batch(self) -> int:
        return self.batch_size or max(1, DEFAULT_BATCH_TOKENS // self.context)

    @property
    def windows_per_block(self) -> int:
        return max(1, self.block_bases // self.stride)


def for_region(options: TrackOptions, n: int) -> TrackOptions:
    """The options a region of ``n`` bases is scored with: a region shorter than the context is
    one window, clipped to the region instead of padded to C with N (what follows a position
    cannot change its causal value), so ``--context`` far beyond a region costs nothing."""
    if n >= options.context:
        return options
    return replace(options, context=n, stride=min(options.stride, n - 1))


def max_context(config: ModelConfig) -> int:
    """The largest context a window may have: one window alone must fit
    `goatdna.inference.memory.MEMORY_BOUND_BYTES` (by its ``position_bytes``, the estimate
    score-variants' ``--window`` bound uses)."""
    return int(MEMORY_BOUND_BYTES // position_bytes(config))


def check_context(options: TrackOptions, regions: Sequence[Region], config: ModelConfig) -> None:
    """One ``error:`` line, before any work, for windows beyond `max_context` (after clipping)."""
    longest = max((for_region(options, r.length).context for r in regions), default=0)
    bound = max_context(config)
    if longest > bound:
        raise GoatDNAError(
            f"--context {options.context}: above this model's bound of {bound:,} bases (one "
            f"window must fit {MEMORY_BOUND_BYTES // 2**30} GiB of activations; "
            "docs/tracks.md); use a smaller --context"
        )


def window_of(i: int, context: int, stride: int) -> int:
    """The window that scores the base at offset ``i`` from the region start."""
    return 0 if i < context else (i - context) // stride + 1


def window_first_base(k: int, context: int, stride: int) -> int:
    """First offset scored in window ``k`` (window 0 owns offset 0, which has no value)."""
    return 0 if k == 0 else context + (k - 1) * stride


def window_end_base(k: int, context: int, stride: int) -> int:
    """One past the last offset scored in window ``k`` (before clipping to the region)."""
    return context + k * stride


def window_count(n: int, context: int, stride: int) -> int:
    """Windows needed to score every base of an ``n``-base region."""
    return window_of(n - 1, context, stride) + 1


# ---------------------------------------------------------------------------------------------
# scoring


class WindowScorer:
    """Runs a model over windows of tokens and returns the per-position track values.

    ``score(windows)``: windows (B, C) uint8 tokens -> {what: (B, C - 1) float32}, entry ``t - 1``
    being the value of window position ``t`` (predicted from positions 0..t-1). N targets: NaN.
    """

    def __init__(
        self, model: torch.nn.Module, what: Sequence[str], device: str | torch.device = "cpu"
    ) -> None:
        self.model = model
        self.what = tuple(what)
        self.device = device

    def score(self, windows: np.ndarray) -> dict[str, np.ndarray]:
        import torch

        from goatdna.model.scoring import IGNORE_TARGET, target_log_probs

        with torch.inference_mode():
            tokens = torch.from_numpy(windows.astype(np.int64)).to(self.device)  # (B, C)
            logits = self.model(tokens[:, :-1], 0)  # (B, C - 1, V)
            targets = tokens[:, 1:]  # (B, C - 1)
            missing = targets == IGNORE_TARGET
            out: dict[str, np.ndarray] = {}
            if "logp" in self.what:
                logp = target_log_probs(logits, targets)  # (B, C - 1)
                out["logp"] = logp.masked_fill(missing, math.nan).cpu().numpy()
            if "entropy" in self.what:
                acgt = torch.log_softmax(logits[..., :4].float(), dim=-1)  # (B, C - 1, 4)
                entropy = -(acgt.exp() * acgt).sum(-1)  # (B, C - 1)
                out["entropy"] = entropy.masked_fill(missing, math.nan).cpu().numpy()
        return out


def strand_values(
    scorer: WindowScorer,
    read: Callable[[int, int], np.ndarray],
    n: int,
    k_first: int,
    k_last: int,
    options: TrackOptions,
) -> tuple[int, dict[str, np.ndarray]]:
    """Values of windows ``k_first..k_last - 1`` of one strand of an ``n``-base sequence.

    ``read(lo, hi)`` gives that strand's tokens [lo, hi). Returns (first offset, {what: values})
    covering offsets [window_first_base(k_first), min(window_end_base(k_last - 1), n)); offset 0
    (no preceding base) and N bases are NaN.
    """
    C, S = options.context, options.stride
    span_lo = k_first * S
    span_hi = min((k_last - 1) * S + C, n)
    span = read(span_lo, span_hi)
    padded_length = (k_last - 1 - k_first) * S + C
    if span.size < padded_length:  # the region ends inside the last window: pad with N
        span = np.concatenate([span, np.full(padded_length - span.size, N, dtype=np.uint8)])
    windows = np.lib.stride_tricks.sliding_window_view(span, C)[::S]  # (K, C)
    first = window_first_base(k_first, C, S)
    end = min(window_end_base(k_last - 1, C, S), n)
    values = {what: np.empty(end - first, dtype=np.float32) for what in options.what}
    filled = 0
    batch = options.windows_per_batch
    for b in range(0, windows.shape[0], batch):
        scored = scorer.score(np.ascontiguousarray(windows[b : b + batch]))
        chunk_size = 0
        for what, rows in scored.items():  # rows (B, C - 1): entry t - 1 is position t
            if k_first + b == 0:  # window 0 scores offset 0 (no value) and positions 1..C-1
                head = np.concatenate([np.array([math.nan], dtype=np.float32), rows[0]])
                chunk = np.concatenate([head, rows[1:, C - S - 1 :].reshape(-1)])
            else:  # window k >= 1 scores its positions C-S..C-1
                chunk = rows[:, C - S - 1 :].reshape(-1)
            chunk_size = min(chunk.size, values[what].size - filled)
            values[what][filled : filled + chunk_size] = chunk[:chunk_size]
        filled += chunk_size
    return first, values


def combine_strands(forward: ArrayT, reverse: ArrayT) -> ArrayT:
    """The one definition of a base's value on ``--strands both``, for score-track's tracks and
    `attribute --target base:I` alike: the mean of *the same base's* two strand values (the
    reverse strand's read on the reverse complement, predicted from the bases after it); where
    one strand has none (NaN: the first base has nothing before it on the forward strand, the
    last base on the reverse strand), the other's.

    NumPy arrays give float32 (the mean taken in float64); torch tensors keep their dtype and
    stay differentiable (a NaN that is not chosen gets no gradient), for attribute's targets.
    """
    if isinstance(forward, np.ndarray):
        assert isinstance(reverse, np.ndarray)
        both = (forward.astype(np.float64) + reverse.astype(np.float64)) / 2
        out = np.where(np.isnan(forward), reverse, np.where(np.isnan(reverse), forward, both))
        return out.astype(np.float32)
    import torch

    mean = (forward + reverse) / 2
    return torch.where(forward.isnan(), reverse, torch.where(reverse.isnan(), forward, mean))


def block_count(n: int, options: TrackOptions) -> int:
    """Stream blocks of an ``n``-base region."""
    return -(-window_count(n, options.context, options.stride) // options.windows_per_block)


def block_first_base(block: int, options: TrackOptions) -> int:
    """First offset of stream block ``block`` (the bases the blocks before it cover)."""
    return window_first_base(block * options.windows_per_block, options.context, options.stride)


def region_blocks(
    scorer: WindowScorer,
    read: Callable[[int, int], np.ndarray],
    n: int,
    options: TrackOptions,
    first_block: int = 0,
) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """Stream (first offset, {what: float32 values}) blocks covering offsets 0..n-1 in order.

    ``read(lo, hi)`` gives forward tokens [lo, hi) of the region. Blocks follow the forward window
    grid; for each, the reverse-complement windows covering the same bases are scored too.
    ``first_block`` skips the blocks before it (a resumed run).
    """
    C, S = options.context, options.stride

    def read_reverse(lo: int, hi: int) -> np.ndarray:
        # reverse complement offsets [lo, hi) = complement of forward [n - hi, n - lo), reversed
        return reverse_complement(read(n - hi, n - lo))

    total = window_count(n, C, S)
    step = options.windows_per_block
    for k0 in range(first_block * step, total, step):
        k1 = min(k0 + step, total)
        b0, forward = strand_values(scorer, read, n, k0, k1, options)
        b1 = b0 + next(iter(forward.values())).size
        if options.strands == "forward":
            yield b0, forward
            continue
        # forward offset i is reverse offset n - 1 - i: bases [b0, b1) are reverse [n-b1, n-b0)
        r_lo, r_hi = n - b1, n - b0
        kr0, kr1 = window_of(r_lo, C, S), window_of(r_hi - 1, C, S) + 1
        first, reverse = strand_values(scorer, read_reverse, n, kr0, kr1, options)
        out = {}
        for what in options.what:
            mine = reverse[what][r_lo - first : r_hi - first][::-1]
            out[what] = combine_strands(forward[what], mine)
        yield b0, out


@dataclass
class TrackResult:
    """What a run wrote: files, regions, and the bases that got a value."""

    paths: dict[str, Path]
    regions: list[Region]
    bases: int
    scored_bases: int


def _work_state(
    reference: Reference, regions: Sequence[Region], options: TrackOptions, model_id: str
) -> dict[str, JSONValue]:
    """What decides the values: a resumed run must have been asked the same."""
    return {
        "model": model_id,
        "fasta": input_stamp(reference.path).as_json(),
        "regions": [r.label for r in regions],
        "context": options.context,
        "stride": options.stride,
        "what": list(options.what),
        "strands": options.strands,
        "block_bases": options.block_bases,
    }


def _block_bases(n: int, block: int, options: TrackOptions) -> int:
    """Bases (values) that stream block ``block`` of an ``n``-base region holds."""
    return min(block_first_base(block + 1, options), n) - block_first_base(block, options)


def _consecutive(blocks: Sequence[int]) -> list[range]:
    """Sorted global block indices as maximal runs of consecutive ones."""
    runs: list[range] = []
    for g in blocks:
        if runs and runs[-1].stop == g:
            runs[-1] = range(runs[-1].start, g + 1)
        else:
            runs.append(range(g, g + 1))
    return runs


def _score_run(
    scorer: WindowScorer,
    reference: Reference,
    regions: Sequence[Region],
    plan: Sequence[tuple[int, int]],
    run: range,
    options: TrackOptions,
) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """Score global blocks ``run`` (consecutive), region by region: ``(block, values)`` each."""
    g = run.start
    while g < run.stop:
        index, first = plan[g]
        count = 1
        while g + count < run.stop and plan[g + count][0] == index:
            count += 1
        region = regions[index]
        info = reference.contig(region.contig)

        def read(lo: int, hi: int, _info=info, _start=region.start) -> np.ndarray:
            return reference.read(_info, _start + lo, _start + hi)

        blocks = region_blocks(
            scorer, read, region.length, for_region(options, region.length), first
        )
        for step, (_offset, values) in enumerate(islice(blocks, count)):
            yield g + step, values
        g += count


@dataclass(frozen=True)
class TrackRequest:
    """What one `score-track` run writes and how (the CLI's options): the file name ``out``
    (one file per quantity, `output_paths`), the options, the track line's name, the model's
    identity in the work state, the bigWig zoom levels and ``--resume``/``--force``."""

    out: Path
    options: TrackOptions
    track_name: str = "goatdna"
    model_id: str = ""  # the checkpoint's stamp: a resumed run must score with the same model
    zoom_levels: int = DEFAULT_ZOOM_LEVELS
    resume: bool = False
    force: bool = False
    locked: bool = False  # the caller already holds the lock of out


def _quiet(_text: str) -> None:
    return None


def _nothing() -> None:
    return None


def write_tracks(
    model: DNADecoder,
    reference: Reference,
    regions: Sequence[Region],
    request: TrackRequest,
    fabric: Fabric | None = None,
    progress: Callable[[int], None] | None = None,
    message: Callable[[str], None] = _quiet,
    started: Callable[[], None] = _nothing,
) -> TrackResult | None:
    """Score ``regions`` (already resolved) and write one track file per quantity.

    The stream blocks of all regions, in order, are the units of work
    (`goatdna.inference.loop.run_units`): each finished block is saved in a work folder beside
    ``request.out`` (`goatdna.workdir.WorkDir`, ``.OUT.goatdna-work/``, one checksummed file per
    block), so an interrupted run keeps them and ``resume`` scores only the missing ones, giving
    the same bytes as a run that never stopped; ``force`` starts an earlier run's work over.
    Nothing appears at the output paths until every region is done (temporary names, renamed
    at the end), then the work folder goes.

    ``fabric``: a launched Fabric (`goatdna.runtime.Runtime.fabric`); None runs one CPU process.
    Global rank 0 lists the unfinished blocks once, each rank scores its contiguous share
    (`goatdna.runtime.rank_block`), and rank 0 writes the files from the blocks in order, so the
    output is the same bytes on any number of devices. Returns the result on rank 0, None on
    the others. ``progress(bases)`` is called on rank 0 as its blocks finish (the other ranks'
    at the end); ``message`` says what the work folder holds. An existing output file is
    refused unless ``force``; global rank 0 holds the lock of ``out`` for the whole run
    (`goatdna.inference.loop.rank_zero_lock`; ``locked``: the caller already holds it), so a
    second run on the same output is refused with this one's pid. ``started()`` is called on
    rank 0 once the work folder is open (the run is not refused).
    """
    fabric = fabric or single_process_fabric()
    check_context(request.options, regions, model.config)
    paths = output_paths(request.out, request.options.what)
    claim_output(paths.values(), request.force, inputs=[reference.path])
    with nullcontext() if request.locked else rank_zero_lock(fabric, request.out):
        return _write_tracks(model, reference, regions, request, paths, fabric, progress,
                             message, started)  # fmt: skip


def _write_tracks(model: torch.nn.Module, reference: Reference, regions: Sequence[Region],
                  request: TrackRequest, paths: dict[str, Path], fabric: Fabric,
                  progress: Callable[[int], None] | None, message: Callable[[str], None],
                  started: Callable[[], None]) -> TrackResult | None:  # fmt: skip
    options = request.options
    scorer = WindowScorer(model_on_device(fabric, model), options.what, fabric.device)
    plan = [(i, b) for i, r in enumerate(regions) for b in range(block_count(r.length, options))]
    sizes = [_block_bases(regions[i].length, b, options) for i, b in plan]
    state = _work_state(reference, regions, options, request.model_id)
    work = WorkDir(work_dir_for(request.out), "score-track", state, lambda g: f"block-{g:06d}.npz")
    counted = 0  # bases this process has counted on the bar

    def advance(bases: int) -> None:
        nonlocal counted
        counted += bases
        if progress is not None and bases:
            progress(bases)

    def listed(finished: list[int], _pending: list[int]) -> None:  # rank 0 only
        if finished:
            message(
                f"resuming: {len(finished)} of {len(plan)} block(s) already scored "
                f"({sum(sizes[g] for g in finished):,} bases)"
            )
        advance(sum(sizes[g] for g in finished))

    def compute(share: list[int], _advance: Callable[[int], None]) -> Iterator[tuple[int, Arrays]]:
        with fabric.autocast():
            for run in _consecutive(share):
                for g, values in _score_run(scorer, reference, regions, plan, run, options):
                    yield g, [values[what] for what in options.what]
                    advance(sizes[g])

    def write(done: FinishedUnits) -> int:
        advance(sum(sizes) - counted)  # the other ranks' blocks
        scored = 0
        with ExitStack() as stack:
            writers = {
                what: stack.enter_context(
                    open_track(
                        path,
                        reference.chrom_sizes(),
                        f"{request.track_name} {what}",
                        request.zoom_levels,
                    )
                )
                for what, path in paths.items()
            }
            for g, (index, block) in enumerate(plan):  # in coordinate order: blocks, regions
                region = regions[index]
                start = region.start + block_first_base(block, options)
                for what, values in zip(options.what, done.load(g), strict=True):
                    writers[what].add(region.contig, start, values)
                    if what == options.what[0]:
                        scored += int((~np.isnan(values)).sum())
        return scored

    scored = run_units(
        fabric, work, len(plan), compute, write, resume=request.resume, force=request.force,
        message=message,
        opened=started, listed=listed, crash="score_track.block_saved",
        save=lambda *unit: save_arrays(*unit),  # looked up per call: a test wraps it
    )  # fmt: skip
    if scored is None:  # not global rank 0: rank 0 writes
        return None
    return TrackResult(paths, list(regions), sum(r.length for r in regions), scored)


# ---------------------------------------------------------------------------------------------
# the `score-track` command


@dataclass(frozen=True)
class ScoreTrackRequest:
    """Everything one `score-track` run needs (the CLI's options): the regions as ``--region``
    texts or a ``--bed`` file (exactly one), ``context`` (None: the training length), ``stride``
    (None: C // 2) and ``what`` (empty: `TrackOptions`' default)."""

    checkpoint: Path
    fasta: Path
    out: Path
    regions: tuple[str, ...] = ()
    bed: Path | None = None
    context: int | None = None
    stride: int | None = None
    what: tuple[str, ...] = ()
    strands: str = "both"
    batch_size: int = 0
    zoom_levels: int = DEFAULT_ZOOM_LEVELS
    resume: bool = False
    force: bool = False


def score_track(request: ScoreTrackRequest, runtime: Runtime) -> TrackResult | None:
    """Check ``request`` (before any work), load the model, score the regions and write the
    tracks (`write_tracks`); the result on global rank 0, None on the other ranks.

    Rank 0 says what runs (the model, C, S, the bases) once the work folder is open, and shows
    a progress bar over the bases on stderr. ``runtime``'s Fabric is launched only once the
    inputs are checked.
    """
    from goatdna.atomic import check_output_file
    from goatdna.checkpoint import load_checkpoint
    from goatdna.console import output_console
    from goatdna.io.regions import parse_region

    what = request.what or DEFAULT_WHAT
    if request.regions and request.bed is not None:
        raise GoatDNAError("give the regions with --region (repeatable) or with --bed, not both")
    if not request.regions and request.bed is None:
        raise GoatDNAError(
            "no regions to score: give --region CHROM:START-END (repeatable) or --bed REGIONS.bed"
        )
    paths = output_paths(request.out, what)
    for path in paths.values():  # bad extension or folder: before any work
        check_output_file(path, "--out")
    inputs = [request.fasta, request.checkpoint, request.bed]
    claim_output(paths.values(), request.force, inputs=inputs)
    if not 0 <= request.zoom_levels <= 10:
        raise GoatDNAError(f"--zoom-levels {request.zoom_levels}: must be between 0 and 10")
    if request.context is not None and request.context < 2:
        raise GoatDNAError(f"--context {request.context}: must be >= 2")
    if request.regions:
        requested = [parse_region(text) for text in request.regions]
    else:
        assert request.bed is not None  # exactly one of the two, checked above
        requested = read_bed(request.bed)
    fabric = runtime.fabric()
    rank_zero = fabric.global_rank == 0  # rank 0 reports and writes; the others only score
    console = output_console(stderr=True, quiet=not rank_zero)

    def say(text: str) -> None:
        console.print(text, markup=False)

    with (
        rank_zero_lock(fabric, request.out),  # before anything is said: a refusal is the only line
        Reference(request.fasta, message=say) as reference,
    ):
        regions = resolve_regions(requested, reference)
        loaded = load_checkpoint(request.checkpoint, "cpu", lm_command="score-track")
        model, train_length = loaded.model, loaded.train_length
        C = request.context if request.context is not None else train_length
        stride = request.stride if request.stride is not None else max(1, C // 2)
        options = TrackOptions(C, stride, tuple(what), request.strands, request.batch_size)
        positional = model.config.positional
        note = " (longer than training: extrapolation)" if train_length < C else ""
        total = sum(r.length for r in regions)
        display = ExitStack()
        bars: list[Callable[[int], None]] = []  # the bar's advance, once the run starts

        def advance(bases: int) -> None:
            for bar in bars:
                bar(bases)

        def started() -> None:  # rank 0, once the work folder is open: the run really starts
            from goatdna.progress import progress_bar

            console.print(
                f"{positional} model, training length {train_length}; context {C}{note}, "
                f"stride {options.stride}, strands {request.strands}; {len(regions)} region(s), "
                f"{total:,} bases"
            )
            bar = progress_bar("score-track", total, "bases", rank_zero, console)
            bars.append(display.enter_context(bar))

        track = TrackRequest(
            request.out,
            options,
            track_name=f"goatdna {positional} C={C}",
            model_id=str(input_stamp(request.checkpoint)),
            zoom_levels=request.zoom_levels,
            resume=request.resume,
            force=request.force,
            locked=True,
        )
        progress = advance if rank_zero else None
        with display, stops_with_resume_hint("score-track", work_dir_for(request.out)):
            return write_tracks(
                model, reference, regions, track, fabric, progress, message=say, started=started
            )
