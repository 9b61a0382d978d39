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

Methods (each gives ``attributions`` (L, 4) and ``hypothetical`` (L, 4), what TF-MoDISco reads):

* ``ism``: ``f(x with base b at p) - f(x)`` for every position and the 3 other bases (0 at the
  reference base, NaN at an N, as `goatdna mutagenesis` writes it). For ``loglik`` this *is*
  mutagenesis' exact LLR, computed by its own machinery (`mutagenesis.full_scores` with a
  window covering the whole sequence); other targets run the 3L mutants through ``f`` in batches.
  ``hypothetical`` is the matrix centred per position (mean of the 4 bases subtracted).
* ``saliency``: gradient x input (Captum's `Saliency`, signed): ``attributions = x * df/dx``,
  ``hypothetical = df/dx`` centred per position (the gradient's component along the simplex).
* ``integrated-gradients``: Captum's `IntegratedGradients` from a baseline (``zeros``: all N;
  ``uniform``: 0.25 per base) in ``steps`` steps; ``attributions = (x - baseline) * mean
  gradient`` (their sum is ``f(x) - f(baseline)``: completeness), ``hypothetical`` the mean
  gradient centred per position.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from goatdna.errors import GoatDNAError
from goatdna.io.tokens import COMPLEMENT, NUM_BASES, N

if TYPE_CHECKING:  # torch is imported where the model runs, not when this module loads
    import torch

    from goatdna.checkpoint import LoadedTaskModel
    from goatdna.model.transformer import DNADecoder

METHODS = ("ism", "saliency", "integrated-gradients")
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
    steps: int = 64
    batch_size: int = 16
    """Sequences per pass (``ism``: mutants per pass)."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise GoatDNAError(f"--method {self.method!r}: choose one of {', '.join(METHODS)}")
        if self.strands not in STRANDS:
            raise GoatDNAError(f"--strands {self.strands!r}: choose one of {', '.join(STRANDS)}")
        if self.baseline not in BASELINES:
            raise GoatDNAError(
                f"--baseline {self.baseline!r}: choose one of {', '.join(BASELINES)}"
            )
        if self.steps < 1:
            raise GoatDNAError(f"--steps {self.steps}: must be >= 1")
        if self.batch_size < 1:
            raise GoatDNAError(f"--batch-size {self.batch_size}: must be >= 1")


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

    def function(self, strands: str) -> Callable[[torch.Tensor], torch.Tensor]:
        """``f`` itself (``forward``) or the mean of both strands' values (``both``)."""
        if strands == "forward":
            return self.one_strand

        def both(x: torch.Tensor) -> torch.Tensor:
            return 0.5 * (self.one_strand(x) + self.one_strand(reverse_complement_onehot(x)))

        return both


def language_model_target(model: DNADecoder, target: str | None) -> Target:
    """``loglik`` (the default) or ``base:I`` of a pretrained `DNADecoder`."""
    name = target or "loglik"
    if name == "loglik":

        def loglik(x: torch.Tensor) -> torch.Tensor:
            return (_base_log_probs(model, x) * x[:, 1:].float()).sum(dim=(1, 2))

        return Target("loglik", loglik, loglik_of=model, min_length=2)
    if name.startswith("base:") and name[5:].isdigit() and int(name[5:]) >= 2:
        position = int(name[5:]) - 1  # 0-based; needs >= 1 base before it

        def base(x: torch.Tensor) -> torch.Tensor:
            logp = _base_log_probs(model, x[:, : position + 1])  # (B, position, 4)
            return (logp[:, position - 1] * x[:, position].float()).sum(dim=1)

        return Target(name, base, min_length=position + 1)
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

    return Target(LOG_ODDS + name if odds else name, output)


# ---------------------------------------------------------------------------------------------
# methods


def _centred(values: np.ndarray) -> np.ndarray:
    """Subtract each position's mean over the 4 bases (NaN rows stay NaN)."""
    return values - values.mean(axis=-1, keepdims=True)


def ism(target: Target, tokens: np.ndarray, options: AttributeOptions, device: torch.device
        ) -> np.ndarray:  # fmt: skip
    """(L, 4) float64: ``f(mutant) - f(x)`` per position and base (0 at REF, NaN at N)."""
    import torch

    from goatdna.inference.mutagenesis import MutagenesisOptions, combine, full_scores

    if target.loglik_of is not None:  # mutagenesis' exact LLR: a window holding the whole sequence
        scan = MutagenesisOptions(2 * tokens.size + 2, "full", options.strands, options.batch_size)
        values = full_scores(target.loglik_of, tokens, range(tokens.size), scan)
        return combine(values, scan)
    f = target.function(options.strands)
    x = one_hot(tokens)
    mutants = [(p, b) for p in range(tokens.size) if tokens[p] < NUM_BASES
               for b in range(NUM_BASES) if b != tokens[p]]  # fmt: skip
    out = np.full((tokens.size, NUM_BASES), np.nan)
    out[tokens < NUM_BASES] = 0.0
    with torch.inference_mode():
        ref = float(f(torch.from_numpy(x[None]).to(device)).double()[0])
        for start in range(0, len(mutants), options.batch_size):
            part = mutants[start : start + options.batch_size]
            batch = np.repeat(x[None], len(part), axis=0)  # (B, L, 4)
            for i, (p, b) in enumerate(part):
                batch[i, p] = 0.0
                batch[i, p, b] = 1.0
            got = f(torch.from_numpy(batch).to(device)).double().cpu().numpy()
            for (p, b), value in zip(part, got, strict=True):
                out[p, b] = value - ref
    return out


def gradients(target: Target, batch: np.ndarray, options: AttributeOptions, device: torch.device
              ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Saliency or integrated gradients of equal-length one-hots (B, L, 4) ->
    (attributions, hypothetical), each (B, L, 4) float32 (see the module docstring)."""
    import torch
    from captum.attr import IntegratedGradients, Saliency

    f = target.function(options.strands)
    x = torch.from_numpy(batch).to(device).requires_grad_(True)
    if options.method == "saliency":
        grad = Saliency(f).attribute(x, abs=False).detach()  # (B, L, 4)
        contribution = grad * x.detach()
    else:
        base = torch.zeros_like(x) if options.baseline == "zeros" else torch.full_like(x, 0.25)
        grad = (
            IntegratedGradients(f, multiply_by_inputs=False)
            .attribute(x, baselines=base, n_steps=options.steps)
            .detach()
        )  # the path-integrated gradient, (B, L, 4)
        contribution = grad * (x.detach() - base)
    grad_np = grad.float().cpu().numpy()
    return contribution.float().cpu().numpy(), _centred(grad_np).astype(np.float32)


def baseline_of(options: AttributeOptions, length: int) -> np.ndarray:
    """The integrated-gradients baseline one-hot (L, 4) (for completeness checks)."""
    value = 0.0 if options.baseline == "zeros" else 0.25
    return np.full((length, NUM_BASES), value, dtype=np.float32)


def attribute_tokens(
    target: Target,
    token_lists: Sequence[np.ndarray],
    options: AttributeOptions,
    device: torch.device | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(attributions, hypothetical)`` (L_i, 4) float32 per sequence, in input order.

    Gradient methods batch sequences of equal length (``batch_size`` per pass), in a fixed
    order, so a sequence's numbers depend only on the list and the options.
    """
    import torch

    device = device or torch.device("cpu")
    for i, tokens in enumerate(token_lists):
        if tokens.size < target.min_length:
            raise GoatDNAError(
                f"sequence {i + 1}: {tokens.size} base(s); --target {target.name} needs at "
                f"least {target.min_length}"
            )
    results: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(token_lists)
    if options.method == "ism":
        for i, tokens in enumerate(token_lists):
            values = ism(target, tokens, options, device)
            results[i] = (values.astype(np.float32), _centred(values).astype(np.float32))
        return [r for r in results if r is not None]
    by_length: dict[int, list[int]] = {}
    for i, tokens in enumerate(token_lists):
        by_length.setdefault(tokens.size, []).append(i)
    for rows in by_length.values():
        for start in range(0, len(rows), options.batch_size):
            part = rows[start : start + options.batch_size]
            batch = np.stack([one_hot(token_lists[i]) for i in part])
            contribution, hypothetical = gradients(target, batch, options, device)
            for j, i in enumerate(part):
                results[i] = (contribution[j], hypothetical[j])
    return [r for r in results if r is not None]
