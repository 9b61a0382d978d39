"""Per-base attributions: which bases of a sequence drive a model's output, three ways.

Every method explains one scalar per sequence, a *target* ``f`` of the sequence's one-hot
encoding ``x`` (L, 4) (A C G T columns; an N is the zero row):

* a fine-tuned model (`goatdna finetune`): ``log p(class | x)`` of one class (the log-softmax
  of the head, so shifting every logit changes nothing), its log-odds ``log p / (1 - p)``
  (``log-odds:CLASS``; for two classes the difference of the logits), or the regression output
  in label units;
* a pretrained language model: the sequence log-likelihood ``LL(x) = sum_t log p(x_t | x_<t)``
  (``loglik``), or the log-probability of one base given the bases before it (``base:I``,
  1-based position ``I``).

The one-hot input reaches the model through its own embedding, affinely::

    embeds = E[N] + x @ (E[A..T] - E[N])          (L, d_model)

so an exact one-hot gives the embedding lookup of its tokens (an N row, the zero row, gives
``E[N]``), and the all-zero baseline is the all-N sequence ("no base known"). The trunk is
`DNADecoder.hidden` (``embeds=``) and log-probabilities come from
`goatdna.model.scoring.target_log_probs`, so a target never has a second definition.

``strands="both"`` (the default) explains ``(f(x) + f(rc(x))) / 2``, where ``rc(x)`` flips both
axes of the one-hot (reversing A C G T gives T G C A, the complement): the strands are averaged
inside the function, so every method, and integrated gradients' completeness, holds for it.
``base:I`` averages *the same base* on both strands, as `goatdna score-track` does (one
function, `goatdna.inference.tracks.combine_strands`): ``log p(x_I | x_<I)`` with the reverse
strand's ``log p(comp(x_I) | the bases after I, reverse-complemented)``; the last base has no
reverse-strand value (nothing follows it) and keeps its forward one.

Methods (each gives ``attributions`` (L, 4) and ``hypothetical`` (L, 4), what TF-MoDISco reads):

* ``ism``: ``f(x with base b at p) - f(x)`` for every position and the 3 other bases (0 at the
  reference base, NaN at an N, as `goatdna mutagenesis` writes it). For ``loglik`` this *is*
  mutagenesis' exact LLR, computed by its own machinery (`mutagenesis.full_scores` with a
  window covering the whole sequence); other targets run the 3L mutants through ``f`` in batches.
  ``hypothetical`` is the matrix centred per position (mean of the 4 bases subtracted).
* ``saliency``: gradient x input (Captum's `Saliency`, signed): ``attributions = x * df/dx``,
  ``hypothetical = df/dx`` centred per position (the gradient's component along the simplex).
* ``integrated-gradients``: from a baseline (``zeros``: all N; ``uniform``: 0.25 per base),
  the path integral of the gradient by Gauss-Legendre quadrature in ``steps`` nodes (the rule
  Captum's `IntegratedGradients` uses by default, computed here in passes of at most
  ``batch_size`` rows, where Captum holds every node of a batch in one pass);
  ``attributions = (x - baseline) * mean gradient``, ``hypothetical`` the mean gradient centred
  per position.

Completeness, measured. The attributions of integrated gradients sum to ``f(x) - f(baseline)``
only in the limit of many steps, and how many depends on the model: on a fine-tuned classifier
64 steps missed by 68% of ``f(x) - f(baseline)`` (24% at 256, 0.4% at 1,024). Every sequence's
gap ``|sum(attributions) - (f(x) - f(baseline))| / |f(x) - f(baseline)|`` is therefore computed
and written with the steps it took; ``steps="auto"`` (the default) starts at 64 and doubles, per
sequence, until the gap is at most ``tolerance`` (default 1%; an absolute gap below
`ABSOLUTE_GAP` also counts, for a sequence whose ``f(x)`` equals ``f(baseline)``) or
`MAX_STEPS` is reached; a fixed ``steps`` is used as given, and any sequence left above the
tolerance is named in one ``warning:`` line.

Bounded passes. Every method runs its rows (sequences, mutants, or sequences x path nodes) in
passes of at most ``batch_size`` rows, fewer where a pass would pass `MEMORY_BOUND_BYTES` by
`row_bytes` (the estimate score-variants bounds its window by); a sequence whose single row
would not fit is refused before any work (`check_lengths`). Progress is reported per position
after each pass, so a stop (SIGTERM, Ctrl-C) is honoured within one pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from goatdna.configfile import COUNT, OPEN_FRACTION, bounded, check_bounds
from goatdna.errors import GoatDNAError
from goatdna.io.tokens import COMPLEMENT, NUM_BASES, N

if TYPE_CHECKING:  # torch is imported where the model runs, not when this module loads
    import torch

    from goatdna.checkpoint import LoadedTaskModel
    from goatdna.model.config import ModelConfig
    from goatdna.model.transformer import DNADecoder

METHODS = ("ism", "saliency", "integrated-gradients")
MAX_STEPS = 2048
"""The most integrated-gradients steps: the Gauss-Legendre nodes cost O(steps^3) to compute
(numpy's `leggauss`: seconds at 1,024, over a minute at 4,096), and 1,024 met 0.4% on the
fine-tuned classifier where 64 missed by 68%."""
AUTO_FIRST_STEPS = 64
ABSOLUTE_GAP = 1e-4
"""A completeness gap this small (in the target's units) counts as met whatever ``f(x) -
f(baseline)`` is (relative gaps of a near-zero difference are noise)."""
BASELINES = ("zeros", "uniform")
STRANDS = ("both", "forward")
LOG_ODDS = "log-odds:"
"""A fine-tuned classifier's target ``log-odds:CLASS``: ``log p / (1 - p)`` of the class. Unlike
``log p``, it does not saturate near p = 1, where a second motif in a sequence the model is
already sure of would barely move ``log p`` and ISM would miss it."""
LM_TARGETS = "loglik, or base:I (log p of base I, 1-based, given the bases before it)"


@dataclass(frozen=True)
class AttributeOptions:
    """How sequences are explained: the method, its target, strands and Captum's settings."""

    method: str = "saliency"
    target: str | None = None
    """Fine-tuned: a class name (default: the last class) or None for regression; language
    model: ``loglik`` (default) or ``base:I``."""
    strands: str = "both"
    baseline: str = "zeros"
    steps: int | str = "auto"
    """Integrated gradients: ``auto`` (double from 64 until complete within ``tolerance``) or a
    fixed count, 1 to `MAX_STEPS` (an integer given as text, as the CLI passes it, is read)."""
    batch_size: int = bounded(16, COUNT)
    """Rows per pass: sequences (saliency), mutants (ism), sequences x path nodes
    (integrated gradients); fewer where a pass would pass the memory bound."""
    tolerance: float = bounded(0.01, OPEN_FRACTION)
    """Integrated gradients: the relative completeness gap ``auto`` aims for and above which a
    sequence is warned about."""

    def __post_init__(self) -> None:
        check_bounds(self, GoatDNAError)
        steps = self.steps
        if isinstance(steps, str) and steps.strip().lstrip("-").isdigit():
            steps = int(steps)
            object.__setattr__(self, "steps", steps)
        if isinstance(steps, str):
            if steps != "auto":
                raise GoatDNAError(f"--steps {steps!r}: give a number of steps, or auto")
        elif not 1 <= steps <= MAX_STEPS:
            raise GoatDNAError(
                f"--steps {steps}: must be 1 to {MAX_STEPS:,} (the quadrature's nodes cost "
                "O(steps^3) to compute); use --steps auto, which doubles until complete"
            )
        if self.method not in METHODS:
            raise GoatDNAError(f"--method {self.method!r}: choose one of {', '.join(METHODS)}")
        if self.strands not in STRANDS:
            raise GoatDNAError(f"--strands {self.strands!r}: choose one of {', '.join(STRANDS)}")
        if self.baseline not in BASELINES:
            raise GoatDNAError(
                f"--baseline {self.baseline!r}: choose one of {', '.join(BASELINES)}"
            )

    @property
    def first_steps(self) -> int:
        """The steps integrated gradients starts with (``auto``: `AUTO_FIRST_STEPS`)."""
        return self.steps if isinstance(self.steps, int) else AUTO_FIRST_STEPS


class Explained(NamedTuple):
    """One sequence's result: (L, 4) ``attributions`` and ``hypothetical`` (float32), and for
    integrated gradients the ``steps`` taken, the relative completeness ``gap`` and ``delta`` =
    ``f(x) - f(baseline)`` (0 and NaN for the other methods)."""

    attributions: np.ndarray
    hypothetical: np.ndarray
    steps: int = 0
    gap: float = float("nan")
    delta: float = float("nan")


def is_complete(gap: float, delta: float, tolerance: float) -> bool:
    """Whether a completeness ``gap`` (relative) meets ``tolerance``, or the absolute gap
    `ABSOLUTE_GAP`."""
    return bool(gap <= tolerance or gap * abs(delta) <= ABSOLUTE_GAP)


def one_hot(tokens: np.ndarray) -> np.ndarray:
    """Plain tokens (L,) (A C G T N = 0..4) -> (L, 4) float32; an N is the zero row."""
    out = np.zeros((tokens.size, NUM_BASES), dtype=np.float32)
    known = tokens < NUM_BASES
    out[np.flatnonzero(known), tokens[known].astype(np.int64)] = 1.0
    return out


_ONEHOT_COMPLEMENT = COMPLEMENT[:NUM_BASES].tolist()  # one-hot channel -> complement's channel


def reverse_complement_onehot(x: torch.Tensor) -> torch.Tensor:
    """(B, L, 4) -> the reverse complement's one-hot: positions reversed, A<->T and C<->G.

    One-hot is a different representation from tokens, so it stays here (torch), but the channel
    map is `goatdna.io.tokens.COMPLEMENT`'s, not a second table.
    """
    return x.flip(1)[..., _ONEHOT_COMPLEMENT]


# ---------------------------------------------------------------------------------------------
# targets: one scalar per sequence, differentiable in the one-hot input


def _embeds(model: DNADecoder, x: torch.Tensor) -> torch.Tensor:
    """One-hot (B, L, 4) -> embeddings (B, L, d_model): ``E[N] + x @ (E[A..T] - E[N])``."""
    weight = model.embed.weight  # (V_padded, d_model)
    return weight[N] + x.to(weight.dtype) @ (weight[:NUM_BASES] - weight[N])


def _base_log_probs(model: DNADecoder, x: torch.Tensor) -> torch.Tensor:
    """log p(b | x_<t+1) for t = 0..L-2 and b in A C G T -> (B, L - 1, 4) float32."""
    import torch

    from goatdna.model.scoring import target_log_probs

    logits = model.logits(model.hidden(None, embeds=_embeds(model, x[:, :-1])))  # (B, L-1, V)
    return torch.stack(
        [
            target_log_probs(logits, torch.full(logits.shape[:2], b, device=logits.device))
            for b in range(NUM_BASES)
        ],
        dim=-1,
    )


@dataclass(frozen=True)
class Target:
    """``f``: one-hot (B, L, 4) -> (B,) for one strand, and its name for the output."""

    name: str
    one_strand: Callable[[torch.Tensor], torch.Tensor]
    loglik_of: DNADecoder | None = None  # set for ``loglik``: mutagenesis' machinery applies
    min_length: int = 1
    config: ModelConfig | None = None
    """The model's shape, for the memory estimate of a pass (None: passes of ``batch_size``)."""
    other_strand: Callable[[torch.Tensor], torch.Tensor] | None = None
    """The same quantity read on the reverse strand, given ``rc(x)``; NaN where that strand has
    no value. None: ``one_strand`` itself (a value of the whole sequence, not of one base)."""

    def function(self, strands: str) -> Callable[[torch.Tensor], torch.Tensor]:
        """``f`` itself (``forward``) or the two strands' values combined (``both``) by
        `combine_strands`, the definition score-track's tracks use."""
        from goatdna.inference.tracks import combine_strands

        if strands == "forward":
            return self.one_strand
        other = self.other_strand or self.one_strand

        def both(x: torch.Tensor) -> torch.Tensor:
            return combine_strands(self.one_strand(x), other(reverse_complement_onehot(x)))

        return both


def language_model_target(model: DNADecoder, target: str | None) -> Target:
    """``loglik`` (the default) or ``base:I`` of a pretrained `DNADecoder`."""
    name = target or "loglik"
    if name == "loglik":

        def loglik(x: torch.Tensor) -> torch.Tensor:
            return (_base_log_probs(model, x) * x[:, 1:].float()).sum(dim=(1, 2))

        return Target("loglik", loglik, loglik_of=model, min_length=2, config=model.config)
    if name.startswith("base:") and name[5:].isdigit() and int(name[5:]) >= 2:
        position = int(name[5:]) - 1  # 0-based; needs >= 1 base before it

        def base_at(x: torch.Tensor, at: int) -> torch.Tensor:
            logp = _base_log_probs(model, x[:, : at + 1])  # (B, at, 4)
            return (logp[:, at - 1] * x[:, at].float()).sum(dim=1)

        def base(x: torch.Tensor) -> torch.Tensor:
            return base_at(x, position)

        def same_base_reverse(rc: torch.Tensor) -> torch.Tensor:
            """The same base on the reverse strand: offset L - 1 - position of ``rc(x)``; the
            last base (offset 0 there) has nothing before it: NaN, no value."""
            import torch

            at = rc.shape[1] - 1 - position
            if at == 0:
                return torch.full(rc.shape[:1], float("nan"), device=rc.device)
            return base_at(rc, at)

        return Target(name, base, min_length=position + 1, config=model.config,
                      other_strand=same_base_reverse)  # fmt: skip
    raise GoatDNAError(
        f"--target {target!r}: a language model explains {LM_TARGETS} (I >= 2: base 1 has "
        "nothing before it)"
    )


def task_model_target(loaded: LoadedTaskModel, target: str | None) -> Target:
    """A class's ``log p(class | x)`` (default: the last class), its log-odds
    (``log-odds:CLASS``), or the regression value."""
    import torch

    classifier = loaded.classifier
    config = classifier.task_config
    odds = False
    if config.classification:
        name = target if target is not None else config.classes[-1]
        if name not in config.classes and name.startswith(LOG_ODDS):
            odds, name = True, name[len(LOG_ODDS) :]
        if name not in config.classes:
            raise GoatDNAError(
                f"--target {target!r}: {loaded.source} predicts the classes "
                f"{', '.join(config.classes)}; choose one (or {LOG_ODDS}CLASS)"
            )
        k = config.classes.index(name)
    elif target not in (None, "value"):
        raise GoatDNAError(
            f"--target {target!r}: {loaded.source} is a regression model; its one output is "
            "explained (omit --target)"
        )
    else:
        name = "value"

    def output(x: torch.Tensor) -> torch.Tensor:
        lengths = torch.full((x.shape[0],), x.shape[1], dtype=torch.long, device=x.device)
        out = classifier.outputs(None, lengths, embeds=_embeds(classifier.model, x)).float()
        if not config.classification:
            return out[:, 0] * config.label_std + config.label_mean
        if odds:  # log p / (1 - p) = z_k - logsumexp of the other logits (no 1 - p rounding)
            others = torch.cat([out[:, :k], out[:, k + 1 :]], dim=1)
            return out[:, k] - others.logsumexp(-1)
        return out.log_softmax(-1)[:, k]

    return Target(LOG_ODDS + name if odds else name, output, config=classifier.model.config)


# ---------------------------------------------------------------------------------------------
# methods


def _centred(values: np.ndarray) -> np.ndarray:
    """Subtract each position's mean over the 4 bases (NaN rows stay NaN)."""
    return values - values.mean(axis=-1, keepdims=True)


Advance = Callable[[int], None]
"""``advance(n)``: ``n`` more positions explained (a progress bar's callback)."""


def _no_progress(_n: int) -> None:
    return None


def row_bytes(config: ModelConfig, length: int, method: str, strands: str) -> int:
    """Estimated float32 bytes one row of ``length`` positions holds in a pass.

    ISM runs the model forward only: `position_bytes` per position (score-variants' estimate:
    KV cache over every layer and one layer's widest activations). The gradient methods keep
    every layer's activations for the backward pass (the residual stream, attention's q, k, v
    and output, SwiGLU's three hidden-width tensors: about ``8 d_model + 3 mlp_hidden`` floats
    per layer and position), for both strands with ``both``. The ``explicit`` attention backend
    also holds (heads, L, L) scores per layer; SDPA's kernels do not.
    """
    from goatdna.inference.memory import position_bytes

    scores = 4 * config.n_heads * length * length if config.attention == "explicit" else 0
    if method == "ism":
        return length * position_bytes(config) + scores
    per_layer = 4 * length * (8 * config.d_model + 3 * config.mlp_hidden) + scores
    return (2 if strands == "both" else 1) * config.n_layers * per_layer


def pass_rows(target: Target, length: int, options: AttributeOptions) -> int:
    """Rows per pass for sequences of ``length``: ``batch_size``, fewer where a pass would pass
    `MEMORY_BOUND_BYTES`; at least one (`check_lengths` refuses a row that does not fit)."""
    from goatdna.inference.memory import MEMORY_BOUND_BYTES

    if target.config is None:
        return options.batch_size
    one = row_bytes(target.config, length, options.method, options.strands)
    return max(1, min(options.batch_size, MEMORY_BOUND_BYTES // max(one, 1)))


def check_lengths(target: Target, lengths: Sequence[int], names: Sequence[str],
                  options: AttributeOptions, what: str) -> None:  # fmt: skip
    """One ``error:`` line, before any work, for a sequence whose single row would not fit
    `MEMORY_BOUND_BYTES` (``what`` names the input flag)."""
    from goatdna.inference.memory import MEMORY_BOUND_BYTES

    if target.config is None or not lengths:
        return
    i = int(np.argmax(lengths))
    need = row_bytes(target.config, lengths[i], options.method, options.strands)
    if need > MEMORY_BOUND_BYTES:
        raise GoatDNAError(
            f"{what}: sequence {names[i]} ({lengths[i]:,} bases) needs about "
            f"{need / 2**30:,.1f} GiB in one pass of --method {options.method}, above the "
            f"{MEMORY_BOUND_BYTES // 2**30} GiB bound (docs/interpretation.md); explain shorter "
            "sequences or regions"
        )


def work_positions(lengths: Sequence[int], options: AttributeOptions) -> int:
    """Positions the model runs over (forward and backward passes counted once each), for the
    estimate printed before a run: ISM 3L mutants of L positions, saliency two passes, integrated
    gradients two per step (``auto``: its first 64; doubling adds to it)."""
    strands = 2 if options.strands == "both" else 1
    if options.method == "ism":
        per = [3 * n * n for n in lengths]
    elif options.method == "saliency":
        per = [2 * n for n in lengths]
    else:
        per = [2 * n * options.first_steps for n in lengths]
    return strands * sum(per)


def ism(target: Target, tokens: np.ndarray, options: AttributeOptions, device: torch.device,
        advance: Advance = _no_progress) -> np.ndarray:  # fmt: skip
    """(L, 4) float64: ``f(mutant) - f(x)`` per position and base (0 at REF, NaN at N), in passes
    of `pass_rows` mutants; ``advance`` is told each position as its mutants finish."""
    import torch

    from goatdna.inference.mutagenesis import MutagenesisOptions, combine, full_scores

    rows = pass_rows(target, tokens.size, options)
    if target.loglik_of is not None:  # mutagenesis' exact LLR: a window holding the whole sequence
        groups = max(1, rows // NUM_BASES)  # mutagenesis' passes hold groups of 4 rows (A C G T)
        scan = MutagenesisOptions(2 * tokens.size + 2, "full", options.strands, groups)
        values = np.empty((tokens.size, 2, NUM_BASES))
        chunk = groups  # positions per call: one pass a strand
        for lo in range(0, tokens.size, chunk):
            hi = min(lo + chunk, tokens.size)
            values[lo:hi] = full_scores(target.loglik_of, tokens, range(lo, hi), scan)
            advance(hi - lo)
        return combine(values, scan)
    f = target.function(options.strands)
    x = one_hot(tokens)
    mutants = [(p, b) for p in range(tokens.size) if tokens[p] < NUM_BASES
               for b in range(NUM_BASES) if b != tokens[p]]  # fmt: skip
    out = np.full((tokens.size, NUM_BASES), np.nan)
    out[tokens < NUM_BASES] = 0.0
    done = 0  # positions whose every mutant is scored
    with torch.inference_mode():
        ref = float(f(torch.from_numpy(x[None]).to(device)).double()[0])
        for start in range(0, len(mutants), rows):
            part = mutants[start : start + rows]
            batch = np.repeat(x[None], len(part), axis=0)  # (B, L, 4)
            for i, (p, b) in enumerate(part):
                batch[i, p] = 0.0
                batch[i, p, b] = 1.0
            got = f(torch.from_numpy(batch).to(device)).double().cpu().numpy()
            for (p, b), value in zip(part, got, strict=True):
                out[p, b] = value - ref
            end = start + len(part)
            now = tokens.size if end == len(mutants) else mutants[end][0]
            advance(now - done)
            done = now
    advance(tokens.size - done)
    return out


@lru_cache(maxsize=16)
def gauss_legendre(steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``alpha`` in (0, 1) and weights summing to 1 of ``steps``-point Gauss-Legendre
    quadrature on [0, 1]: Captum's ``gausslegendre`` rule, computed once per count."""
    nodes, weights = np.polynomial.legendre.leggauss(steps)
    return 0.5 * (nodes + 1.0), 0.5 * weights


def integrated_gradients(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                         base: torch.Tensor, steps: int, rows: int,
                         advance: Advance = _no_progress) -> torch.Tensor:  # fmt: skip
    """The path-averaged gradient (B, L, 4) of ``f`` from ``base`` to ``x`` over ``steps``
    Gauss-Legendre nodes, in passes of at most ``max(rows, B)`` rows (``rows // B`` nodes of
    every sequence); ``advance`` gets the batch's positions in shares as nodes finish."""
    import torch

    alphas, weights = gauss_legendre(steps)
    b, length = x.shape[0], x.shape[1]
    per = max(1, rows // b)
    mean = torch.zeros(x.shape, dtype=torch.float64, device=x.device)
    told = 0
    for lo in range(0, steps, per):
        a = torch.as_tensor(alphas[lo : lo + per], dtype=x.dtype, device=x.device)
        w = torch.as_tensor(weights[lo : lo + per], dtype=torch.float64, device=x.device)
        points = base[None] + a[:, None, None, None] * (x - base)[None]  # (k, B, L, 4)
        points = points.reshape(-1, length, NUM_BASES).requires_grad_(True)
        (grad,) = torch.autograd.grad(f(points).sum(), points)
        mean += (grad.reshape(a.numel(), b, length, NUM_BASES).double()
                 * w[:, None, None, None]).sum(0)  # fmt: skip
        share = b * length * min(lo + per, steps) // steps
        advance(share - told)
        told = share
    return mean


def gradients(target: Target, batch: np.ndarray, options: AttributeOptions, device: torch.device,
              steps: int = 0, advance: Advance = _no_progress
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Saliency or integrated gradients (``steps`` nodes) of equal-length one-hots (B, L, 4) ->
    (attributions, hypothetical) (B, L, 4) float32, and ``f(x) - f(baseline)`` (B,) float64
    (NaN for saliency); see the module docstring."""
    import torch
    from captum.attr import Saliency

    f = target.function(options.strands)
    x = torch.from_numpy(batch).to(device)
    if options.method == "saliency":
        grad = Saliency(f).attribute(x.requires_grad_(True), abs=False).detach()  # (B, L, 4)
        advance(batch.shape[0] * batch.shape[1])
        contribution = grad * x.detach()
        delta = np.full(batch.shape[0], np.nan)
    else:
        base = torch.from_numpy(baseline_of(options, batch.shape[1])).to(device)
        rows = pass_rows(target, batch.shape[1], options)
        grad = integrated_gradients(f, x, base, steps, rows, advance)
        contribution = grad * (x - base).double()
        with torch.inference_mode():
            delta = (f(x).double() - f(base[None]).double()).cpu().numpy()
    grad_np = grad.float().cpu().numpy()
    return contribution.float().cpu().numpy(), _centred(grad_np).astype(np.float32), delta


def baseline_of(options: AttributeOptions, length: int) -> np.ndarray:
    """The integrated-gradients baseline one-hot (L, 4) (for completeness checks)."""
    value = 0.0 if options.baseline == "zeros" else 0.25
    return np.full((length, NUM_BASES), value, dtype=np.float32)


def completeness_gap(attributions: np.ndarray, delta: float) -> float:
    """``|sum(attributions) - delta| / |delta|`` (0 where both are 0, inf where only delta is)."""
    miss = abs(float(attributions.sum(dtype=np.float64)) - delta)
    if delta == 0:
        return 0.0 if miss == 0 else float("inf")
    return miss / abs(delta)


def attribute_tokens(
    target: Target,
    token_lists: Sequence[np.ndarray],
    options: AttributeOptions,
    device: torch.device | None = None,
    advance: Advance = _no_progress,
) -> list[Explained]:
    """One `Explained` per sequence, in input order; ``advance`` counts positions.

    Gradient methods batch sequences of equal length (at most `pass_rows` per pass), in a fixed
    order, so a sequence's numbers depend only on the list and the options. Integrated gradients
    with ``steps="auto"`` redo the sequences still above ``tolerance`` at twice the steps.
    """
    import torch

    device = device or torch.device("cpu")
    for i, tokens in enumerate(token_lists):
        if tokens.size < target.min_length:
            raise GoatDNAError(
                f"sequence {i + 1}: {tokens.size} base(s); --target {target.name} needs at "
                f"least {target.min_length}"
            )
    results: list[Explained | None] = [None] * len(token_lists)
    if options.method == "ism":
        for i, tokens in enumerate(token_lists):
            values = ism(target, tokens, options, device, advance)
            results[i] = Explained(values.astype(np.float32), _centred(values).astype(np.float32))
        return [r for r in results if r is not None]
    by_length: dict[int, list[int]] = {}
    for i, tokens in enumerate(token_lists):
        by_length.setdefault(tokens.size, []).append(i)
    integrated = options.method == "integrated-gradients"
    for length, rows in by_length.items():
        per_pass = pass_rows(target, length, options)
        for start in range(0, len(rows), per_pass):
            part = rows[start : start + per_pass]
            steps, tell = options.first_steps, advance
            while part:
                batch = np.stack([one_hot(token_lists[i]) for i in part])
                contribution, hypothetical, delta = gradients(target, batch, options, device,
                                                              steps, tell)  # fmt: skip
                for j, i in enumerate(part):
                    gap = completeness_gap(contribution[j], float(delta[j])) if integrated else 0.0
                    results[i] = Explained(contribution[j], hypothetical[j], steps if integrated
                                           else 0, gap if integrated else float("nan"),
                                           float(delta[j]))  # fmt: skip
                if not integrated or options.steps != "auto" or 2 * steps > MAX_STEPS:
                    break
                part = [i for i in part if not _met(results[i], options.tolerance)]
                steps, tell = 2 * steps, _no_progress  # the positions were counted once
    return [r for r in results if r is not None]


def _met(result: Explained | None, tolerance: float) -> bool:
    return result is not None and is_complete(result.gap, result.delta, tolerance)
