"""One record's sha256 and N / soft-mask / G+C counts, computed beside its reading.

Hashing and counting the tokens cost about as much CPU as reading and translating them
(``benchmarks/prepare_bench.py``). With ``background=True`` a record's chunks are hashed and
counted in one helper thread while the caller reads, translates and writes the next chunk:
hashlib and numpy's loops release the GIL, ``bytes.translate`` does not, so the two halves run
on two cores. Chunks go to the thread in order (the digest is sequential) and at most one
waits for it, so memory stays at two chunks.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from goatdna.io.tokens import REPEAT_FLAG, TOKEN_MASK, C, G, N

COUNT_BLOCK = 1 << 18  # 256 KiB: the temporaries of one block stay in L2 cache

PIPELINE_STEP = 1 << 22
"""Bases per chunk when a record is hashed in the background (a record of more than one chunk);
small enough that a few chunks overlap, large enough that per-call costs vanish."""


def count_bases(tokens: bytes) -> tuple[int, int, int]:
    """(N, soft-masked, G+C) bases of valid token bytes, in cache-sized blocks."""
    arr = np.frombuffer(tokens, dtype=np.uint8)
    plain = np.empty(min(COUNT_BLOCK, arr.size), dtype=np.uint8)
    hit = np.empty(plain.size, dtype=bool)
    n = soft = gc = 0
    for lo in range(0, arr.size, COUNT_BLOCK):
        block = arr[lo : lo + COUNT_BLOCK]
        p, h = plain[: block.size], hit[: block.size]
        np.greater_equal(block, REPEAT_FLAG, out=h)
        soft += int(np.count_nonzero(h))
        np.bitwise_and(block, TOKEN_MASK, out=p)
        np.equal(p, N, out=h)
        n += int(np.count_nonzero(h))
        np.subtract(p, C, out=p)  # C, G -> 0, 1 (adjacent tokens); A wraps to 255
        np.less(p, G - C + 1, out=h)
        gc += int(np.count_nonzero(h))
    return n, soft, gc


class RecordDigest:
    """Feed a record's token chunks in order with `add`; `finish` gives counts and sha256."""

    def __init__(self, background: bool = False) -> None:
        self._sha = hashlib.sha256()
        self._counts = [0, 0, 0]  # N, soft-masked, G+C
        self._pool = ThreadPoolExecutor(1, "prepare-digest") if background else None
        self._pending: Future[None] | None = None

    def _account(self, tokens: bytes) -> None:
        self._sha.update(tokens)
        for i, count in enumerate(count_bases(tokens)):
            self._counts[i] += count

    def add(self, tokens: bytes) -> None:
        if self._pool is None:
            self._account(tokens)
            return
        self._wait()  # at most one chunk in flight: bounded memory, updates in order
        self._pending = self._pool.submit(self._account, tokens)

    def _wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()  # re-raises what the thread raised

    def finish(self) -> tuple[int, int, int, str]:
        """(N, soft-masked, G+C, sha256 hex) of everything added."""
        self._wait()
        n, soft, gc = self._counts
        return n, soft, gc, self._sha.hexdigest()

    def close(self) -> None:
        """Stop the helper thread (also after an error; a pending chunk is finished first)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> RecordDigest:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
