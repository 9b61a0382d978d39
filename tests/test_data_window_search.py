"""The one N-aware window search (`data_prep.window_search`) and the GC study's prompts drawn
from it: brute-force equality, the pread path over a memmap, deterministic prompts; and a scan
that fails on a second N-free search anywhere else in goatdna (issue 42: one definition each).

The package scanned is the imported ``goatdna`` (``goatdna.__file__``), so running this file with
another checkout first on ``PYTHONPATH`` checks that tree."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

import goatdna
from goatdna.analysis.prompts import draw_prompts
from goatdna.data_prep import ShardedGenome
from goatdna.data_prep.window_search import (
    is_n,
    longest_n_free_run,
    start_of_rank,
    valid_start_intervals,
    window_is_n_free,
)
from goatdna.io.tokens import BASES, TOKEN_MASK, N, encode

PACKAGE = Path(goatdna.__file__).resolve().parent


def _split(seed: int, length: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, 4, length).astype(np.uint8)
    tokens[rng.random(length) < 0.01] = N
    for start in rng.integers(0, length - 40, 4):
        tokens[start : start + int(rng.integers(5, 40))] = N
    tokens[:3] = N  # an N run at the very start of a record
    tokens[rng.random(length) < 0.3] |= 0x80
    return tokens


def _brute(tokens, records, window, max_n) -> list[int]:
    is_n = (tokens & TOKEN_MASK) == N
    return [
        s
        for offset, length in records
        for s in range(offset, offset + length - window + 1)
        if is_n[s : s + window].sum() <= max_n
    ]


def _all(starts, counts) -> list[int]:
    cum = np.cumsum(counts)
    total = int(cum[-1]) if cum.size else 0
    return start_of_rank(starts, counts, cum, np.arange(total)).tolist()


@pytest.mark.parametrize("max_n", [0, 1, 3])
@pytest.mark.parametrize("chunk", [1, 5, 64, 1 << 20])
@pytest.mark.parametrize("window", [1, 7, 30])
def test_intervals_equal_brute_force(max_n, chunk, window):
    tokens = _split(seed=max_n * 100 + window, length=700)
    records = [(0, 250), (250, 6), (256, 300), (556, 144)]
    starts, counts = valid_start_intervals(tokens, records, window, max_n, chunk)
    assert _all(starts, counts) == _brute(tokens, records, window, max_n)
    assert np.all(counts > 0) and np.all(np.diff(starts) > 0)


def test_a_memmap_is_read_through_pread_with_the_same_answer(tmp_path):
    tokens = _split(seed=5, length=5_000)
    path = tmp_path / "train.bin"
    tokens.tofile(path)
    mapped = np.memmap(path, dtype=np.uint8, mode="r", shape=(tokens.size,))
    records = [(0, 2_000), (2_000, 3_000)]
    for max_n in (0, 2):
        got = valid_start_intervals(mapped, records, 50, max_n, chunk=333)
        want = valid_start_intervals(tokens, records, 50, max_n, chunk=333)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    # a slice of a memmap is no whole-file map: it is read as an array, still correct
    view = mapped[1_000:]
    got = valid_start_intervals(view, [(0, 4_000)], 50)
    assert _all(*got) == _brute(tokens[1_000:], [(0, 4_000)], 50, 0)


def test_prompts_are_n_free_disjoint_inside_records_and_deterministic(synthetic_shards):
    genome = ShardedGenome(synthetic_shards)
    prompts = draw_prompts(genome, "test", 12, prompt_length=60, continuation_length=40, seed=3)
    again = draw_prompts(genome, "test", 12, prompt_length=60, continuation_length=40, seed=3)
    other = draw_prompts(genome, "test", 12, prompt_length=60, continuation_length=40, seed=4)
    assert prompts == again and prompts != other
    tokens = genome.tokens("test")
    spans = []
    for p in prompts:
        name, coords = p.region.rsplit(":", 1)
        first, last = (int(x) for x in coords.split("-"))
        rec = next(r for r in genome.records("test") if r.name == name)
        assert rec.start < first <= last <= rec.end and last - first + 1 == 100
        offset = rec.offset + first - 1 - rec.start
        piece = np.asarray(tokens[offset : offset + 100]) & TOKEN_MASK
        assert (piece != N).all()
        assert (encode(p.prompt + p.reference) == piece).all()
        spans.append((offset, offset + 100))
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_prompts_say_when_the_split_has_too_few_windows(synthetic_shards):
    from goatdna.errors import GoatDNAError

    genome = ShardedGenome(synthetic_shards)
    longest = max(r.length for r in genome.records("test"))
    with pytest.raises(GoatDNAError, match="no record of at least"):
        draw_prompts(genome, "test", 1, prompt_length=longest, continuation_length=1)
    half = longest // 2  # at most one window of `longest` bases fits in a record
    n = len(genome.records("test")) + 1
    with pytest.raises(GoatDNAError, match="found only"):
        draw_prompts(genome, "test", n, prompt_length=half, continuation_length=longest - half)


def _n_run_tokens(rng: np.random.Generator, length: int) -> np.ndarray:
    """Random tokens with N runs of random lengths (N at the ends too), repeat flags on some."""
    tokens = rng.integers(0, 4, length).astype(np.uint8)
    for _ in range(int(rng.integers(0, 4))):
        if length:
            start = int(rng.integers(0, length))
            tokens[start : start + int(rng.integers(1, 8))] = N
    tokens[rng.random(length) < 0.3] |= 0x80
    return tokens


def test_n_free_answers_equal_brute_force_for_every_length() -> None:
    """`is_n`, `window_is_n_free`, `longest_n_free_run` and the N-free intervals against a
    position-by-position reference: every array length up to 40, every window and start."""
    rng = np.random.default_rng(11)
    for length in range(41):
        for _ in range(6):
            tokens = _n_run_tokens(rng, length)
            letters = [BASES[t & TOKEN_MASK] for t in tokens.tolist()]
            np.testing.assert_array_equal(is_n(tokens), [c == "N" for c in letters])
            cut = int(rng.integers(0, length + 1))
            records = [(0, cut), (cut, length - cut)]
            runs = [len(run) for a, n in records for run in "".join(letters[a : a + n]).split("N")]
            assert longest_n_free_run(tokens, records, chunk=3) == max(runs, default=0)
            for window in range(1, length + 2):
                for start in range(length - window + 1):
                    free = "N" not in letters[start : start + window]
                    assert window_is_n_free(tokens, start, window) is free
                got = valid_start_intervals(tokens, records, window, 0, chunk=4)
                assert _all(*got) == _brute(tokens, records, window, 0), (length, window)


# ---- one N-free window search (issue 42): a second N test or N-run search fails here

HOME = "data_prep/window_search.py"

N_FREE_NAMES = re.compile(r"(^|_)n_?free|n_poor|(^|_)n_(runs?|stretch)|free_stretch", re.I)
"""Names that define an N-free search (the removed ones: precision_check._n_free_stretches,
recall._n_free)."""


def _is_token_n(node: ast.AST) -> bool:
    """``N`` or ``NUM_BASES`` (or their value 4): what a token is compared with to find N."""
    if isinstance(node, ast.Name | ast.Attribute):
        return (node.id if isinstance(node, ast.Name) else node.attr) in ("N", "NUM_BASES")
    return isinstance(node, ast.Constant) and node.value == 4


def _is_masked(node: ast.AST) -> bool:
    """``x & TOKEN_MASK`` (or ``& 0x7F``): a token byte with its repeat flag taken off."""
    return any(
        isinstance(sub, ast.BinOp)
        and isinstance(sub.op, ast.BitAnd)
        and any(
            (isinstance(side, ast.Name) and side.id == "TOKEN_MASK")
            or (isinstance(side, ast.Constant) and side.value == 0x7F)
            for side in (sub.left, sub.right)
        )
        for sub in ast.walk(node)
    )


def _is_known_base_test(node: ast.Compare) -> bool:
    """``tokens <= 3``, ``tokens < 4``/``< NUM_BASES``: A/C/G/T versus N."""
    op, right = node.ops[0], node.comparators[0]
    return (isinstance(op, ast.LtE) and isinstance(right, ast.Constant) and right.value == 3) or (
        isinstance(op, ast.Lt) and _is_token_n(right)
    )


def _is_run_edge(node: ast.AST) -> bool:
    """``x[1:] != x[:-1]`` or ``np.diff(...)``: where runs of an indicator begin and end."""
    if isinstance(node, ast.Call):
        func = node.func
        return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) == "diff"
    if not isinstance(node, ast.Compare) or not isinstance(node.ops[0], ast.NotEq):
        return False
    sides = [node.left, node.comparators[0]]
    return all(isinstance(s, ast.Subscript) and isinstance(s.slice, ast.Slice) for s in sides)


def _holds_known_base_test(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Compare) and _is_known_base_test(n) for n in ast.walk(node))


def _known_base_runs(edge: ast.AST, function: ast.AST) -> bool:
    """``edge`` finds runs of a known-base indicator: the test inside it, or a name the function
    assigns from one (``clean = np.concatenate(([False], tokens <= 3, [False]))``). A run of
    another indicator built with the test's help (variant_task's periodic runs) is not one."""
    if not _is_run_edge(edge):
        return False
    indicators = {
        target.id
        for n in ast.walk(function)
        if isinstance(n, ast.Assign) and _holds_known_base_test(n.value)
        for target in n.targets
        if isinstance(target, ast.Name)
    }
    used = {n.id for n in ast.walk(edge) if isinstance(n, ast.Name)}
    return _holds_known_base_test(edge) or bool(used & indicators)


def scan_n_free(package: Path) -> list[str]:
    """Where goatdna outside window_search.py tests a masked token byte for N, names an N-free
    search, or finds runs of known bases (a known-base test and run edges in one function)."""
    found: list[str] = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel == HOME:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if N_FREE_NAMES.search(node.name):
                    found.append(f"goatdna/{rel}:{node.lineno}: {node.name} (an N-free search)")
                if any(_known_base_runs(edge, node) for edge in ast.walk(node)):
                    found.append(f"goatdna/{rel}:{node.lineno}: {node.name} (runs without N)")
            elif (
                isinstance(node, ast.Compare)
                and isinstance(node.ops[0], ast.Eq | ast.NotEq)
                and _is_masked(node.left)
                and _is_token_n(node.comparators[0])
            ):
                found.append(f"goatdna/{rel}:{node.lineno}: (x & TOKEN_MASK) == N (use is_n)")
    return found


def test_the_n_free_search_is_defined_only_in_window_search() -> None:
    found = scan_n_free(PACKAGE)
    assert not found, f"import it from goatdna/{HOME}:\n" + "\n".join(found)


def test_the_scan_finds_the_copies_it_replaced(tmp_path: Path) -> None:
    """The three copies issue 42 removed (check-precision's stretches, the recall probe's test
    and make-task's tile filter), as they were: each is reported."""
    (tmp_path / "copies.py").write_text(
        textwrap.dedent(
            """
            def _n_free_stretches(tokens):
                clean = np.concatenate(([False], tokens <= 3, [False]))
                edges = np.flatnonzero(clean[1:] != clean[:-1])
                return list(zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True))

            def stretches(tokens):
                clean = np.concatenate(([False], tokens < NUM_BASES, [False]))
                return np.flatnonzero(np.diff(clean))

            def segment_ok(tokens, start, length):
                return not ((np.asarray(tokens[start : start + length]) & TOKEN_MASK) == N).any()

            def tiles(block):
                return ~((block & TOKEN_MASK) == N).any(axis=1)
            """
        )
    )
    found = scan_n_free(tmp_path)
    assert [line.split(": ", 1)[1] for line in found] == [
        "_n_free_stretches (an N-free search)",
        "_n_free_stretches (runs without N)",
        "stretches (runs without N)",
        "(x & TOKEN_MASK) == N (use is_n)",
        "(x & TOKEN_MASK) == N (use is_n)",
    ], found
