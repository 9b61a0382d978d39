"""Running `goatdna check-precision`: the checks before any work, the model, the SNVs to score
and the JSON report; the measurement itself is `goatdna.inference.precision_check`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from goatdna.configfile import COUNT, bounded, check_bounds
from goatdna.errors import GoatDNAError
from goatdna.inference.precision_check import PrecisionReport, Thresholds
from goatdna.inference.reference import Reference
from goatdna.inference.variants import Allele


@dataclass(frozen=True)
class PrecisionRequest:
    """Everything one `check-precision` run needs (the CLI's options); ``length`` None: the
    training length, ``variants`` None: three SNVs at each window's centre."""

    checkpoint: Path
    fasta: Path
    variants: Path | None = None
    precision: str = "bf16-mixed"
    attention: str = "auto"
    reference: str = "float64"
    windows: int = bounded(8, COUNT)
    length: int | None = None  # at least 2 (`check_options`: a base and its prediction)
    max_variants: int = bounded(64, COUNT)
    thresholds: Thresholds = field(default_factory=Thresholds)
    batch_size: int = bounded(4, COUNT)
    out: Path | None = None
    force: bool = False
    accelerator: str = "auto"
    devices: str = "1"


def check_precision(
    request: PrecisionRequest, progress: Callable[[int, int], None] | None = None
) -> PrecisionReport:
    """Check ``request`` (the output, the options, the memory a window pass needs) before the
    FASTA is read, then measure (`goatdna.inference.precision_check.check_precision`);
    ``progress(done, total)`` after each batch of windows."""
    from goatdna.atomic import check_output_file
    from goatdna.checkpoint import load_checkpoint
    from goatdna.inference.precision_check import check_attention, check_options, check_size
    from goatdna.inference.precision_check import check_precision as measure
    from goatdna.runtime import single_device

    if request.out is not None:
        from goatdna.workdir import claim_output

        check_output_file(request.out, "--out")
        inputs = [request.checkpoint, request.fasta, request.variants]
        claim_output([request.out], request.force, inputs=inputs)
    check_bounds(request, GoatDNAError)
    device = single_device(request.accelerator, request.devices)
    loaded = load_checkpoint(request.checkpoint, "cpu", lm_command="check-precision")
    window = request.length if request.length is not None else loaded.train_length
    check_options(request.precision, request.reference, request.windows, window)
    check_attention(request.attention, request.precision, device)
    check_size(request.windows, window, request.batch_size, loaded.model_config)  # before the FASTA
    with Reference(request.fasta) as ref:
        alleles = None
        if request.variants is not None:
            alleles = read_snvs(request.variants, ref, request.max_variants)
        return measure(
            loaded.model,
            ref,
            alleles,
            precision=request.precision,
            attention=request.attention,
            device=device,
            reference_dtype=request.reference,
            windows=request.windows,
            length=window,
            batch_size=request.batch_size,
            thresholds=request.thresholds,
            progress=progress,
        )


def read_snvs(path: Path, reference: Reference, limit: int) -> list[Allele]:
    """The first ``limit`` SNVs of the VCF or table whose REF matches the FASTA."""
    from goatdna.inference.variant_io import read_variants
    from goatdna.inference.variants import allele_status

    picked = [
        a
        for a in read_variants(path).alleles
        if len(a.ref) == len(a.alt) == 1 and allele_status(a, reference) == "ok"
    ][:limit]
    if not picked:
        raise GoatDNAError(
            f"{path}: no SNV matches the FASTA's bases (check the contig names and build)"
        )
    return picked


def write_report(report: PrecisionReport, path: Path) -> None:
    """The report as JSON at ``path`` (temporary name, then rename)."""
    from goatdna.atomic import atomic_path
    from goatdna.formats import json_text

    with atomic_path(path) as tmp:
        tmp.write_text(json_text(report.as_json()))
