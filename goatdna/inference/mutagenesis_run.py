"""Running `goatdna mutagenesis`: resumable units of positions, a plain loop over Fabric, outputs.

The region's positions are cut into units of ``--chunk-size`` (for ``local`` rounded up to whole
chunks of the window grid, so a unit's numbers never depend on where units are cut). Each
finished unit is saved in the work folder beside the first output (`goatdna.workdir.WorkDir`,
as `score-variants` does), so ``--resume`` skips finished units and writes byte-identical
outputs, and with ``--devices``/``--num-nodes`` global rank 0 lists the unfinished units once
and every rank scores its contiguous block of that list (`goatdna.runtime.rank_block`).

Outputs are chosen by the suffix of each ``--out`` (repeatable), all written by global rank 0
to temporary names and renamed when complete:

- ``.tsv`` / ``.parquet``: one row per position and alternative base (`table_frame`);
- ``.npz``: the (L, 4) matrix and its per-strand parts (`write_matrix`);
- ``.bw`` / ``.bigWig`` / ``.bedGraph``: two tracks, ``NAME.min.bw`` and ``NAME.mean.bw``, the
  minimum and mean over the three alternatives per base (a constraint track for a browser);
- ``.png``: a heatmap under the reference logo, drawn by the caller's ``draw`` function (the
  CLI passes `goatdna.analysis.plots.plot_ism`; inference does not import analysis).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from goatdna.atomic import atomic_path, atomic_write_bytes
from goatdna.configfile import COUNT, ConfigFlag, bounded, check_bounds
from goatdna.errors import GoatDNAError
from goatdna.inference.loop import (
    Arrays,
    FinishedUnits,
    UnitProgress,
    model_on_device,
    rank_zero_lock,
    run_units,
    save_arrays,
)
from goatdna.inference.memory import check_window
from goatdna.inference.mutagenesis import (
    BASES,
    MutagenesisOptions,
    check_full_window,
    combine,
    scan,
)
from goatdna.inference.reference import Reference
from goatdna.io.bigwig import open_track
from goatdna.io.bigwig import output_paths as track_paths
from goatdna.io.regions import Region, parse_region
from goatdna.io.tokens import BASES as TOKEN_LETTERS
from goatdna.io.tokens import NUM_BASES
from goatdna.runtime import single_process_fabric
from goatdna.workdir import JSONValue, WorkDir, claim_output, input_stamp, work_dir_for

if TYPE_CHECKING:
    from lightning_fabric import Fabric


DEFAULT_CHUNK_SIZE = 256
MAX_PLOT_POSITIONS = 2000
"""A heatmap of more positions than this is no longer readable: ``.png`` is refused beyond it."""

KINDS = {".tsv": "tsv", ".parquet": "parquet", ".npz": "npz", ".png": "png", ".bw": "track",
         ".bigwig": "track", ".bedgraph": "track", ".bg": "track"}  # fmt: skip
TRACK_WHATS = ("min", "mean")
FLOAT_FORMAT = "%.6f"


def output_kind(path: Path) -> str:
    """What an ``--out`` name asks for, from its suffix; anything else is one user error."""
    kind = KINDS.get(path.suffix.lower())
    if kind is None:
        raise GoatDNAError(
            f"--out {path}: unknown extension {path.suffix or '(none)'}; use .tsv or .parquet "
            "(table), .npz (matrix), .bw/.bedGraph (constraint tracks) or .png (heatmap)"
        )
    return kind


def written_paths(out: Path) -> list[Path]:
    """The files one ``--out`` becomes (a track name becomes NAME.min.bw and NAME.mean.bw)."""
    if output_kind(out) == "track":
        return list(track_paths(out, TRACK_WHATS).values())
    return [out]


@dataclass(frozen=True)
class MutagenesisRequest:
    """Everything one `mutagenesis` run needs (the CLI's options)."""

    checkpoint: Path
    fasta: Path
    region: str  # contig:start-end, 1-based inclusive
    outs: tuple[Path, ...]
    window: int | None = bounded(None, COUNT)  # default: the model's training length
    method: str = "full"
    strands: str = "both"
    batch_size: int = bounded(64, COUNT)
    chunk_size: int = bounded(DEFAULT_CHUNK_SIZE, COUNT)  # positions per resumable unit
    resume: bool = False
    force: bool = False
    cache_dir: Path | None = None


MUTAGENESIS_FLAGS: tuple[ConfigFlag, ...] = (
    ConfigFlag(
        "method",
        "method",
        "full: the exact score-variants LLR of each SNV; local: log p(alt | left) - log p(ref | "
        "left) at the base itself (a fast approximation).",
    ),
    ConfigFlag(
        "window", "window", "W: W // 2 reference bases on each side (default: training length)."
    ),
    ConfigFlag(
        "strands",
        "strands",
        "both: average forward and reverse complement; forward: forward only.",
    ),
    ConfigFlag(
        "batch_size",
        "batch_size",
        "full: positions per pass, one strand each (s_ref + 3 ALT suffixes); local: windows.",
    ),
    ConfigFlag(
        "chunk_size", "chunk_size", "Positions per resumable unit (the unit --resume keeps)."
    ),
)
"""`goatdna mutagenesis`' flags that set `MutagenesisRequest` fields (their defaults are the
fields'), declared next to the request as `SCORE_VARIANTS_FLAGS` are."""


@dataclass
class MutagenesisResult:
    """The scan of one region: per-position values and what was written."""

    region: Region
    options: MutagenesisOptions
    ref: np.ndarray  # (L,) reference tokens (A C G T N = 0..4)
    per_strand: np.ndarray  # (L, 2, 4) forward / reverse values, NaN where none
    scores: np.ndarray  # (L, 4) strands combined; 0 at the reference base, NaN at N
    written: list[Path]
    resumed_units: int = 0

    @property
    def score_name(self) -> str:
        """``llr`` for the exact method, ``llr_local`` for the approximation."""
        return "llr" if self.options.method == "full" else "llr_local"

    @property
    def title(self) -> str:
        """The heatmap's title: the region, how the values were computed, the window."""
        method = "exact LLR" if self.options.method == "full" else "local approximation"
        return (
            f"In-silico mutagenesis of {self.region.label} ({method}, window {self.options.window})"
        )

    def summary(self) -> str:
        """One line: the region, its positions, the alternatives that got a value, the options."""
        scored = int(np.isfinite(self.alternative_values()).sum())
        return (
            f"{self.region.label}: {len(self.ref):,} positions, {scored:,} alternatives scored "
            f"({self.options.method}, window {self.options.window}, strands "
            f"{self.options.strands})"
        )

    def figure_labels(self) -> dict[str, Any]:
        """How the heatmap (`goatdna.analysis.plots.plot_ism`, drawn by the command: analysis
        is not inference's to import) labels the scan: first base, title, the score's name."""
        label = f"{self.score_name} (nats)"
        return {"start": self.region.start, "title": self.title, "score_label": label}

    def print_report(self) -> None:
        """What `goatdna mutagenesis` prints after a run: the summary, the units resumed, the
        files written (stdout)."""
        from goatdna.console import output_console

        console = output_console()
        console.print(self.summary(), markup=False)
        if self.resumed_units:
            console.print(f"resumed: {self.resumed_units} unit(s) were already scored")
        for path in self.written:
            console.print(f"wrote {path}", markup=False)

    def alternative_values(self) -> np.ndarray:
        """(L, 3): the three alternative bases' values per position (NaN rows at N)."""
        known = self.ref < NUM_BASES
        mask = np.arange(4)[None, :] != np.where(known, self.ref, 0)[:, None]  # (L, 4)
        values = self.scores[mask].reshape(len(self.ref), 3)
        values[~known] = np.nan
        return values


def unit_positions(options: MutagenesisOptions, chunk_size: int) -> int:
    """Positions per unit: ``chunk_size``, for ``local`` rounded up to whole grid chunks."""
    if options.method == "local":
        return -(-chunk_size // options.stride) * options.stride
    return chunk_size


def mutagenesis(
    request: MutagenesisRequest,
    fabric: Fabric | None = None,
    progress: bool = True,
    draw: Callable[[MutagenesisResult, Path], object] | None = None,
) -> MutagenesisResult | None:
    """Scan ``request.region``; returns the result on global rank 0, else None.

    ``fabric``: a launched Fabric (`goatdna.runtime.Runtime.fabric`); None runs one CPU process.
    ``draw(result, path)`` writes a ``.png`` output (needed only when one is asked for).
    """
    if not request.outs:
        raise GoatDNAError("--out: give at least one output (.tsv, .parquet, .npz, .bw, .png)")
    check_bounds(request, GoatDNAError)
    region = parse_region(request.region)
    kinds = [output_kind(out) for out in request.outs]
    if "png" in kinds and draw is None:
        raise GoatDNAError("--out .png: this caller passed no drawing function")
    if "png" in kinds and region.length > MAX_PLOT_POSITIONS:
        raise GoatDNAError(
            f"--out {request.outs[kinds.index('png')]}: a heatmap shows at most "
            f"{MAX_PLOT_POSITIONS:,} positions and {region.label} has {region.length:,}; "
            "scan a shorter region or drop the .png"
        )
    paths = [p for out in request.outs for p in written_paths(out)]
    if len(set(paths)) != len(paths):
        raise GoatDNAError(f"--out: the same file is named twice ({', '.join(map(str, paths))})")
    for path in paths:
        if not path.parent.is_dir():
            raise GoatDNAError(f"--out {path}: folder {path.parent} does not exist")
    claim_output(paths, request.force, inputs=[request.fasta, request.checkpoint])
    fabric = fabric or single_process_fabric()
    with rank_zero_lock(fabric, paths):
        return _run(request, region, fabric, progress, draw)


def _check_region(region: Region, reference: Reference) -> None:
    info = reference.contig(region.contig, where=f"--region {region.label}")
    if region.end > info.length:
        raise GoatDNAError(
            f"--region {region.label}: ends beyond contig {info.name!r} "
            f"({info.length:,} bases in {reference.path.name})"
        )


def _check_outputs(outs: tuple[Path, ...], region: Region, ref: np.ndarray) -> None:
    """Every output must be writable from this region's values, checked before the scan: a
    bigWig needs at least one value (an all-N region has none), and one output failing after
    the others were written would leave a partial set."""
    from goatdna.io.bigwig import output_kind as track_kind

    has_value = bool((ref < 4).any())  # N positions have no alternative, so no value
    for out in outs:
        if output_kind(out) == "track" and track_kind(out) == "bigwig" and not has_value:
            raise GoatDNAError(
                f"--out {out}: {region.label} is all N, so the constraint tracks have no value "
                "and a bigWig needs one; write .bedGraph, or scan a region with bases"
            )


def _write_all(result: MutagenesisResult, outs: tuple[Path, ...],
               chrom_sizes: list[tuple[str, int]],
               draw: Callable[[MutagenesisResult, Path], object] | None) -> None:  # fmt: skip
    """Each output in turn; if one fails, the ones written before it are removed (the scan
    stays in the work folder, so --resume writes the whole set)."""
    try:
        for out in outs:
            result.written += _write(result, out, chrom_sizes, draw)
    except BaseException:
        for path in result.written:
            path.unlink(missing_ok=True)
        result.written = []
        raise


def _run(request: MutagenesisRequest, region: Region, fabric: Fabric, progress: bool,
         draw: Callable[[MutagenesisResult, Path], object] | None) -> MutagenesisResult | None:  # fmt: skip
    from goatdna.checkpoint import load_checkpoint

    loaded = load_checkpoint(request.checkpoint, device="cpu", lm_command="mutagenesis")
    window = request.window if request.window is not None else loaded.train_length
    check_window(window, loaded.model_config)  # score-variants' memory bound: the same windows
    options = MutagenesisOptions(window, request.method, request.strands, request.batch_size)
    if options.method == "full":
        check_full_window(window, loaded.model_config)  # one group at a time must fit too
    first_out = request.outs[0]
    cache_dir = request.cache_dir or first_out.parent / ".goatdna-cache"
    reference = Reference(request.fasta, cache_dir, message=print if progress else None)
    _check_region(region, reference)
    contig = reference.contig_tokens(region.contig)
    _check_outputs(request.outs, region, contig[region.start : region.end])
    size = unit_positions(options, request.chunk_size)
    n_units = -(-region.length // size)
    state: dict[str, JSONValue] = {
        "checkpoint": input_stamp(request.checkpoint).as_json(),
        "fasta": input_stamp(request.fasta).as_json(),
        "region": region.label,
        "options": asdict(options),
        "unit_positions": size,
    }
    work = WorkDir(work_dir_for(first_out), "mutagenesis", state, lambda i: f"unit-{i:06d}.npz")
    model = model_on_device(fabric, loaded.model)

    def positions(unit: int) -> range:
        return range(region.start + unit * size, min(region.end, region.start + (unit + 1) * size))

    def compute(units: list[int], advance: Callable[[int], None]) -> Iterator[tuple[int, Arrays]]:
        for unit in units:
            with fabric.autocast():
                values = scan(model, contig, region.start, positions(unit), options)
            yield unit, [values]
            advance(len(positions(unit)))

    def write(done: FinishedUnits) -> MutagenesisResult:
        per_strand = np.concatenate([done.load(u)[0] for u in range(n_units)])
        result = MutagenesisResult(
            region=region,
            options=options,
            ref=contig[region.start : region.end].copy(),
            per_strand=per_strand,
            scores=combine(per_strand, options),
            written=[],
            resumed_units=done.resumed,
        )
        _write_all(result, request.outs, reference.chrom_sizes(), draw)
        return result

    return run_units(
        fabric, work, n_units, compute, write, resume=request.resume, force=request.force,
        message=print if progress else _quiet,
        progress=UnitProgress("mutagenesis", "positions", lambda u: len(positions(u)), progress),
        save=lambda *unit: save_arrays(*unit),  # looked up per call: a test wraps it
    )  # fmt: skip


def _quiet(_text: str) -> None:
    return None


# ---------------------------------------------------------------------------------------------
# outputs


def table_frame(result: MutagenesisResult):
    """The long table: ``chrom, pos, ref, alt, <score>, <score>_fwd, <score>_rev`` per row.

    One row per position whose reference is A/C/G/T and per alternative base (A C G T order);
    ``pos`` is 1-based as in a VCF; ``<score>`` is ``llr`` (``full``) or ``llr_local``.
    """
    import pandas as pd

    ref = result.ref
    known = np.flatnonzero(ref < NUM_BASES)
    rows = np.repeat(known, 4)
    alt = np.tile(np.arange(4), known.size)
    keep = alt != ref[rows]
    rows, alt = rows[keep], alt[keep]
    letters = np.array(list(BASES))
    name = result.score_name
    return pd.DataFrame(
        {
            "chrom": result.region.contig,
            "pos": (result.region.start + 1 + rows).astype(np.int64),
            "ref": letters[ref[rows]],
            "alt": letters[alt],
            name: result.scores[rows, alt],
            f"{name}_fwd": result.per_strand[rows, 0, alt],
            f"{name}_rev": result.per_strand[rows, 1, alt],
        }
    )


def write_matrix(result: MutagenesisResult, out: Path) -> None:
    """``.npz``: ``scores`` (L, 4) in A C G T columns, ``scores_fwd``/``scores_rev``, the
    reference (``ref``, text), ``chrom``, 0-based ``start``/``end``, ``method``, ``window``."""
    buffer = io.BytesIO()
    np.savez(
        buffer,
        scores=result.scores,
        scores_fwd=result.per_strand[:, 0],
        scores_rev=result.per_strand[:, 1],
        ref=np.array("".join(TOKEN_LETTERS[t] for t in result.ref)),
        bases=np.array(BASES),
        chrom=np.array(result.region.contig),
        start=np.int64(result.region.start),
        end=np.int64(result.region.end),
        method=np.array(result.options.method),
        score=np.array(result.score_name),
        window=np.int64(result.options.window),
    )
    atomic_write_bytes(out, buffer.getvalue())


def _write(result: MutagenesisResult, out: Path, chrom_sizes: list[tuple[str, int]],
           draw: Callable[[MutagenesisResult, Path], object] | None) -> list[Path]:  # fmt: skip
    kind = output_kind(out)
    if kind in ("tsv", "parquet"):
        frame = table_frame(result)
        with atomic_path(out) as tmp:
            if kind == "tsv":
                frame.to_csv(tmp, sep="\t", index=False, float_format=FLOAT_FORMAT, na_rep="")
            else:
                frame.to_parquet(tmp, index=False)
        return [out]
    if kind == "npz":
        write_matrix(result, out)
        return [out]
    if kind == "png":
        assert draw is not None  # checked before any work
        draw(result, out)
        return [out]
    alternatives = result.alternative_values()
    import warnings

    with warnings.catch_warnings():  # N rows are all-NaN: no value in the track
        warnings.simplefilter("ignore", RuntimeWarning)
        values = {"min": np.nanmin(alternatives, axis=1), "mean": np.nanmean(alternatives, axis=1)}
    paths = track_paths(out, TRACK_WHATS)
    for what, path in paths.items():
        with open_track(path, chrom_sizes, f"{result.score_name} {what} over 3 alternatives") as w:
            w.add(result.region.contig, result.region.start, values[what])
    return list(paths.values())
