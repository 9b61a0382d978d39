r"""GOAT: attention with a trainable log-prior, packed so one standard SDPA call computes it.

The equations, stated once, with the paper's own equation numbers. Source: Litman & Guo, "You
Need Better Attention Priors" (GOAT, arXiv:2601.15380 v2, ICML 2026), sections 3-4 ("Generalizing
the Attention Prior", "Parameterizing the Prior With Goat"); the code cites the numbers:

    Eqs. (4)-(10)   A_ij = softmax_j( s_ij + K_ij ),   s_ij = <qc_i, kc_j> / sqrt(d_c)
                    attention as one-sided entropic OT with prior pi = exp(K); a uniform prior
                    (K = 0) is standard softmax attention, Eqs. (2)-(3)
    Sec. 4          K_ij = K_rel(i - j) + u_h(j)          relative part + key-only part
    Eqs. (12)-(19)  K_rel(t) = sum_r [ a_r cos(w_r t) + b_r sin(w_r t) ],
                    w_r = base^(-(r-1)/max(R-1, 1)),  base B = 10,000
    Eqs. (21)-(22)  u_h(j) = slope_h * j + g_h(phi(j)) + sink_h * 1{j = 0}
    Eqs. (23)-(24)  q'_i = [ sqrt(d_h/d_c) qc_i,  sqrt(d_h) q_rel(i),  sqrt(d_h),  0 ]
    (Algorithm 1)   k'_j = [ kc_j,                k_rel(j),            u_h(j),     0 ]
                    k_rel(j) = [cos w_r j, sin w_r j]_r
                    q_rel(i) = [a_r cos w_r i + b_r sin w_r i,  a_r sin w_r i - b_r cos w_r i]_r

(The paper's Eqs. (23)-(24) omit the trailing 0 slot; here it carries the low half of ``u`` in
bf16, see below.)

so that ``<q'_i, k'_j> / sqrt(d_h) = s_ij + K_ij`` (the angle-difference identities turn
``q_rel(i) . k_rel(j)`` into ``K_rel(i - j)``), with ``d_h = d_c + d_p`` and ``d_p = 2R + 2``.
``scaled_dot_product_attention(q', k', v)`` with its default scale therefore computes Eqs. (4)-(10) with no
L x L bias in memory, and FlashAttention runs unchanged. ``g_h`` is a one-hidden-layer SiLU MLP per
head on ``phi(j) = [cos w_r j, sin w_r j, j / L_train, log(1+j) / log(1+L_train)]``.

Numerics (why the code is not a one-liner):

* Position features are computed in float64 from integer positions, so ``cos(w_r j)`` stays exact
  far beyond ``train_length``; fixed-frequency features are cached per position range and device.
* In bf16 the key-only term cannot ride in one slot: at ``j = 65536`` with slope 0.5, ``u = 32768``
  where the bf16 spacing is 256. ``u`` is split into ``hi = bf16(u)`` and ``lo = bf16(u - hi)``, and
  ``lo`` takes the alignment slot that Eqs. (23)-(24) leave at 0, with ``sqrt(d_h)`` in both query slots:
  the remaining error is about ``|u| 2^-17``, at no extra cost (``split_key_bias``).
* The constant query slot holds ``dtype(sqrt(d_h))`` and SDPA scales by ``float32(1/sqrt(d_h))``;
  when their product is not exactly 1 (e.g. ``d_h = 32`` or 128 in bf16), ``u`` is divided by that
  product before the split so that the logit is still ``u``.
* The per-head MLP g_h runs in the parameters' dtype (float32) with autocast off; its output is
  small, so only ``slope * j`` needs float64. Its (H, L, M) hidden layer is per head, not per row,
  so training keeps it for backward (recomputing it cost a fifth of the prior's step).
* Nothing here is L x L: per-position terms cost O(H L (R + M)), the packed q'/k' are the same
  size as RoPE's rotated q/k.

The authors' package (``goat.GoatAttention``, goat-attention 0.1.1) parameterises the same
equations differently; its choices are options of `GoatPrior` (``ModelConfig.goat_*``), so that
`goatdna.model.from_goat_attention` maps one of its modules onto this one exactly:
``kv_heads`` (prior terms per key/value head, shared by a group of query heads), ``abs_modes`` /
``abs_freq_base`` (the MLP's features come from their own M frequencies), ``key_mlp='shared'``
(one MLP F -> hidden -> 1 for every head, scaled by a per-head ``gain``), ``slope_fn='softplus'``
(slope_h = softplus(raw_h) >= 0), ``alignment_slot=False`` (d_p = 2R + 1, no lo slot), ``gate=
'query_norm'`` (the prior scaled per query by ``sigmoid(bias_h - softplus(scale_h) |qc_i|)``) and
``features='float32'``: positions, phases and ``slope * j`` in float32 as the package computes them.
In float32 ``w_r j`` carries an error of about ``j w_r 2^-24`` (~1e-3 rad at j = 16,384, w = 1) and
``slope * j`` one of ``|u| 2^-24``: both grow with j, so far beyond the training length the prior of
the float32 features drifts from the exact one (the default float64 features do not).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections import OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

Positions = Tensor | range
"""Absolute token positions: a LongTensor, or a ``range`` (cached features, no device sync)."""

DECODE_BLOCK = 64
"""Positions whose q'/k' position slots a decoding step computes at once (see `_position_tails`)."""

WINDOW_CACHE_ENTRIES = 4
"""Position ranges whose q'/k' position slots one prior keeps for inference (see `WindowTails`)."""

WINDOW_CACHE_MAX_BYTES = 8 << 20
"""What one prior's `WindowTails` may hold (8 MiB: a 125M model's 18 layers at most 144 MiB; one
fp32 entry of 1,024 positions weighs 1.7 MiB there). Larger ranges are computed afresh."""


def goat_frequencies(
    num_modes: int, freq_base: float, device: torch.device | str | None = None
) -> Tensor:
    """``w_r = freq_base^(-(r-1)/max(R-1, 1))`` for r = 1..R, in float64 (Eqs. (12)-(19)), on ``device``.

    Built where it is used: a CPU table copied to the GPU would be a blocking host-to-device copy
    per decoding step, and a CPU ``arange`` inside a compiled graph.
    """
    r = torch.arange(num_modes, dtype=torch.float64, device=device)
    return freq_base ** (-r / max(num_modes - 1, 1))


def alibi_slopes(num_heads: int) -> Tensor:
    """ALiBi's head slopes m_h (Press et al. 2022): 2^(-8h/H), interleaved when H is no power of 2."""

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (h + 1) for h in range(n)]

    if math.log2(num_heads).is_integer():
        slopes = power_of_two(num_heads)
    else:
        closest = 2 ** math.floor(math.log2(num_heads))
        slopes = power_of_two(closest) + power_of_two(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes, dtype=torch.float64)


def _flat(pos: Positions) -> Positions:
    """Per-row positions (B, L) as one (B*L,) run of positions; a range or (L,) as it is."""
    return pos.reshape(-1) if isinstance(pos, Tensor) and pos.dim() == 2 else pos


def _per_row(tail: Tensor, pos: Positions) -> Tensor:
    """A position tail (B*L, H, d_p) computed from `_flat` per-row positions -> (B, L, H, d_p)."""
    if isinstance(pos, Tensor) and pos.dim() == 2:
        return tail.view(*pos.shape, *tail.shape[1:])
    return tail


def _broadcast_rows(tail: Tensor, batch: int) -> Tensor:
    """A position tail (L, H, d_p) shared by the rows, or (B, L, H, d_p), -> (B, L, H, d_p).

    One row gets a view with a leading 1, not ``expand``: expand's backward sums over the new
    dim, a copy of the tail's gradient even when that dim is 1 (two per layer per training step).
    """
    if tail.dim() == 4:
        return tail.expand(batch, *tail.shape[1:])
    if batch == 1:
        return tail.unsqueeze(0)
    return tail.expand(batch, *tail.shape)


def _autocast_off(device: torch.device) -> contextlib.AbstractContextManager:
    """Autocast disabled on ``device``; nothing to disable where autocast does not exist (meta)."""
    if torch.amp.is_autocast_available(device.type):
        return torch.autocast(device_type=device.type, enabled=False)
    return contextlib.nullcontext()


def _as_positions(pos: Positions, device: torch.device) -> Tensor:
    if isinstance(pos, range):
        return torch.arange(pos.start, pos.stop, pos.step, dtype=torch.float64, device=device)
    return pos.to(device=device, dtype=torch.float64)


def _phi(pos64: Tensor, freqs64: Tensor, train_length: int) -> Tensor:
    """phi(j) = [cos w_r j, sin w_r j, j / L_train, log(1+j) / log(1+L_train)] -> (L, 2R + 2).

    Its first 2R columns are k_rel(j) (Eqs. (23)-(24)). Phases in float64: exact for any practical j.
    """
    phase = pos64[:, None] * freqs64[None, :]  # (L, R)
    linear = pos64 / train_length
    logarithmic = torch.log1p(pos64) / math.log1p(train_length)
    return torch.cat(
        [torch.cos(phase), torch.sin(phase), linear[:, None], logarithmic[:, None]], dim=-1
    )


@functools.lru_cache(maxsize=16)
def _cached_features(
    num_modes: int, freq_base: float, train_length: int, pos: range, device: torch.device
) -> tuple[Tensor, Tensor]:
    """(pos (L,), phi (L, 2R+2)) in float64 for a position range, shared by every layer's prior.

    Built outside inference mode: a cache filled under ``torch.inference_mode()`` (evaluation)
    would otherwise hold inference tensors that a later training step cannot save for backward.
    """
    with torch.inference_mode(False), torch.no_grad():
        pos64 = _as_positions(pos, device)
        freqs64 = goat_frequencies(num_modes, freq_base, device)
        return pos64, _phi(pos64, freqs64, train_length)


@functools.lru_cache(maxsize=16)
def _slot_and_gain(head_dim: int, dtype: torch.dtype) -> tuple[float, float]:
    """The constant query slot ``dtype(sqrt(d_h))`` and its product with SDPA's float32 scale."""
    root = math.sqrt(head_dim)
    slot = float(torch.tensor(root, dtype=dtype, device="cpu"))  # also under a meta device
    return slot, slot * float(torch.tensor(1.0 / root, dtype=torch.float32, device="cpu"))


class PriorWeights(NamedTuple):
    """The learned tensors of one prior, or of several stacked along the head axis (`shared_tails`):
    every per-position term is per head, so N layers' priors are one prior of N*H heads."""

    alpha: Tensor  # (H, R)
    beta: Tensor  # (H, R)
    slope: Tensor  # (H,)
    sink: Tensor  # (H,)
    mlp_w1: Tensor  # (H, 2R + 2, M)
    mlp_b1: Tensor  # (H, M)
    mlp_w2: Tensor  # (H, M)
    mlp_b2: Tensor  # (H,)


class WindowTails:
    """The q'/k' position slots of the last few position ranges a prior packed, for inference.

    Inference packs the same ranges again and again with fixed weights (score-track and embed
    windows, evaluate's tiles, score-variants' flanks), and the slots (features, ``u_h(j)``
    through the MLP, the rotation, the hi/lo split) were a tenth of a small model's forward.
    An entry is keyed by the ranges, dtype, device and every parameter's storage and version
    counter (``Tensor._version``, bumped by every in-place write: optimizer steps,
    ``load_state_dict``, ``copy_``), so a changed parameter is never served stale. Entries are
    built outside inference mode (a later no-grad call may still use them) and only consulted
    with autograd off, where nothing needs their graph (`GoatPrior._position_tails`).
    """

    def __init__(
        self, entries: int = WINDOW_CACHE_ENTRIES, max_bytes: int = WINDOW_CACHE_MAX_BYTES
    ) -> None:
        self.entries = entries
        self.max_bytes = max_bytes
        self._tails: OrderedDict[tuple, tuple[Tensor, Tensor]] = OrderedDict()

    def get(self, key: tuple) -> tuple[Tensor, Tensor] | None:
        tails = self._tails.get(key)
        if tails is not None:
            self._tails.move_to_end(key)
        return tails

    @staticmethod
    def _nbytes(tails: tuple[Tensor, Tensor]) -> int:
        return sum(t.numel() * t.element_size() for t in tails)

    def put(self, key: tuple, tails: tuple[Tensor, Tensor]) -> None:
        """Keep ``tails``, dropping the least recently used entries beyond the count and the
        byte budget; an entry larger than the whole budget is not kept."""
        if self._nbytes(tails) > self.max_bytes:
            return
        self._tails[key] = tails
        self._tails.move_to_end(key)
        while len(self._tails) > self.entries or self.nbytes > self.max_bytes:
            self._tails.popitem(last=False)

    @property
    def nbytes(self) -> int:
        return sum(self._nbytes(tails) for tails in self._tails.values())

    def clear(self) -> None:
        self._tails.clear()

    def __len__(self) -> int:
        return len(self._tails)


def _check_options(
    num_modes: int,
    train_length: int,
    mlp_hidden: int,
    init: str,
    num_heads: int,
    kv_heads: int,
    split_key_bias: bool,
    alignment_slot: bool,
    learn_freqs: bool,
    features: str,
    abs_modes: int | None,
    key_mlp: str,
    slope_fn: str,
    gate: str,
) -> None:
    """`GoatPrior`'s arguments, checked (ValueError naming the argument)."""
    if num_modes < 0 or train_length < 1 or mlp_hidden < 1 or (abs_modes or 0) < 0:
        raise ValueError("GOAT needs num_modes >= 0, train_length >= 1 and mlp_hidden >= 1")
    if num_modes == 0 and abs_modes is None:
        raise ValueError("GOAT needs num_modes >= 1 unless abs_modes is set")
    if init not in ("zero", "alibi", "seeded", "uniform"):
        raise ValueError(f"GOAT init must be zero, alibi, seeded or uniform, got {init!r}")
    if kv_heads < 1 or num_heads % kv_heads:
        raise ValueError(f"kv_heads ({kv_heads}) must divide num_heads ({num_heads})")
    if split_key_bias and not alignment_slot:
        raise ValueError("split_key_bias needs the alignment slot (alignment_slot=True)")
    if learn_freqs and (features != "float64" or abs_modes is not None):
        raise ValueError("learn_freqs needs float64 features and no separate abs_modes")
    for name, value, allowed in (
        ("key_mlp", key_mlp, ("per_head", "shared", "none")),
        ("slope_fn", slope_fn, ("linear", "softplus")),
        ("features", features, ("float64", "float32")),
        ("gate", gate, ("none", "query_norm")),
    ):
        if value not in allowed:
            raise ValueError(f"GOAT {name} must be one of {', '.join(allowed)}, got {value!r}")


class SharedKeyMLP(nn.Module):
    """goat-attention's key-bias MLP: one for every head, phi (L, F) -> (L,), F -> hidden -> 1
    with SiLU (its ``_SmallMLP``; the same parameter names, ``fc1``/``fc2``)."""

    def __init__(self, features: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.fc2 = nn.Linear(hidden, 1)

    def forward(self, phi: Tensor) -> Tensor:
        return self.fc2(F.silu(self.fc1(phi))).squeeze(-1)


class GoatPrior(nn.Module):
    """One layer's GOAT log-prior ``K_ij = K_rel(i-j) + u_h(j)`` for ``num_heads`` heads.

    ``pack`` is what the model runs (Eqs. (23)-(24): one SDPA call); ``log_prior`` materialises the
    ``(H, Lq, Lk)`` prior for the explicit reference backend, tests and plots.
    """

    def __init__(  # noqa: PLR0915 (one attribute per option: goatdna's and goat-attention's)
        self,
        num_heads: int,
        head_dim: int,
        num_modes: int,
        train_length: int,
        freq_base: float = 10000.0,
        *,
        learn_freqs: bool = False,
        mlp_hidden: int | None = 32,
        init: str = "zero",
        split_key_bias: bool = True,
        alignment_slot: bool = True,
        kv_heads: int | None = None,
        abs_modes: int | None = None,
        abs_freq_base: float | None = None,
        key_mlp: str = "per_head",
        slope_fn: str = "linear",
        features: str = "float64",
        gate: str = "none",
        directional: bool = True,
        sink: bool = True,
        gate_vectors: bool = False,
    ) -> None:
        super().__init__()
        position_dim = 2 * num_modes + 1 + int(alignment_slot)
        content_dim = head_dim - position_dim
        if content_dim <= 0:
            raise ValueError(
                f"GOAT content_dim = head_dim - position_dim = {head_dim} - {position_dim} "
                f"= {content_dim} must be > 0: lower num_modes or raise the head dim"
            )
        kv_heads = num_heads if kv_heads is None else kv_heads
        self.abs_modes = abs_modes  # None: phi's Fourier part is k_rel (goatdna's own prior)
        n_features = 2 * (num_modes if abs_modes is None else abs_modes) + 2
        if mlp_hidden is None:  # goat-attention's _SmallMLP: min(in * 2, max(out * 2, 4))
            mlp_hidden = min(2 * n_features, 4)
        _check_options(
            num_modes, train_length, mlp_hidden, init, num_heads, kv_heads, split_key_bias,
            alignment_slot, learn_freqs, features, abs_modes, key_mlp, slope_fn, gate,
        )  # fmt: skip
        self.kv_heads = kv_heads
        self.abs_freq_base = float(freq_base if abs_freq_base is None else abs_freq_base)
        self.key_mlp_kind = key_mlp
        self.slope_fn = slope_fn
        self.features = features
        self.gate_kind = gate
        self.alignment_slot = alignment_slot
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.num_modes = num_modes
        self.content_dim = content_dim
        self.position_dim = position_dim
        self.train_length = train_length
        self.freq_base = float(freq_base)
        self.split_key_bias = split_key_bias
        self._decode_block: tuple | None = None  # (key, q tail, k tail) of the current block
        self._window_tails = WindowTails()  # recent (pos_q, pos_k) ranges' slots, inference only
        # precomputed so that pack() stays free of host syncs (torch.compile traces it whole)
        self._slot_gain = {
            dt: _slot_and_gain(head_dim, dt)
            for dt in (torch.float64, torch.float32, torch.float16, torch.bfloat16)
        }

        H, R, M = kv_heads, num_modes, mlp_hidden  # the prior's terms are per key/value head
        # Ablations (docs/ablations.md): a removed term is a zero buffer, not a parameter; not
        # persistent (absent from the state dict), never trained, and every code path (the packed
        # tails, `shared_tails`' stacking, `log_prior`) reads the same zeros it would read from a
        # zeroed parameter, so the switch removes exactly that term.
        self.directional = directional
        self.has_sink = sink
        self.alpha = nn.Parameter(torch.zeros(H, R))  # a_r per head (Eqs. (12)-(19))
        self._param_or_zeros("beta", (H, R), directional)  # b_r per head (Eqs. (12)-(19))
        self.slope = nn.Parameter(torch.zeros(H))  # linear key term (Eqs. (21)-(22))
        self._param_or_zeros("sink", (H,), sink)  # bump on the first token (Eqs. (21)-(22))
        freqs = goat_frequencies(num_modes, self.freq_base).float()  # (R,)
        if learn_freqs:
            self.freqs = nn.Parameter(freqs)
        else:
            self.register_buffer("freqs", freqs, persistent=False)
        # g_h: one-hidden-layer SiLU MLP per head, phi(j) (2R + 2) -> M -> 1 (Eqs. (21)-(22))
        self.key_mlp: SharedKeyMLP | None = None
        if key_mlp == "per_head":
            self.mlp_w1 = nn.Parameter(torch.randn(H, n_features, M) / math.sqrt(n_features))
            self.mlp_b1 = nn.Parameter(torch.zeros(H, M))
            self.mlp_w2 = nn.Parameter(torch.zeros(H, M))  # zero output layer: g == 0 at init
            self.mlp_b2 = nn.Parameter(torch.zeros(H))
        elif key_mlp == "none":  # ablation: g_h == 0, the MLP's tensors zero buffers
            for name, shape in (
                ("mlp_w1", (H, n_features, M)), ("mlp_b1", (H, M)),
                ("mlp_w2", (H, M)), ("mlp_b2", (H,)),
            ):  # fmt: skip
                self._param_or_zeros(name, shape, False)
        else:  # goat-attention: one MLP for every head, u_h = gain_h g(phi) (+ slope, sink)
            for name in ("mlp_w1", "mlp_b1", "mlp_w2", "mlp_b2"):
                self.register_parameter(name, None)
            self.key_mlp = SharedKeyMLP(n_features, M)
            self.gain = nn.Parameter(torch.ones(H))
        # per query head, as goat-attention's prior_gate_*; ``gate_vectors`` keeps them with the
        # gate off, as the package does (goat_qk_layout 'authors'): unused, so never a gradient
        if gate == "query_norm" or gate_vectors:
            self.gate_scale = nn.Parameter(torch.full((num_heads,), -10.0))
            self.gate_bias = nn.Parameter(torch.full((num_heads,), 10.0))
        self._init(init)

    def _param_or_zeros(self, name: str, shape: tuple[int, ...], learned: bool) -> None:
        """A zero-initialised parameter ``name``, or (an ablated term) a non-persistent zero buffer."""
        if learned:
            self.register_parameter(name, nn.Parameter(torch.zeros(shape)))
        else:
            self.register_buffer(name, torch.zeros(shape), persistent=False)

    def removed_terms(self) -> tuple[str, ...]:
        """The ablated terms' tensors (zero buffers, not parameters), by name."""
        learned = dict(self.named_parameters(recurse=False))
        return tuple(
            n for n in PriorWeights._fields if n not in learned and getattr(self, n) is not None
        )

    @torch.no_grad()
    def _init(self, init: str) -> None:
        """Set the parameters `initial_values` gives (the others keep their construction values:
        zeros, gain 1, the gate at -10/10, goatdna's per-head MLP input layer)."""
        for name, value in self.initial_values(init).items():
            self.get_parameter(name).copy_(value)

    def initial_values(self, init: str) -> dict[str, Tensor]:
        """What ``init`` sets besides the construction values, by parameter name (on the CPU).

        ``zero``: nothing (exactly standard attention); ``alibi``: ALiBi's slopes; ``seeded`` and
        ``uniform``: goat-attention's two inits (normal(0, 1e-2) cosine weights and ALiBi slopes,
        or a neutral prior; the MLP's layers normal(0, 1e-3), the output layer zero for uniform).
        With ``slope_fn='softplus'`` the raw slope is softplus^-1 of the slope (-30 for uniform)."""
        H, R = self.kv_heads, self.num_modes
        softplus = self.slope_fn == "softplus"
        out: dict[str, Tensor] = {}
        if init in ("alibi", "seeded"):
            # ALiBi adds -m (i - j) = m j - m i: slope +m on the key position plus a per-query
            # constant that softmax ignores.
            slopes = alibi_slopes(H).float()
            # softplus^-1(m) = log(expm1(m)), in float32 as goat-attention computes it
            out["slope"] = torch.log(torch.expm1(slopes)) if softplus else slopes
        elif softplus:
            out["slope"] = torch.full((H,), -30.0 if init == "uniform" else 0.0)
        if init in ("seeded", "uniform"):
            if init == "seeded":
                out["alpha"] = 1e-2 * torch.randn(H, R)
            if self.key_mlp_kind == "none":
                return out
            if self.key_mlp is None:
                first, last = "mlp_w1", "mlp_w2"
            else:
                first, last = "key_mlp.fc1.weight", "key_mlp.fc2.weight"
                out["key_mlp.fc1.bias"] = torch.zeros_like(self.key_mlp.fc1.bias, device="cpu")
                out["key_mlp.fc2.bias"] = torch.zeros_like(self.key_mlp.fc2.bias, device="cpu")
            out[first] = 1e-3 * torch.randn(self.get_parameter(first).shape)
            out[last] = (
                1e-3 * torch.randn(self.get_parameter(last).shape)
                if init == "seeded"
                else torch.zeros(self.get_parameter(last).shape)
            )
        return out

    # ---------------------------------------------------------------- per-position terms
    def _features(
        self, pos: Positions, device: torch.device | None = None
    ) -> tuple[Tensor, Tensor]:
        """float64 (pos (L,), phi (L, 2R+2)) on ``device`` (the inputs' device; default: the
        parameters'); cached per range and device for fixed freqs."""
        device = self.alpha.device if device is None else device
        if self.features != "float64" or self.abs_modes is not None:
            return self._fourier_features(pos, device, absolute=True)
        if isinstance(pos, range) and not isinstance(self.freqs, nn.Parameter):
            # under torch.compile the features are traced into the graph (constants there)
            features = (
                _cached_features.__wrapped__ if torch.compiler.is_compiling() else _cached_features
            )
            return features(self.num_modes, self.freq_base, self.train_length, pos, device)
        pos64 = _as_positions(pos, device)
        if isinstance(self.freqs, nn.Parameter):
            freqs64 = self.freqs.double()  # learnable: recomputed, gradients flow to freqs
        else:
            freqs64 = goat_frequencies(self.num_modes, self.freq_base, device)
        return pos64, _phi(pos64, freqs64, self.train_length)

    def _fourier_features(
        self, pos: Positions, device: torch.device, *, absolute: bool
    ) -> tuple[Tensor, Tensor]:
        """(t (L,), features) in ``self.features``'s dtype: with ``absolute``, the MLP's phi
        [cos v_m j, sin v_m j, j / L_train, log(1+j) / log(1+L_train)] over its own M modes
        (L, 2M + 2); else k_rel(j) = [cos w_r j, sin w_r j] (L, 2R).

        In float32 every step is goat-attention's own (float32 frequencies, positions, phases), so
        both compute the same bits; float64 is goatdna's exact version."""
        modes = (
            (self.num_modes if self.abs_modes is None else self.abs_modes)
            if absolute
            else self.num_modes
        )
        base = self.abs_freq_base if absolute else self.freq_base
        if self.features == "float64":
            t = _as_positions(pos, device)
            freqs = goat_frequencies(modes, base, device)
        else:
            t = _as_positions(pos, device).float()
            r = torch.arange(modes, dtype=torch.float32, device=device)
            freqs = base ** (-r / max(modes - 1, 1))
        phase = t[:, None] * freqs[None, :]
        fourier = torch.cat([torch.cos(phase), torch.sin(phase)], dim=-1)
        if not absolute:
            return t, fourier
        length = float(self.train_length)
        linear = t / length
        logarithmic = torch.log1p(t) / math.log1p(length)
        return t, torch.cat([fourier, linear[:, None], logarithmic[:, None]], dim=-1)

    def weights(self) -> PriorWeights:
        return PriorWeights(*(getattr(self, name) for name in PriorWeights._fields))

    @staticmethod
    def _mlp(phi: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> Tensor:
        """g_h(phi) for every head: phi (L, F) -> (H, L); the first bias rides in the matmul."""
        H, L = w1.shape[0], phi.shape[0]
        pre = torch.baddbmm(b1[:, None, :], phi.expand(H, *phi.shape), w1)  # (H, L, M)
        return torch.baddbmm(b2[:, None, None], F.silu(pre), w2[:, :, None]).view(H, L)

    def _key_bias64(
        self,
        pos: Positions,
        device: torch.device | None = None,
        weights: PriorWeights | None = None,
    ) -> Tensor:
        """u_h(j) = slope_h j + g_h(phi(j)) + sink_h 1{j=0} (Eqs. (21)-(22)) -> (H, L) float64
        (H: the kv heads; goat-attention's options take `_key_bias_authors`, float32 features
        give float32).

        ``slope * j`` (the large term) is formed in float64; the MLP runs in the parameters' dtype
        with autocast off (its output is small, so float32 is exact enough and cheap).
        """
        w = self.weights() if weights is None else weights
        if self._authors_key_bias():
            return self._key_bias_authors(pos, device, w)
        pos64, phi = self._features(pos, device)
        mlp = (w.mlp_w1, w.mlp_b1, w.mlp_w2, w.mlp_b2)
        with _autocast_off(pos64.device):
            # the (H, L, M) hidden layer is kept for backward, not recomputed: it is per head,
            # not per row (at 125M, 12 heads x 2,048 positions x 32: 3 MiB a layer, against
            # ~100 MiB of a layer's activations at batch 8), and recomputing it was a fifth of
            # the prior's cost per training step (benchmarks/peer_bench.py)
            g = self._mlp(phi.to(w.mlp_w1.dtype), *mlp)
        first = (pos64 == 0).double()  # (L,)
        return w.slope.double()[:, None] * pos64 + g.double() + w.sink.double()[:, None] * first

    def _authors_key_bias(self) -> bool:
        """Whether u_h(j) takes goat-attention's path (any of its key-bias options is on)."""
        return (
            self.key_mlp is not None
            or self.slope_fn != "linear"
            or self.features != "float64"
            or self.abs_modes is not None
        )

    def _key_bias_authors(
        self, pos: Positions, device: torch.device | None, w: PriorWeights
    ) -> Tensor:
        """u_h(j) with goat-attention's options -> (kv_heads, L), float64 or float32 (``features``).

        The terms in goat-attention's order: ``gain_h g(phi(j)) + sink_h 1{j=0}``, then
        ``+ slope_h j`` (``softplus`` of the raw slope with ``slope_fn='softplus'``); g shared by
        the heads (``key_mlp='shared'``) or per head. In float32 the rounding is theirs too."""
        device = self.alpha.device if device is None else device
        t, phi = self._features(pos, device)
        with _autocast_off(t.device):
            if self.key_mlp is not None:
                g = self.key_mlp(phi.to(self.key_mlp.fc1.weight.dtype))  # (L,)
                g = self.gain[:, None] * g[None, :]  # (H, L)
            else:
                g = self._mlp(phi.to(w.mlp_w1.dtype), w.mlp_w1, w.mlp_b1, w.mlp_w2, w.mlp_b2)
        slope = F.softplus(w.slope) if self.slope_fn == "softplus" else w.slope
        first = (t == 0).to(t.dtype)
        u = g.to(t.dtype) + w.sink.to(t.dtype)[:, None] * first[None, :]
        return u + slope.to(t.dtype)[:, None] * t[None, :]

    def _k_rel(
        self, pos: Positions, dtype: torch.dtype, device: torch.device | None = None
    ) -> Tensor:
        """k_rel(j) = [cos w_r j, sin w_r j] (Eqs. (23)-(24)) -> (L, 2R), float64 rounded once
        to dtype."""
        if self.features != "float64" or self.abs_modes is not None:
            device = self.alpha.device if device is None else device
            return self._fourier_features(pos, device, absolute=False)[1].to(dtype)
        return self._features(pos, device)[1][:, : 2 * self.num_modes].to(dtype)

    def _per_query_head(self, x: Tensor) -> Tensor:
        """A per-kv-head tensor (kv_heads, ...) -> (num_heads, ...): each query head reads its
        group's key/value head (goat-attention's ``repeat_interleave``)."""
        group = self.num_heads // self.kv_heads
        return x if group == 1 else x.repeat_interleave(group, dim=0)

    def gate(self, q_c: Tensor) -> Tensor | None:
        """goat-attention's ``query_norm`` prior gate ``sigmoid(bias_h - softplus(scale_h) |qc_i|)``
        -> (B, H, Lq) in q_c's dtype (the prior of query i is scaled by it); None without a gate."""
        if self.gate_kind == "none":
            return None
        norm = q_c.float().pow(2).sum(dim=-1).sqrt()  # (B, H, Lq), the raw content query's
        scale = F.softplus(self.gate_scale).view(1, -1, 1)
        return torch.sigmoid(self.gate_bias.view(1, -1, 1) - scale * norm).to(q_c.dtype)

    def _rotation(self, weights: PriorWeights | None = None) -> Tensor:
        """W_h (H, 2R, 2R) with q_rel(i) = k_rel(i) W_h, i.e. [c, s] W = [a c + b s, a s - b c]
        (Eqs. (23)-(24)).

        One small matmul replaces four broadcast products over (H, L, R) and their backward sums.
        """
        w = self.weights() if weights is None else weights
        a = torch.diag_embed(w.alpha)  # (H, R, R)
        b = torch.diag_embed(w.beta)
        return torch.cat([torch.cat([a, -b], dim=-1), torch.cat([b, a], dim=-1)], dim=-2)

    def key_bias(self, pos: Positions) -> Tensor:
        """u_h(j) (Eqs. (21)-(22)) -> (num_heads, L) in the parameters' dtype."""
        return self._per_query_head(self._key_bias64(pos).to(self.alpha.dtype))

    def log_prior(self, pos_q: Positions, pos_k: Positions) -> Tensor:
        """K_ij = K_rel(i - j) + u_h(j) (Sec. 4; Eqs. (12)-(22)) -> (num_heads, Lq, Lk), materialised.

        Without the query-norm gate (`gate`), which scales query i's row by its own factor."""
        dtype = self.alpha.dtype
        with _autocast_off(self.alpha.device):
            rotation = self._per_query_head(self._rotation())
            q_rel = torch.matmul(self._k_rel(pos_q, dtype), rotation)  # (H, Lq, 2R)
            rel = torch.matmul(q_rel, self._k_rel(pos_k, dtype).t())  # (H, Lq, Lk)
        return rel + self.key_bias(pos_k)[:, None, :]

    # ---------------------------------------------------------------- Eqs. (23)-(24)
    def pack(
        self,
        q_c: Tensor,
        k_c: Tensor,
        pos_q: Positions,
        pos_k: Positions,
        tails: tuple[Tensor, Tensor] | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Content queries/keys (B, H, L, d_c) -> packed q', k' (B, H, L, d_h) for one SDPA call.

        ``sdpa(q', k', v)`` with the default scale ``1/sqrt(d_h)`` equals
        ``softmax(q_c k_c^T / sqrt(d_c) + log_prior(pos_q, pos_k)) v``. Works in the inputs' dtype
        and on the inputs' device (position tables are built there, never copied from the host);
        phases, ``slope * j`` and the hi/lo split of ``u`` are float64, each rounded once.

        q', k' are laid out in memory as (B, L, H, d_h), the projection's layout, and returned as
        transposed (B, H, L, d_h) views, like RoPE's rotated q/k: flash-attn reads them without a
        copy and SDPA's kernels find the layout they want.

        ``pos_q``/``pos_k`` may be per-row positions (B, L) (a padded batch whose rows start at
        different columns): each row's slots are then those of its own absolute positions.

        ``tails``: this layer's entry of `shared_tails` for ``(pos_q, pos_k)``, computed for every
        layer at once (training); used when its dtype and device are the inputs'.
        """
        B, H, Lq, dc = q_c.shape
        if tails is None or tails[0].dtype != q_c.dtype or tails[0].device != q_c.device:
            tails = self._position_tails(
                _flat(pos_q), _flat(pos_k), q_c.dtype, q_c.device
            )  # (Lq, H, d_p), (Lk, H, d_p); a row per position of every row for per-row positions
        q_tail, k_tail = _per_row(tails[0], pos_q), _per_row(tails[1], pos_k)  # (B?, L, H, d_p)
        q_slots = _broadcast_rows(q_tail, B)  # (B, Lq, H, d_p)
        gate = self.gate(q_c)  # (B, H, Lq): scales the whole prior of query i
        if gate is not None:
            q_slots = q_slots * gate.transpose(1, 2)[..., None]
        q = torch.cat(
            [
                q_c.transpose(1, 2) * math.sqrt(self.head_dim / dc),  # (B, Lq, H, d_c)
                q_slots,  # (B, Lq, H, d_p)
            ],
            dim=-1,
        )  # (B, Lq, H, d_h)
        k = torch.cat(
            [
                k_c.transpose(1, 2),  # (B, Lk, H, d_c)
                _broadcast_rows(k_tail, B),  # (B, Lk, H, d_p)
            ],
            dim=-1,
        )  # (B, Lk, H, d_h)
        return q.transpose(1, 2), k.transpose(1, 2)  # (B, H, L, d_h) views

    def _position_tails(
        self, pos_q: Positions, pos_k: Positions, dtype: torch.dtype, device: torch.device
    ) -> tuple[Tensor, Tensor]:
        """The position slots of q' and k' (Eqs. (23)-(24)): (Lq, H, 2R+2) and (Lk, H, 2R+2) in ``dtype``.

        With autograd off (inference), they are not rebuilt for every call: a decoding step (one
        position) reads them from a block of `DECODE_BLOCK` positions computed at once, any other
        pair of ranges from `WindowTails`, both kept until a parameter changes. So a cached step
        costs about what RoPE's does instead of rebuilding features, the MLP and the rotation
        for every token and layer, and a window scored again costs only the concatenations.
        With autograd on (training) everything is computed afresh, so gradients reach the prior.
        """
        if not (
            isinstance(pos_q, range)
            and isinstance(pos_k, range)
            and not torch.is_grad_enabled()
            and not torch.compiler.is_compiling()
            and not isinstance(self.freqs, nn.Parameter)
        ):
            return self._compute_tails(pos_q, pos_k, dtype, device)
        # every parameter, the shared MLP's included: a changed one is never served stale
        version = tuple((p.data_ptr(), p._version) for p in self.parameters())
        if pos_q == pos_k and len(pos_q) == 1:
            first = pos_q.start - pos_q.start % DECODE_BLOCK
            key = (first, dtype, device, *version)
            if self._decode_block is None or self._decode_block[0] != key:
                block = range(first, first + DECODE_BLOCK)
                self._decode_block = (
                    key,
                    *self._tails_outside_inference(block, block, dtype, device),
                )
            row = pos_q.start - first
            _, q_tail, k_tail = self._decode_block
            return q_tail[row : row + 1], k_tail[row : row + 1]
        key = (pos_q, pos_k, dtype, device, *version)
        tails = self._window_tails.get(key)
        if tails is None:
            tails = self._tails_outside_inference(pos_q, pos_k, dtype, device)
            self._window_tails.put(key, tails)
        return tails

    def _tails_outside_inference(
        self, pos_q: range, pos_k: range, dtype: torch.dtype, device: torch.device
    ) -> tuple[Tensor, Tensor]:
        """`_compute_tails` as normal tensors: one built under ``torch.inference_mode()`` could
        not be used by a later no-grad call outside it (e.g. validation during training)."""
        with torch.inference_mode(False), torch.no_grad():
            return self._compute_tails(pos_q, pos_k, dtype, device)

    def _compute_tails(
        self,
        pos_q: Positions,
        pos_k: Positions,
        dtype: torch.dtype,
        device: torch.device,
        weights: PriorWeights | None = None,
    ) -> tuple[Tensor, Tensor]:
        """q' tail [sqrt(d_h) q_rel(i), sqrt(d_h), sqrt(d_h) or 0] and k' tail [k_rel(j), hi(u),
        lo(u)], where u / gain makes slot * scale * (hi + lo) = u exactly as Eqs. (21)-(22) define it.

        -> (Lq, H, 2R + 2) and (Lk, H, 2R + 2). ``weights`` (default: this prior's) may stack N
        layers' priors along the heads (`shared_tails`); the slots then come layer-major,
        (N, L, H, 2R + 2), so that each layer's block is contiguous memory (pack's concatenation
        of a strided block took twice as long)."""
        w = self.weights() if weights is None else weights
        H, Hkv, d = self.num_heads, self.kv_heads, self.head_dim
        N = w.alpha.shape[0] // Hkv  # layers stacked along the heads
        slot, gain = self._slot_gain.get(dtype) or _slot_and_gain(d, dtype)
        slots = 2 if self.alignment_slot else 1
        with _autocast_off(device):  # round once, below
            rotation = self._rotation(w) * math.sqrt(d)  # (N*Hkv, 2R, 2R)
            if Hkv != H:  # one layer (no stacking with grouped heads)
                rotation = self._per_query_head(rotation)  # (H, 2R, 2R)
            q_rel = torch.matmul(
                self._k_rel(pos_q, rotation.dtype, device), rotation
            )  # (N*H, Lq, 2R)
        q_rel = q_rel.to(dtype).unflatten(0, (N, H)).transpose(1, 2)  # (N, Lq, H, 2R)
        Lq = q_rel.shape[1]
        const = torch.full((N, Lq, H, slots), slot, dtype=dtype, device=device)  # on the device
        if slots == 2 and not self.split_key_bias:
            const[..., 1] = 0.0
        q_tail = torch.cat([q_rel, const], dim=-1)  # (N, Lq, H, 2R + 2)

        u = self._key_bias64(pos_k, device, w)  # (N*Hkv, Lk) float64 (float32 features: float32)
        if gain != 1.0:
            u = u / gain
        u = u.unflatten(0, (N, Hkv)).transpose(1, 2)  # (N, Lk, Hkv)
        hi = u.to(dtype)
        columns = [hi[..., None]]
        if slots == 2:
            # lo: what dtype(u) lost, in the alignment slot (0 without the split: the naive packing)
            lo = (u - hi.to(u.dtype)).to(dtype) if self.split_key_bias else torch.zeros_like(hi)
            columns.append(lo[..., None])
        k_rel = self._k_rel(pos_k, dtype, device)  # (Lk, 2R)
        Lk = k_rel.shape[0]
        k_tail = torch.cat(
            [k_rel[None, :, None, :].expand(N, Lk, Hkv, k_rel.shape[-1]), *columns],
            dim=-1,
        )  # (N, Lk, Hkv, d_p)
        if weights is None:
            return q_tail[0], k_tail[0]  # this prior alone: (L, H, 2R + 2)
        return q_tail, k_tail

    def _layout(self) -> tuple:
        """What besides the weights its tails depend on: priors alike in it can be stacked."""
        return (
            self.num_heads, self.head_dim, self.num_modes, self.train_length, self.freq_base,
            self.split_key_bias, isinstance(self.freqs, nn.Parameter),
        )  # fmt: skip

    def native(self) -> bool:
        """Whether this is goatdna's own prior (none of goat-attention's options)."""
        return (
            self.kv_heads == self.num_heads
            and self.alignment_slot
            and self.gate_kind == "none"
            and not self._authors_key_bias()
        )

    def extra_repr(self) -> str:
        return (
            f"heads={self.num_heads}, head_dim={self.head_dim}, modes={self.num_modes}, "
            f"content_dim={self.content_dim}, train_length={self.train_length}, "
            f"split_key_bias={self.split_key_bias}"
            + (f", removed={','.join(self.removed_terms())}" if self.removed_terms() else "")
            + (
                ""
                if self.native()
                else f", kv_heads={self.kv_heads}, abs_modes={self.abs_modes}, "
                f"key_mlp={self.key_mlp_kind}, slope={self.slope_fn}, features={self.features}, "
                f"gate={self.gate_kind}"
            )
        )


def shared_tails(
    priors: Sequence[GoatPrior], pos: range, dtype: torch.dtype, device: torch.device
) -> list[tuple[Tensor, Tensor]] | None:
    """Every layer's q'/k' position slots for positions ``pos``, computed once for all layers.

    In training the slots cannot be cached (the weights change every step), and computing them
    layer by layer cost ~55 small ops per layer and their backward. Each slot is per head, so
    the layers' weights are stacked along the heads (N x H heads), the slots computed in one
    pass and handed out per layer; gradients flow back through the stacking to every layer's own
    parameters. Entry i is what ``priors[i]._compute_tails(pos, pos, dtype, device)`` returns
    ((L, H, d_p) each). None (each layer computes its own) for learnable frequencies (the
    features differ per layer) or priors of different shapes.
    """
    if not priors or isinstance(priors[0].freqs, nn.Parameter):
        return None
    if not all(p.native() for p in priors):  # goat-attention's options: each layer its own
        return None
    if any(p._layout() != priors[0]._layout() for p in priors):
        return None
    stacked = PriorWeights(
        *(torch.cat([getattr(p, name) for p in priors]) for name in PriorWeights._fields)
    )  # each (N*H, ...)
    q_tail, k_tail = priors[0]._compute_tails(pos, pos, dtype, device, stacked)  # (N, L, H, d_p)
    return list(zip(q_tail.unbind(0), k_tail.unbind(0), strict=True))
