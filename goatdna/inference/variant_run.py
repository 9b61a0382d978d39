"""Running `goatdna score-variants`: resumable chunks, a plain loop over Fabric, the output.

The alleles are cut into chunks of ``chunk_size`` in input order. A chunk's scores depend only on
its alleles and the options (its batches are formed the same way wherever it runs), and each
finished chunk is saved in a work folder next to the output (``.OUT.goatdna-work/``), so:

- ``--resume`` skips finished chunks and the output is byte-identical to an uninterrupted run;
- with ``--devices``/``--num-nodes`` (a launched `lightning_fabric.Fabric`) global rank 0 lists
  the unfinished chunks once and every rank scores its contiguous block of that list
  (`goatdna.runtime.rank_block`), so the output equals one process's.

Global rank 0 writes the output (temporary name, then rename) and removes the work folder.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from goatdna.configfile import COUNT, ConfigFlag, bounded, check_bounds, options_with_flags
from goatdna.errors import GoatDNAError
from goatdna.inference.calibration import (
    CALIBRATION_COLUMNS,
    CalibrationRequest,
    calibration_columns,
    plan_null,
)
from goatdna.inference.calibration import check_output as check_calibrated_output
from goatdna.inference.loop import (
    Arrays,
    FinishedUnits,
    UnitProgress,
    model_on_device,
    rank_zero_lock,
    run_units,
)
from goatdna.inference.memory import check_window
from goatdna.inference.reference import Reference
from goatdna.inference.variant_io import (
    SCORE_COLUMNS,
    TableAlleles,
    VcfAlleles,
    check_sorted_for_index,
    output_kind,
    read_variants,
    results_frame,
    table_results_frame,
    write_table,
    write_vcf,
)
from goatdna.inference.variants import (
    STATUS_MEANING,
    STATUSES,
    Allele,
    VariantOptions,
    allele_status,
    combine_strands,
    score_alleles,
)
from goatdna.runtime import single_process_fabric
from goatdna.workdir import (
    JSONValue,
    WorkDir,
    claim_output,
    input_stamp,
    work_dir_for,
)

if TYPE_CHECKING:
    from lightning_fabric import Fabric
    from rich.table import Table

    from goatdna.model.transformer import DNADecoder

DEFAULT_CHUNK_SIZE = 4096


@dataclass(frozen=True)
class ScoreVariantsRequest:
    """Everything one `score-variants` run needs (the CLI's options, validated)."""

    checkpoint: Path
    fasta: Path
    variants: Path  # a VCF/BCF, or a chrom/pos/ref/alt table (.tsv, .csv, .parquet) by suffix
    out: Path
    window: int | None = bounded(None, COUNT)  # default: the model's training length
    strands: str = "both"
    batch_size: int = bounded(64, COUNT)
    chunk_size: int = bounded(DEFAULT_CHUNK_SIZE, COUNT)
    resume: bool = False
    force: bool = False  # replace an existing file at out / start over an earlier run's work
    cache_dir: Path | None = None  # where a plain-gzip FASTA is decompressed once
    shared_prefix: bool = True
    length_fair: bool = True  # indel windows with equal scored positions (docs/variants.md)
    calibration: CalibrationRequest | None = None  # --calibrate / --null: percentiles, z-scores


SCORE_VARIANTS_FLAGS: tuple[ConfigFlag, ...] = (
    ConfigFlag(
        "window",
        "window",
        "W: W // 2 reference bases on each side of the alleles (default: training length). At "
        "most the model's memory bound (docs/variants.md); alleles longer than W are not scored "
        "(status too_long).",
    ),
    ConfigFlag(
        "strands",
        "strands",
        "both: average the forward and reverse-complement LLRs; forward: forward only.",
    ),
    ConfigFlag(
        "length_fair",
        "length_fair",
        "Indels: extend the shorter allele's window so both score the same number of positions "
        "(default), or score the plain windows of unequal length (the earlier definition).",
        names=("--length-fair/--length-unfair",),
    ),
    ConfigFlag("batch_size", "batch_size", "Allele pairs (one strand each) per forward pass."),
    ConfigFlag(
        "chunk_size", "chunk_size", "Alleles per resumable chunk (the unit --resume keeps)."
    ),
)
"""`goatdna score-variants`' flags that set `ScoreVariantsRequest` fields (their defaults are
the fields'): declared next to the request, as `PREPARE_FLAGS` are next to `PrepareOptions`."""

CALIBRATION_FLAGS: tuple[ConfigFlag, ...] = (
    ConfigFlag(
        "null",
        "null",
        "The null's file (.npz): made on the first run, reused while the inputs and options "
        "match (implies --calibrate).",
    ),
    ConfigFlag("seed", "seed", "Seed of the null's SNVs (same seed, same null)."),
    ConfigFlag("null_size", "per_context", "Null SNVs per trinucleotide context (32 contexts)."),
)
"""`goatdna score-variants`' flags that set its `CalibrationRequest` (with ``--calibrate``)."""


def calibration_request(calibrate: bool, flags: Mapping[str, object]) -> CalibrationRequest | None:
    """The run's calibration from ``--calibrate`` and `CALIBRATION_FLAGS`' values: None unless
    ``--calibrate`` or ``--null`` (which implies it) is given."""
    if not calibrate and flags["null"] is None:
        return None
    return options_with_flags(CalibrationRequest, CALIBRATION_FLAGS, flags)


@dataclass
class ScoreVariantsSummary:
    """What a run did: allele counts by status and notes on the statuses."""

    out: Path
    alleles: int
    records: int
    window: int
    counts: dict[str, int]
    notes: dict[str, str] = field(default_factory=dict)
    resumed_chunks: int = 0


def summary_table(summary: ScoreVariantsSummary) -> Table:
    """The run's allele counts by status, with what each status means (the command prints it)."""
    from rich.table import Table

    table = Table(
        title=f"{summary.alleles:,} ALT alleles of {summary.records:,} records "
        f"(window {summary.window})"
    )
    for name in ("status", "alleles", "meaning"):
        table.add_column(name, justify="right" if name == "alleles" else "left")
    for status, count in summary.counts.items():
        table.add_row(status, f"{count:,}", summary.notes.get(status, STATUS_MEANING[status]))
    return table


def no_score_warning(summary: ScoreVariantsSummary) -> str | None:
    """The warning when alleles were read but none was scored: what most of them were."""
    if not summary.alleles or summary.counts.get("ok"):
        return None
    worst = max(summary.counts, key=lambda status: summary.counts[status])
    hint = " (is the FASTA the VCF's assembly? their contig names must match)"
    return (
        f"warning: no allele was scored: most are {worst}, "
        f"{STATUS_MEANING[worst]}{hint if worst == 'missing_contig' else ''}"
    )


def print_summary(summary: ScoreVariantsSummary) -> None:
    """What `score-variants` prints after a run: the status table, the chunks resumed and the
    file written on stdout, and `no_score_warning` on stderr."""
    import sys

    from goatdna.console import output_console

    console = output_console()
    console.print(summary_table(summary))
    if summary.resumed_chunks:
        console.print(f"resumed: {summary.resumed_chunks} chunk(s) were already scored")
    tbi = " (+ .tbi)" if str(summary.out).endswith(".vcf.gz") else ""
    console.print(f"wrote {summary.out}{tbi}", markup=False)
    warning = no_score_warning(summary)
    if warning is not None:
        print(warning, file=sys.stderr)


def _chunk_name(chunk: int) -> str:
    return f"chunk-{chunk:06d}.npz"


def _save_chunk(work: WorkDir, chunk: int, scores: np.ndarray, windows: np.ndarray) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, scores=scores, windows=windows)
    work.save(chunk, buffer.getvalue())


def _load_chunks(work: WorkDir, n_chunks: int) -> tuple[np.ndarray, np.ndarray]:
    scores, windows = [], []
    for chunk in range(n_chunks):
        with np.load(io.BytesIO(work.load(chunk))) as data:
            scores.append(data["scores"])
            windows.append(data["windows"])
    if not scores:
        return np.zeros((0, 4)), np.zeros((0, 2), dtype=np.int64)
    return np.concatenate(scores), np.concatenate(windows)


def _status_notes(
    vcf: VcfAlleles | TableAlleles, statuses: list[str], reference: Reference
) -> dict[str, str]:
    """One line per status that needs explaining (missing contigs with the FASTA's name)."""
    notes: dict[str, str] = {}
    missing = sorted(
        {a.chrom for a, s in zip(vcf.alleles, statuses, strict=True) if s == "missing_contig"}
    )
    if missing:
        parts = []
        for name in missing[:5]:
            other = reference.suggestion(name)
            parts.append(f"{name} (FASTA has {other})" if other else name)
        notes["missing_contig"] = (
            "not in the FASTA: " + ", ".join(parts) + (", ..." if len(missing) > 5 else "")
        )
    return notes


def _check_naming(
    vcf: VcfAlleles | TableAlleles, statuses: list[str], reference: Reference
) -> None:
    """Refuse a run in which no allele can be scored because of contig naming (20 vs chr20)."""
    sequence_alleles = [a for a, s in zip(vcf.alleles, statuses, strict=True) if s != "symbolic"]
    if sequence_alleles and all(s in ("missing_contig", "symbolic") for s in statuses):
        renamed = [a.chrom for a in sequence_alleles if reference.suggestion(a.chrom)]
        if renamed:
            raise GoatDNAError(
                f"--variants {vcf.path} and --fasta {reference.path} name contigs differently: "
                + reference.missing_message(renamed[0])
            )


def _chunk_rows(chunk: int, chunk_size: int, n: int) -> range:
    """The allele rows of ``chunk`` (chunks of ``chunk_size`` in input order; the last shorter)."""
    return range(chunk * chunk_size, min((chunk + 1) * chunk_size, n))


def _score_chunks(fabric: Fabric, model: DNADecoder, alleles: list[Allele],
                  statuses: list[str], reference: Reference, options: VariantOptions,
                  chunk_size: int, chunks: list[int], advance: Callable[[int], None]
                  ) -> Iterator[tuple[int, Arrays]]:  # fmt: skip
    """Score ``chunks`` (this rank's block of the unfinished ones), yielding each to be saved."""
    for chunk in chunks:
        rows = _chunk_rows(chunk, chunk_size, len(alleles))
        part = slice(rows.start, rows.stop)
        with fabric.autocast():
            scores, windows = score_alleles(
                model, alleles[part], statuses[part], reference, options
            )
        yield chunk, [scores, windows]
        advance(len(rows))


def _quiet(_text: str) -> None:
    return None


def _check_writable_before_work(request: ScoreVariantsRequest) -> None:
    """What is written after the scoring (the null, a decompressed FASTA) must be writable before
    it: otherwise an hour of scoring ends in a traceback."""
    from goatdna.atomic import check_output_dir, check_output_file

    if request.cache_dir is not None:
        check_output_dir(request.cache_dir, "--cache-dir")
    null = request.calibration.null if request.calibration is not None else None
    if null is not None and not null.exists():
        check_output_file(null, "--null")


def score_variants(
    request: ScoreVariantsRequest, fabric: Fabric | None = None, progress: bool = True
) -> ScoreVariantsSummary | None:
    """Score every ALT allele of ``request.variants``; returns the summary on global rank 0, else None.

    ``fabric``: a launched Fabric (`goatdna.runtime.Runtime.fabric`); None runs one CPU process.
    Global rank 0 holds the lock of ``--out`` for the whole run (`goatdna.workdir.output_lock`),
    so a second run on the same output is refused with this one's pid.
    """
    kind = output_kind(request.out)
    if request.calibration is not None:
        check_calibrated_output(kind)
    check_bounds(request, GoatDNAError)
    _check_writable_before_work(request)
    claim_output(
        [request.out], request.force, inputs=[request.variants, request.fasta, request.checkpoint]
    )
    fabric = fabric or single_process_fabric()
    with rank_zero_lock(fabric, request.out):
        return _run(request, fabric, progress)


def _output_frame(vcf: VcfAlleles | TableAlleles, numbers, windows, statuses):
    """The table output of either input (a table's own columns carried), before calibration."""
    if isinstance(vcf, TableAlleles):
        return table_results_frame(vcf, numbers, windows, statuses)
    return results_frame(vcf.alleles, numbers, windows, statuses)


def _run(
    request: ScoreVariantsRequest, fabric: Fabric, progress: bool
) -> ScoreVariantsSummary | None:
    from goatdna.checkpoint import load_checkpoint

    out = request.out
    kind = output_kind(out)
    loaded = load_checkpoint(request.checkpoint, device="cpu", lm_command="score-variants")
    model = loaded.model
    window = request.window if request.window is not None else loaded.train_length
    options = VariantOptions(window, request.strands, request.batch_size, request.shared_prefix,
                             request.length_fair)  # fmt: skip
    check_window(window, loaded.model_config)
    if out.parent and not out.parent.is_dir():
        raise GoatDNAError(f"--out {out}: folder {out.parent} does not exist")
    cache_dir = request.cache_dir or out.parent / ".goatdna-cache"
    reference = Reference(request.fasta, cache_dir, message=print if progress else None)
    calibrated = request.calibration is not None
    vcf = read_variants(
        request.variants, SCORE_COLUMNS + (CALIBRATION_COLUMNS if calibrated else ())
    )
    if kind == "vcf.gz":
        if isinstance(vcf, TableAlleles):
            raise GoatDNAError(
                f"--out {out}: .vcf.gz output annotates an input VCF, and --variants "
                f"{request.variants} is a table; write .tsv or .parquet"
            )
        check_sorted_for_index(vcf, out)
    statuses = [allele_status(a, reference, window, options.length_fair) for a in vcf.alleles]
    _check_naming(vcf, statuses, reference)
    null_plan = None  # --calibrate: an existing null made otherwise is refused before scoring
    if request.calibration is not None:
        null_plan = plan_null(vcf.alleles, statuses, reference, options, request.calibration,
                              request.checkpoint, request.fasta, cache_dir)  # fmt: skip

    n_chunks = -(-len(vcf.alleles) // request.chunk_size)
    state: dict[str, JSONValue] = {
        "checkpoint": input_stamp(request.checkpoint).as_json(),
        "fasta": input_stamp(request.fasta).as_json(),
        "variants": input_stamp(request.variants).as_json(),
        "alleles": len(vcf.alleles),
        # one key per option, spelt as the flag, so --resume with another names it
        **{"--" + name.replace("_", "-"): value for name, value in asdict(options).items()},
        "--chunk-size": request.chunk_size,
    }
    work = WorkDir(work_dir_for(out), "score-variants", state, _chunk_name)

    say: Callable[[str], None] = print if progress else _quiet

    model = model_on_device(fabric, model)

    def compute(chunks: list[int], advance: Callable[[int], None]) -> Iterator[tuple[int, Arrays]]:
        return _score_chunks(fabric, model, vcf.alleles, statuses, reference, options,
                             request.chunk_size, chunks, advance)  # fmt: skip

    def write(done: FinishedUnits) -> int:
        scores, windows = _load_chunks(done.work, n_chunks)
        numbers = combine_strands(scores, options.strands)
        if isinstance(vcf, VcfAlleles) and kind == "vcf.gz":  # (a table is refused above)
            write_vcf(vcf, numbers["llr"], out)
        else:
            frame = _output_frame(vcf, numbers, windows, statuses)
            if null_plan is not None:  # columns against a null of the same reference
                frame = frame.assign(**calibration_columns(
                    null_plan, model, fabric, vcf.alleles, statuses, numbers["llr"], reference,
                    options, say,
                ))  # fmt: skip
            write_table(frame, out, kind)
        return done.resumed

    resumed = run_units(
        fabric, work, n_chunks, compute, write, resume=request.resume, force=request.force,
        message=say,
        progress=UnitProgress("score-variants", "alleles",
                              lambda c: len(_chunk_rows(c, request.chunk_size, len(vcf.alleles))),
                              progress),
        save=lambda work, chunk, arrays: _save_chunk(work, chunk, *arrays),  # a test wraps it
    )  # fmt: skip
    if resumed is None:  # not global rank 0: rank 0 writes
        return None
    counts = Counter(statuses)
    return ScoreVariantsSummary(
        out=out,
        alleles=len(vcf.alleles),
        records=vcf.records,
        window=window,
        counts={s: counts.get(s, 0) for s in STATUSES},
        notes=_status_notes(vcf, statuses, reference),
        resumed_chunks=resumed,
    )
