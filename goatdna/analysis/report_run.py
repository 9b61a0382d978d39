"""Running `goatdna report`: the options as typed (context lengths, recall distances, devices,
sampling) checked and turned into `ReportOptions`, then `goatdna.analysis.report.build_report`
on the requested number of torch threads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from goatdna.analysis.report import ReportResult
from goatdna.analysis.report_options import ReportOptions


@dataclass(frozen=True)
class ReportRequest:
    """Everything one `report` run needs (the CLI's options): ``context_lengths`` and
    ``recall_distances`` as typed (e.g. ``"256,1024"``; None: the defaults), ``max_eval_tokens``
    the cap (None: the whole split); the rest as `ReportOptions` names them, with its defaults."""

    runs: tuple[Path, ...]
    data: Path
    out: Path
    names: tuple[str, ...] | None = None
    split: str = ReportOptions.split
    context_lengths: str | None = None
    max_eval_tokens: int | None = ReportOptions.max_eval_tokens
    prompts: int = ReportOptions.n_prompts
    num_samples: int = ReportOptions.samples_per_prompt
    temperature: float = ReportOptions.temperature
    top_k: int | None = ReportOptions.top_k
    seed: int = ReportOptions.seed
    prior_layer: int | None = None
    recall_trials: int = ReportOptions.recall_trials
    recall_distances: str | None = None
    accelerator: str = ReportOptions.device
    devices: str = "1"
    threads: int | None = None


def report_from_request(
    request: ReportRequest, log: Callable[[str], None] | None = None
) -> ReportResult:
    """Check the request, then build the report (progress shown; ``log`` hears each stage)."""
    from goatdna.analysis.evaluate import parse_context_lengths
    from goatdna.analysis.generate import SamplingOptions, torch_threads
    from goatdna.analysis.recall import parse_distances
    from goatdna.analysis.report import build_report
    from goatdna.runtime import single_device

    device = single_device(request.accelerator, request.devices)
    text = request.recall_distances
    distances = parse_distances(text, option="--recall-distances") if text else None
    SamplingOptions(
        temperature=request.temperature, top_k=request.top_k, num_samples=request.num_samples
    ).validate()
    text = request.context_lengths
    options = ReportOptions(
        runs=list(request.runs),
        data_dir=request.data,
        out_dir=request.out,
        names=list(request.names) if request.names else None,
        split=request.split,
        context_lengths=parse_context_lengths(text) if text else None,
        max_eval_tokens=request.max_eval_tokens,
        n_prompts=request.prompts,
        samples_per_prompt=request.num_samples,
        temperature=request.temperature,
        top_k=request.top_k,
        seed=request.seed,
        prior_layer=request.prior_layer,
        recall_trials=request.recall_trials,
        recall_distances=distances,
        device=device,
    )
    with torch_threads(request.threads):
        return build_report(options, log=log, progress=True)
