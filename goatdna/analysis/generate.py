"""Sampling continuations of nucleotide prompts with the KV cache.

One prefill call runs the prompt through the model and fills the cache; each further base is one
``forward_cached`` step at its true absolute position. The sampler never emits N (the model
predicts five classes, but N exists only as an input, so class 4 and any padding classes are
masked out).

Determinism: every (prompt, sample) row draws its random numbers from its own stream, seeded by
``(seed, prompt index, sample index)``, and samples by inverse CDF. A row's result therefore does
not depend on how rows are batched or how many samples were requested: sample 0 of prompt 3 is the
same whether you ask for one sample or ten (up to float rounding differences between batch shapes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from goatdna.configfile import COUNT, NON_NEGATIVE, SEED, TOP_K, bounded, check_bounds
from goatdna.errors import GoatDNAError
from goatdna.io.regions import parse_region
from goatdna.io.tokens import BASES, NUM_BASES, TOKEN_MASK, N, encode

if TYPE_CHECKING:
    import torch

    from goatdna.model import DNADecoder

SAMPLED_CLASSES = NUM_BASES  # A C G T: the sampler never emits N
MAX_NEW_TOKENS = 100_000
"""Most bases one sample may add: the KV cache and the per-row random numbers grow with it
(1e9 would allocate tens of GiB). Longer sequences: generate in pieces, feeding each output back
as the next prompt (--prompt-fasta)."""


@dataclass(frozen=True)
class SamplingOptions:
    """How continuations are drawn. temperature 0 means greedy (argmax)."""

    max_new_tokens: int = bounded(200, COUNT)  # and at most MAX_NEW_TOKENS (`validate`)
    temperature: float = bounded(1.0, NON_NEGATIVE)  # 0 = greedy
    top_k: int | None = bounded(None, TOP_K)
    num_samples: int = bounded(1, COUNT)
    seed: int = bounded(0, SEED)
    batch_size: int = bounded(128, COUNT)  # rows (prompt x sample) decoded together

    def validate(self) -> None:
        check_bounds(self, GoatDNAError)
        if self.max_new_tokens > MAX_NEW_TOKENS:
            raise GoatDNAError(
                f"--max-new-tokens {self.max_new_tokens:,} is above the limit of "
                f"{MAX_NEW_TOKENS:,} bases per sample (memory grows with it); generate in pieces, "
                "feeding each output back as the prompt (--prompt-fasta)"
            )


def parse_prompt(text: str, what: str = "prompt") -> np.ndarray:
    """Prompt string -> plain tokens 0..4 (lowercase accepted, IUPAC codes become N).

    Surrounding whitespace is ignored; an empty prompt or any other character is a GoatDNAError.
    """
    stripped = text.strip()
    if not stripped:
        raise GoatDNAError(f"{what} is empty: give at least one nucleotide (A, C, G, T or N)")
    try:
        tokens = encode(stripped)
    except GoatDNAError as err:
        raise GoatDNAError(f"{what}: {err}") from None
    return tokens & TOKEN_MASK


def _row_uniforms(seed: int, prompt_index: int, sample_index: int, steps: int) -> np.ndarray:
    """The uniforms one (prompt, sample) row consumes, one per generated base: (steps,)."""
    return np.random.default_rng([seed, prompt_index, sample_index]).random(steps)


def _pick(
    logits: torch.Tensor, uniforms: torch.Tensor, temperature: float, top_k: int | None
) -> torch.Tensor:
    """Choose one class per row from (B, V) logits among A/C/G/T by inverse CDF on (B,) uniforms."""
    import torch

    scores = logits[:, :SAMPLED_CLASSES].double()  # (B, 4): N and padding classes masked out
    if temperature == 0:
        return scores.argmax(dim=-1)
    scores = scores / temperature
    if top_k is not None and top_k < SAMPLED_CLASSES:
        kth = torch.topk(scores, top_k, dim=-1).values[:, -1:]  # (B, 1)
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = torch.softmax(scores, dim=-1)  # (B, 4)
    cdf = probs.cumsum(dim=-1)  # (B, 4)
    choice = (cdf < uniforms[:, None] * cdf[:, -1:]).sum(dim=-1)
    # Never land on a class with zero probability (u * total can equal a plateau of the CDF).
    choice = choice.clamp(max=SAMPLED_CLASSES - 1)
    zero = probs.gather(1, choice[:, None])[:, 0] == 0
    if zero.any():
        choice[zero] = probs[zero].argmax(dim=-1)
    return choice


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block on ``threads`` torch CPU threads and restore the caller's setting after it.

    ``None`` leaves torch's global setting alone. One thread is the caller's choice for small
    models on a busy CPU, where OpenMP's per-op fork/join costs more than a decoding step of a few
    dozen small matmuls gains (benchmarks/README.md, analysis); nothing here decides it
    behind the caller's back.
    """
    if threads is None:
        yield
        return
    if threads < 1:
        raise GoatDNAError(f"--threads must be >= 1, got {threads}")
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def sample_batch(
    model: DNADecoder,
    prompt_tokens: torch.Tensor,
    uniforms: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    on_step: Callable[[int], None] | None = None,
) -> torch.Tensor:
    """Continue equal-length prompts: (B, P) tokens and (B, T) uniforms -> (B, T) new tokens.

    One prefill ``forward_cached`` over the prompt, then one step per new base; ``on_step(n)``
    is told after the prefill (n = 0) and after every new base (n = 1), for a progress bar.
    """
    import torch

    batch, prompt_len = prompt_tokens.shape
    steps = uniforms.shape[1]
    cache = model.new_cache(batch, prompt_len + steps)
    with torch.inference_mode():
        logits = model.forward_cached(prompt_tokens, cache)[:, -1]  # (B, V)
        if on_step is not None:
            on_step(0)
        out = torch.empty(batch, steps, dtype=torch.long, device=prompt_tokens.device)  # (B, T)
        for t in range(steps):
            nxt = _pick(logits, uniforms[:, t], temperature, top_k)  # (B,)
            out[:, t] = nxt
            if on_step is not None:
                on_step(1)
            if t + 1 < steps:
                logits = model.forward_cached(nxt[:, None], cache)[:, -1]  # (B, V)
    return out


def model_device(model: torch.nn.Module) -> torch.device:
    import torch

    try:
        return next(model.parameters()).device
    except (StopIteration, AttributeError):
        return torch.device("cpu")


def generate_continuations(
    model: DNADecoder,
    prompts: Sequence[str],
    options: SamplingOptions | None = None,
    on_step: Callable[[int], None] | None = None,
    threads: int | None = None,
) -> list[list[str]]:
    """Continue each prompt ``options.num_samples`` times: ``result[i][s]`` is an uppercase string.

    Rows of equal prompt length are decoded together in batches of ``options.batch_size``;
    ``on_step`` follows the decoding (see `sample_batch`). ``threads``: torch CPU threads while
    decoding (`torch_threads`; None keeps torch's setting).
    """
    import torch

    options = options or SamplingOptions()
    options.validate()
    if not prompts:
        raise GoatDNAError("no prompts given")
    parsed = [parse_prompt(p, f"prompt {i + 1}") for i, p in enumerate(prompts)]
    device = model_device(model)
    letters = np.frombuffer(BASES.encode(), dtype=np.uint8)

    rows = [(i, s) for i in range(len(parsed)) for s in range(options.num_samples)]
    by_length: dict[int, list[tuple[int, int]]] = {}
    for row in rows:
        by_length.setdefault(len(parsed[row[0]]), []).append(row)

    results: list[list[str]] = [[""] * options.num_samples for _ in parsed]
    was_training = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    try:
        with torch_threads(threads):
            for group in by_length.values():
                for start in range(0, len(group), options.batch_size):
                    chunk = group[start : start + options.batch_size]
                    prompt_arr = np.stack([parsed[i] for i, _ in chunk]).astype(np.int64)  # (B, P)
                    uniforms = np.stack(
                        [
                            _row_uniforms(options.seed, i, s, options.max_new_tokens)
                            for i, s in chunk
                        ]
                    )  # (B, T)
                    new = sample_batch(
                        model,
                        torch.from_numpy(prompt_arr).to(device),
                        torch.from_numpy(uniforms).to(device),
                        options.temperature,
                        options.top_k,
                        on_step,
                    )
                    new_np = new.cpu().numpy().astype(np.uint8)  # (B, T), values 0..3
                    if (new_np == N).any():  # cannot happen: class N is never sampled
                        raise AssertionError("sampler produced N")
                    for (i, s), toks in zip(chunk, new_np, strict=True):
                        results[i][s] = letters[toks].tobytes().decode("ascii")
    finally:
        if was_training and hasattr(model, "train"):
            model.train()
    return results


def generate(
    model: DNADecoder,
    prompt: str,
    *,
    max_new_tokens: int = 200,
    temperature: float = 1.0,
    top_k: int | None = None,
    num_samples: int = 1,
    seed: int = 0,
    threads: int | None = None,
) -> list[str]:
    """Continue one prompt: ``num_samples`` continuations of ``max_new_tokens`` bases each."""
    options = SamplingOptions(
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        num_samples=num_samples,
        seed=seed,
    )
    return generate_continuations(model, [prompt], options, threads=threads)[0]


def read_prompt_fasta(path: str | Path, region: str | None = None) -> tuple[str, str]:
    """Read a prompt from a FASTA file with the one FASTA reader: (sequence, region label).

    Without ``region`` the file must hold exactly one record, which is used whole. The bases
    come back as written (case and IUPAC codes kept): the prompt is shown in the output.
    """
    from goatdna.io.fasta import default_cache_dir, open_fasta

    path = Path(path)
    if not path.is_file():
        raise GoatDNAError(f"{path}: prompt FASTA not found")
    source = open_fasta(path, default_cache_dir(), lambda _text: None)
    names = [info.name for info in source.contigs]
    if region is None:
        if len(names) != 1:
            raise GoatDNAError(
                f"{path}: holds {len(names)} records; choose one with --region chr:start-end"
            )
        name, first, last = names[0], None, None
    else:
        where = parse_region(region, whole_contig=True)
        if isinstance(where, str):
            name, first, last = where, None, None
        else:
            name, first, last = where.contig, where.start + 1, where.end
    if name not in names:
        raise GoatDNAError(f"{path}: no record named {name!r} (records: {', '.join(names[:5])})")
    info = source.contig(name)
    if first is None or last is None:
        first, last = 1, info.length
    if last > info.length:
        raise GoatDNAError(
            f"--region {region!r}: end {last} is past the end of {name} ({info.length} bases)"
        )
    reader = source.open_reader()
    try:
        seq = reader.read_text(info, first - 1, last)
    finally:
        reader.close()
    return seq, f"{name}:{first}-{last}"
