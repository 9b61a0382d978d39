"""`goatdna score-variants`: zero-shot log-likelihood ratios of the ALT alleles of a VCF."""

from __future__ import annotations

from pathlib import Path

import typer


def score_variants(
    checkpoint: Path = typer.Option(
        ..., "--checkpoint", "-c", help="A .ckpt written by `goatdna train`."
    ),
    fasta: Path = typer.Option(
        ..., "--fasta", help="Reference FASTA (.fa, .fa.gz or bgzip) the VCF is called against."
    ),
    vcf: Path = typer.Option(..., "--vcf", help="Input VCF (.vcf, .vcf.gz or .bcf)."),
    out: Path = typer.Option(
        ...,
        "--out",
        "-o",
        help="Output: .tsv, .parquet (one row per ALT allele) or .vcf.gz (the input VCF with "
        "INFO/GOATDNA_LLR added; bgzipped and tabix-indexed).",
    ),
    window: int | None = typer.Option(
        None,
        "--window",
        help="W: W // 2 reference bases on each side of the alleles (default: training length).",
    ),
    strands: str = typer.Option(
        "both",
        "--strands",
        help="both: average the forward and reverse-complement LLRs; forward: forward only.",
    ),
    batch_size: int = typer.Option(
        64, "--batch-size", help="Allele pairs (one strand each) per forward pass."
    ),
    chunk_size: int = typer.Option(
        4096, "--chunk-size", help="Alleles per resumable chunk (the unit --resume keeps)."
    ),
    device: str = typer.Option(
        "auto", "--device", help="Accelerator: auto, cpu, cuda (gpu) or mps."
    ),
    devices: str = typer.Option(
        "1", "--devices", help="Devices per node: a count, -1 for all, or ids like 0,1."
    ),
    num_nodes: int = typer.Option(1, "--num-nodes", help="Nodes (Lightning / SLURM / torchrun)."),
    resume: bool = typer.Option(
        False, "--resume", help="Continue an interrupted run with the same inputs and options."
    ),
    cache_dir: Path | None = typer.Option(
        None,
        "--cache-dir",
        help="Where a plain-gzip FASTA is decompressed once (default: OUT's folder/.goatdna-cache).",
    ),
) -> None:
    """Score each ALT allele of a VCF: LL(alt window) - LL(ref window), both strands averaged."""
    from rich.console import Console
    from rich.table import Table

    from goatdna.atomic import check_output_file
    from goatdna.inference.variant_run import ScoreVariantsRequest
    from goatdna.inference.variant_run import score_variants as run
    from goatdna.inference.variants import STATUS_MEANING
    from goatdna.runtime import Runtime

    check_output_file(out, "--out")  # before any work: a file we can write (and its cache)
    runtime = Runtime.from_options(device.replace("gpu", "cuda"), devices, num_nodes)
    request = ScoreVariantsRequest(
        checkpoint=checkpoint,
        fasta=fasta,
        vcf=vcf,
        out=out,
        window=window,
        strands=strands,
        batch_size=batch_size,
        chunk_size=chunk_size,
        resume=resume,
        cache_dir=cache_dir,
    )
    summary = run(request, runtime.fabric())
    if summary is None:  # not global rank 0: rank 0 reports
        return
    console = Console()
    table = Table(
        title=f"{summary.alleles:,} ALT alleles of {summary.records:,} records "
        f"(window {summary.window})"
    )
    for name in ("status", "alleles", "meaning"):
        table.add_column(name, justify="right" if name == "alleles" else "left")
    for status, count in summary.counts.items():
        note = summary.notes.get(status, STATUS_MEANING[status])
        table.add_row(status, f"{count:,}", note)
    console.print(table)
    if summary.resumed_chunks:
        console.print(f"resumed: {summary.resumed_chunks} chunk(s) were already scored")
    console.print(f"wrote {summary.out}" + (" (+ .tbi)" if str(out).endswith(".vcf.gz") else ""))
