"""`goatdna check-precision`: is the model's output under a precision and attention kernel the
reference model's?

A DNA model's zero-shot scores can collapse under a lower precision or another attention kernel
with no error raised (a variant effect AUROC of 0.87 can read 0.53 under bf16). The check runs
the same windows and single-nucleotide variants twice:

* the **reference**: the checkpoint's weights in float64 (or float32) on the CPU, attention through
  torch SDPA's math kernel, no autocast;
* the **tested path**: the precision and attention backend a user will run, on their device
  (``bf16-mixed``/``16-mixed``: torch autocast, as Lightning's mixed precision; ``bf16-true``: the
  weights in bf16; ``32-true``: float32, TF32 as torch is set).

and compares, with thresholds stated in the report and the exit status (1 when one is exceeded):

* **NLL difference**: |mean NLL_tested - mean NLL_ref| in nats per base over every scored
  position (`scoring.target_log_probs`, N targets skipped), and the largest per-window one;
* **max log-prob error**: max |log p_tested - log p_ref| over every position and base A/C/G/T
  (log-softmax-normalised logits: a constant shift of a position's logits, which changes no
  probability, is no error; the N class is left out, its probability is not a DNA prediction);
* **variant LLR Spearman**: Spearman's rho between the tested and reference LLRs of SNVs scored
  by `variants.score_alleles` (the `goatdna score-variants` path); judged with >= 5 variants.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from goatdna.configfile import NON_NEGATIVE, Bounds, bounded, check_bounds
from goatdna.data_prep.window_search import (
    longest_n_free_run,
    start_of_rank,
    valid_start_intervals,
)
from goatdna.errors import GoatDNAError
from goatdna.inference.memory import MEMORY_BOUND_BYTES, position_bytes
from goatdna.inference.variants import Allele, VariantOptions, score_alleles

if TYPE_CHECKING:
    import torch

    from goatdna.inference.reference import Reference
    from goatdna.model import DNADecoder, ModelConfig

PRECISIONS = ("32-true", "bf16-mixed", "16-mixed", "bf16-true")
REFERENCE_DTYPES = ("float64", "float32")
MIN_VARIANTS_JUDGED = 5
BASES = "ACGT"


@dataclass(frozen=True)
class Thresholds:
    """What the tested path may differ by before the check fails (the defaults: bf16's own
    rounding, 2^-8 relative, stays well inside them on a trained model; a dropped term or a
    kernel bug does not)."""

    max_nll_diff: float = bounded(0.01, NON_NEGATIVE)
    """nats per base, |mean NLL difference| and the largest per-window one."""
    max_logprob_error: float = bounded(0.5, NON_NEGATIVE)
    """nats, the largest |log p| difference at any position and base."""
    min_spearman: float = bounded(0.95, Bounds(-1, 1))
    """Spearman's rho of variant LLRs (with >= 5 variants)."""

    def __post_init__(self) -> None:
        check_bounds(self, GoatDNAError)


@dataclass
class PrecisionReport:
    """The measurements, the thresholds and the verdict (``failures`` empty: passed)."""

    precision: str
    attention: str
    device: str
    reference: str
    windows: int
    window_length: int
    positions: int
    nll_reference: float
    nll_tested: float
    nll_diff: float
    max_window_nll_diff: float
    max_logprob_error: float
    variants: int
    spearman: float
    max_llr_error: float
    thresholds: Thresholds
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def as_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["passed"] = self.passed
        return out


def check_options(precision: str, reference: str, windows: int, length: int) -> None:
    if precision not in PRECISIONS:
        raise GoatDNAError(f"--precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    if reference not in REFERENCE_DTYPES:
        raise GoatDNAError(f"--reference {reference!r}: choose float64 or float32")
    if windows < 1:
        raise GoatDNAError(f"--windows {windows}: must be >= 1")
    if length < 2:
        raise GoatDNAError(f"--length {length}: must be >= 2 (a base and its prediction)")


def check_attention(attention: str, precision: str, device: str) -> None:
    """Refuse ``--attention flash`` where flash-attn would not run: a check of SDPA would be
    printed as flash's PASS. flash-attn must be importable, and `attention.attend` hands it only
    CUDA fp16/bf16 inputs (``--precision 32-true`` stays float32). ``auto`` is what a run picks,
    so it is checked as it resolves (the report names the kernel that ran)."""
    from goatdna.model.attention import BACKENDS, flash_available

    if attention not in BACKENDS:
        raise GoatDNAError(f"--attention {attention!r}: choose {', '.join(BACKENDS)}")
    if attention != "flash":
        return
    if not flash_available():
        raise GoatDNAError(
            "--attention flash: flash-attn is not installed here, so the check would test torch "
            "SDPA instead; install it (pip install 'goatdna[gpu]' on a CUDA machine) or check "
            "--attention sdpa"
        )
    if not device.startswith("cuda") or precision == "32-true":
        raise GoatDNAError(
            f"--attention flash: flash-attn runs only on CUDA in fp16/bf16, and --precision "
            f"{precision} on {device} would run torch SDPA instead; check on --accelerator cuda "
            "with --precision bf16-mixed, 16-mixed or bf16-true, or check --attention sdpa"
        )


MAX_CHECK_POSITIONS = 2**22
"""Positions (--windows x --length) one check may score: a precision check compares a sample
(the default is 8 windows), and each position runs twice, once in float64."""


def check_size(windows: int, length: int, batch_size: int, config: ModelConfig) -> None:
    """Refuse, before any work, a check whose one pass would not fit `MEMORY_BOUND_BYTES` (the
    bound score-variants keeps for ``--window``, by the same `position_bytes` estimate, doubled
    for the float64 reference; and the (batch, heads, L, L) attention scores the SDPA math
    kernel holds) or whose whole run exceeds `MAX_CHECK_POSITIONS`."""
    gib = MEMORY_BOUND_BYTES // 2**30
    activations = 2 * batch_size * length * position_bytes(config)
    scores = 8 * batch_size * config.n_heads * length * length
    if max(activations, scores) > MEMORY_BOUND_BYTES:
        need = max(activations, scores) / 2**30
        raise GoatDNAError(
            f"--length {length} x --batch-size {batch_size}: one float64 pass would hold about "
            f"{need:,.1f} GiB (attention scores and activations), above the {gib} GiB bound "
            "(docs/variants.md); lower --length or --batch-size"
        )
    if windows * length > MAX_CHECK_POSITIONS:
        raise GoatDNAError(
            f"--windows {windows} x --length {length} = {windows * length:,} positions, above "
            f"the check's {MAX_CHECK_POSITIONS:,}: a precision check compares a sample; lower "
            "--windows (default 8) or --length"
        )


def reference_windows(reference: Reference, n: int, length: int) -> tuple[np.ndarray, list]:
    """``n`` windows of ``length`` bases with no N, evenly spaced over the N-free window starts
    of the FASTA's contigs in order -> tokens (n, length) and their (contig, start) places.

    The spacing counts only starts whose window is N-free (`goatdna.data_prep.window_search`,
    each contig one record), so a contig that opens with a long run of N (chr1's first 10 kb, a
    scaffold's gap) takes no share of the windows; when fewer than ``n`` such starts exist the
    refusal names the --windows or --length that fits."""
    names: list[str] = []  # the contig of each interval of starts
    interval_starts = [np.zeros(0, dtype=np.int64)]
    interval_counts = [np.zeros(0, dtype=np.int64)]
    for name, _ in reference.chrom_sizes():
        tokens = reference.contig_tokens(name)
        starts, counts = valid_start_intervals(tokens, [(0, tokens.size)], length)
        names += [name] * starts.size
        interval_starts.append(starts)
        interval_counts.append(counts)
    starts, counts = np.concatenate(interval_starts), np.concatenate(interval_counts)
    total = int(counts.sum())
    if total < n:
        if total == 0:
            contigs = (reference.contig_tokens(name) for name, _ in reference.chrom_sizes())
            longest = max(longest_n_free_run(tokens, [(0, tokens.size)]) for tokens in contigs)
            advice = (f"lower --length to {longest:,} or less (the longest N-free stretch)"
                      if longest >= 2 else "give a FASTA with A/C/G/T bases")  # fmt: skip
        else:
            advice = f"lower --windows to {total:,} or less, or --length"
        raise GoatDNAError(
            f"{reference.path}: {total:,} N-free window(s) of {length:,} bases, {n:,} asked for "
            f"(--windows); {advice}"
        )
    ranks = np.arange(n, dtype=np.int64) * total // n  # evenly spaced, the first at rank 0
    cum_counts = np.cumsum(counts)
    which = np.searchsorted(cum_counts, ranks, side="right")
    picked = start_of_rank(starts, counts, cum_counts, ranks)
    found: list[np.ndarray] = []
    places: list[tuple[str, int]] = []
    for index, start in zip(which.tolist(), picked.tolist(), strict=True):
        name = names[index]
        found.append(reference.read(reference.contig(name), start, start + length).astype(np.int64))
        places.append((name, start))
    return np.stack(found), places


def window_snvs(places: list[tuple[str, int]], windows: np.ndarray) -> list[Allele]:
    """Every other base at each window's centre: three SNVs per window (1-based VCF places)."""
    alleles: list[Allele] = []
    centre = windows.shape[1] // 2
    for row, ((name, start), tokens) in enumerate(zip(places, windows, strict=True)):
        ref = BASES[int(tokens[centre])]
        pos = start + centre + 1
        for alt in BASES:
            if alt != ref:
                alleles.append(Allele(row, name, pos, f"{name}:{pos}{ref}>{alt}", ref, alt))
    return alleles


def model_copy(model: DNADecoder, attention: str) -> DNADecoder:
    """The same weights in a fresh decoder whose blocks use ``attention``."""
    from goatdna.model import DNADecoder

    copy = DNADecoder(dataclasses.replace(model.config, attention=attention))  # type: ignore[arg-type]
    copy.load_state_dict(model.state_dict())
    return copy.eval()


def precision_context(
    precision: str, device: torch.device
) -> Callable[[], Any]:  # a context-manager factory
    """What a run under ``precision`` wraps its forward passes in (Lightning's choice)."""
    import contextlib

    import torch

    if precision.endswith("-mixed"):
        dtype = torch.bfloat16 if precision.startswith("bf16") else torch.float16
        return lambda: torch.autocast(device.type, dtype=dtype)
    return contextlib.nullcontext


def tested_model(model: DNADecoder, precision: str, attention: str, device: str) -> DNADecoder:
    import torch

    tested = model_copy(model, attention).to(device)
    if precision == "bf16-true":
        tested = tested.to(torch.bfloat16)
    return tested


def _log_probs(model: DNADecoder, windows: np.ndarray, batch: int, context: Callable[[], Any],
               done: Callable[[int], None] = lambda n: None):  # fmt: skip
    """Log-softmax over A/C/G/T of every position, float64 numpy (n, L - 1, 4), and the
    next-base log-probabilities (n, L - 1) (`scoring.target_log_probs`)."""
    import torch

    from goatdna.model.scoring import target_log_probs

    device = model.embed.weight.device
    all_lp, picked = [], []
    with torch.inference_mode():
        for start in range(0, len(windows), batch):
            tokens = torch.from_numpy(windows[start : start + batch]).to(device)
            with context():
                logits = model(tokens[:, :-1])
            logits = logits.double()
            all_lp.append(torch.log_softmax(logits, dim=-1)[..., :4].cpu().numpy())
            picked.append(target_log_probs(logits, tokens[:, 1:]).double().cpu().numpy())
            done(len(tokens))
    return np.concatenate(all_lp), np.concatenate(picked)


def _llrs(model: DNADecoder, alleles: list[Allele], reference: Reference, window: int,
          context: Callable[[], Any]) -> np.ndarray:  # fmt: skip
    import torch

    options = VariantOptions(window=window, strands="forward", batch_size=16)
    with torch.inference_mode(), context():
        scores, _ = score_alleles(model, alleles, ["ok"] * len(alleles), reference, options)
    return scores[:, 1] - scores[:, 0]


def check_precision(
    model: DNADecoder,
    reference: Reference,
    alleles: list[Allele] | None,
    *,
    precision: str,
    attention: str,
    device: str,
    reference_dtype: str = "float64",
    windows: int = 8,
    length: int = 512,
    batch_size: int = 4,
    thresholds: Thresholds | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> PrecisionReport:
    """Measure ``model`` under ``precision``/``attention`` on ``device`` against the CPU
    reference; ``alleles`` None: three SNVs at each window's centre. ``progress(done, total)``
    after each batch of windows (each window is run twice: reference, then tested)."""
    import torch

    from goatdna.metrics import spearman
    from goatdna.model.attention import resolve_backend

    check_options(precision, reference_dtype, windows, length)
    check_attention(attention, precision, device)
    check_size(windows, length, batch_size, model.config)
    limits = thresholds or Thresholds()
    tokens, places = reference_windows(reference, windows, length)
    snvs = window_snvs(places, tokens) if alleles is None else alleles
    ref_model = model_copy(model, "sdpa").to(getattr(torch, reference_dtype))
    tested = tested_model(model, precision, attention, device)
    backend = resolve_backend(attention)
    context = precision_context(precision, torch.device(device))

    passed = 0

    def done(n: int) -> None:
        nonlocal passed
        passed += n
        if progress is not None:
            progress(passed, 2 * len(tokens))

    ref_lp, ref_next = _log_probs(ref_model, tokens, batch_size, _nothing, done)
    test_lp, test_next = _log_probs(tested, tokens, batch_size, context, done)
    counted = tokens[:, 1:] <= 3
    nll_ref = float(-ref_next[counted].mean())
    nll_test = float(-test_next[counted].mean())
    per_window = np.array([abs(float((test_next[i] - ref_next[i])[counted[i]].mean()))
                           for i in range(len(tokens))])  # fmt: skip
    max_lp = float(np.abs(test_lp - ref_lp).max())

    llr_ref = _llrs(ref_model, snvs, reference, length, _nothing) if snvs else np.zeros(0)
    llr_test = _llrs(tested, snvs, reference, length, context) if snvs else np.zeros(0)
    ok = np.isfinite(llr_ref)
    rho = spearman(llr_test[ok], llr_ref[ok])
    llr_error = float(np.abs(llr_test[ok] - llr_ref[ok]).max()) if ok.any() else math.nan

    report = PrecisionReport(
        precision=precision, attention=backend, device=device,
        reference=f"{reference_dtype}, sdpa, cpu", windows=len(tokens), window_length=length,
        positions=int(counted.sum()), nll_reference=nll_ref, nll_tested=nll_test,
        nll_diff=abs(nll_test - nll_ref), max_window_nll_diff=float(per_window.max()),
        max_logprob_error=max_lp, variants=int(ok.sum()), spearman=rho,
        max_llr_error=llr_error, thresholds=limits,
    )  # fmt: skip
    if backend == "flash" and (not device.startswith("cuda") or precision == "32-true"):
        report.notes.append("flash-attn runs only on CUDA in fp16/bf16: these inputs ran SDPA")
    judge(report)
    return report


def _nothing() -> Any:
    import contextlib

    return contextlib.nullcontext()


def judge(report: PrecisionReport) -> None:
    """Fill ``failures`` (and ``notes``) from the measurements and thresholds; NaN fails."""
    t = report.thresholds
    worst_nll = max(report.nll_diff, report.max_window_nll_diff)
    if not worst_nll <= t.max_nll_diff:
        report.failures.append(
            f"NLL difference {worst_nll:.4g} nats/base > {t.max_nll_diff:g} "
            f"(mean {report.nll_diff:.4g}, worst window {report.max_window_nll_diff:.4g})"
        )
    if not report.max_logprob_error <= t.max_logprob_error:
        report.failures.append(
            f"max log-prob error {report.max_logprob_error:.4g} > {t.max_logprob_error:g}"
        )
    if report.variants >= MIN_VARIANTS_JUDGED:
        if not report.spearman >= t.min_spearman:
            report.failures.append(
                f"variant LLR Spearman {report.spearman:.4f} < {t.min_spearman:g} "
                f"({report.variants} SNVs)"
            )
    else:
        report.notes.append(
            f"{report.variants} variant(s) scored: Spearman is judged with >= {MIN_VARIANTS_JUDGED}"
        )


def report_lines(report: PrecisionReport) -> list[str]:
    """The human-readable report: every measurement beside its threshold, then the verdict."""
    t = report.thresholds
    lines = [
        f"tested: {report.precision}, attention {report.attention}, on {report.device}; "
        f"reference: {report.reference}",
        f"{report.windows} window(s) x {report.window_length} bases ({report.positions} "
        f"scored positions), {report.variants} SNV(s)",
        f"NLL nats/base: reference {report.nll_reference:.6f}, tested {report.nll_tested:.6f}",
        f"  |mean difference| {report.nll_diff:.3g}, worst window {report.max_window_nll_diff:.3g}"
        f"   (threshold <= {t.max_nll_diff:g})",
        f"max log-prob error (A/C/G/T) {report.max_logprob_error:.3g}"
        f"   (threshold <= {t.max_logprob_error:g})",
        f"variant LLR Spearman {report.spearman:.4f}, max |LLR error| {report.max_llr_error:.3g}"
        f"   (threshold >= {t.min_spearman:g}, with >= {MIN_VARIANTS_JUDGED} SNVs)",
        *(f"note: {n}" for n in report.notes),
    ]
    if report.passed:
        lines.append("verdict: PASS")
    else:
        lines += [f"verdict: FAIL: {f}" for f in report.failures]
    return lines
