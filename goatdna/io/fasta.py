"""Reading FASTA files: the one home of FASTA in goatdna (issue 42).

Two ways in, one convention (a record's name is the first word of its ``>`` line; plain, gzip or
bgzip told apart by the magic bytes, not the name):

- `open_fasta` / `ContigReader`: a reference opened for random access (`prepare`, the inference
  `Reference`, BED regions, `generate`'s ``--prompt-fasta``), indexed with pyfaidx, validated per
  base;
- `read_fasta_text` / `fasta_titles`: the records of a small FASTA read whole, in order (sequence
  files of `embed`/`predict`/`finetune`, `make-variant-task`'s synthetic genome).

Why not pyfaidx's ``fetch`` for the bases themselves: it decodes every chunk to a Python string and
strips newlines twice, which caps throughput near the speed of a numpy lookup. We use pyfaidx for
what it does well (building and reading the ``.fai``/``.gzi`` index, BGZF random access) and read
the raw line-wrapped bytes of a range ourselves, mapping them to tokens and deleting line breaks in
one ``bytes.translate`` pass. That pass doubles as validation: a base that is not nucleotide text
maps to ``INVALID``, and a range whose line geometry disagrees with the index comes out with the
wrong length.

Plain gzip cannot be indexed, so it is decompressed once into a cache file (said on the console).
"""

from __future__ import annotations

import bisect
import gzip
import io
import json
import os
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from goatdna.atomic import atomic_path, atomic_write_text
from goatdna.errors import GoatDNAError
from goatdna.formats import json_text
from goatdna.io.text import detect_compression
from goatdna.io.tokens import BYTE_LUT, INVALID
from goatdna.workdir import input_stamp

BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")
TRANSLATE_TABLE = BYTE_LUT.tobytes()
LINE_BREAKS = b"\r\n"

Message = Callable[[str], None]


@dataclass(frozen=True)
class ContigInfo:
    """One contig as the ``.fai`` index describes it (all offsets in uncompressed bytes)."""

    name: str
    length: int
    offset: int  # byte offset of the first base
    line_bases: int  # bases per full line
    line_bytes: int  # bytes per full line, line break included

    def byte_range(self, start: int, end: int) -> tuple[int, int]:
        """Uncompressed byte span [lo, hi) holding bases [start, end) and the line breaks between."""
        lb, lB = self.line_bases, self.line_bytes
        lo = self.offset + (start // lb) * lB + start % lb
        last = end - 1
        hi = self.offset + (last // lb) * lB + last % lb + 1
        return lo, hi


@dataclass(frozen=True)
class FastaSource:
    """A FASTA ready for random access: the file we read and what the user gave us."""

    source: Path  # what the user passed
    read_path: Path  # plain or BGZF file that pyfaidx indexes (a cache file for plain gzip)
    compression: str  # "none", "gzip" or "bgzip"
    contigs: tuple[ContigInfo, ...]
    index_path: Path  # the .fai (next to read_path, or in the cache dir if that is read-only)

    def contig(self, name: str) -> ContigInfo:
        for info in self.contigs:
            if info.name == name:
                return info
        raise GoatDNAError(f"contig {name!r} is not in {self.source.name}")

    def open_reader(self) -> ContigReader:
        return ContigReader(self)


def _print(message: str) -> None:
    print(message)


def default_cache_dir() -> Path:
    """Where every reader of a FASTA puts the decompressed copy of a plain-gzip file."""
    if os.environ.get("GOATDNA_CACHE"):
        return Path(os.environ["GOATDNA_CACHE"]) / "fasta"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "goatdna" / "fasta"


def open_fasta(
    path: Path,
    cache_dir: Path,
    message: Message = _print,
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
) -> FastaSource:
    """Check a FASTA file, make it randomly accessible and return its contigs.

    ``cache_dir`` receives the decompressed copy of a plain-gzip input. ``progress(label, total)``
    returns an ``advance(n)`` callback for long steps (decompression).
    """
    path = Path(path)
    if not path.exists():
        raise GoatDNAError(f"FASTA file {path} does not exist: check the path")
    if not path.is_file():
        raise GoatDNAError(f"{path} is not a file: pass a FASTA file (.fa, .fa.gz or bgzip)")
    if path.stat().st_size == 0:
        raise GoatDNAError(f"FASTA file {path} is empty: pass a FASTA with at least one '>' record")
    compression = detect_compression(path)
    read_path = path
    if compression == "gzip":
        read_path = _decompress_to_cache(path, cache_dir, message, progress)
    elif compression == "bgzip":
        _check_bgzf_eof(path)
    _check_starts_with_header(path, read_path, compression)
    read_path = _name_for_pyfaidx(read_path, compression, cache_dir)
    index_path = _fai_path(read_path, cache_dir)
    contigs = _load_index(path, read_path, index_path, message)
    if not contigs:
        raise GoatDNAError(f"FASTA file {path} holds no sequence records (no '>' header lines)")
    return FastaSource(path, read_path, compression, tuple(contigs), index_path)


# ---------------------------------------------------------------------------------------------
# compression


def _decompress_to_cache(
    path: Path,
    cache_dir: Path,
    message: Message,
    progress: Callable[[str, int], Callable[[int], None]] | None,
) -> Path:
    """Plain gzip -> cache_dir/<name without .gz>, once; reused while the source is unchanged."""
    name = path.name[:-3] if path.name.endswith(".gz") else path.name + ".fa"
    target = cache_dir / name
    stamp_path = cache_dir / (name + ".source.json")
    source = input_stamp(path)
    stamp = source.as_json()
    if target.is_file() and stamp_path.is_file():
        try:
            if json.loads(stamp_path.read_text()) == stamp:
                message(f"using the decompressed copy of {path.name} cached at {target}")
                return target
        except (OSError, ValueError):
            pass
    message(  # atomic_path makes cache_dir, and removes it again if the copy fails
        f"{path.name} is plain gzip, which cannot be indexed for random access: "
        f"decompressing it once to {target} (bgzip input avoids this copy)"
    )
    advance = progress(f"decompress {path.name}", source.size) if progress else None
    try:
        with (
            atomic_path(target) as tmp,
            open(path, "rb") as raw,
            gzip.GzipFile(fileobj=raw) as src,
            open(tmp, "wb") as dst,
        ):
            last = 0
            while True:
                block = src.read(1 << 22)
                if not block:
                    break
                dst.write(block)
                if advance is not None:
                    pos = raw.tell()
                    advance(pos - last)
                    last = pos
    except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as err:
        raise GoatDNAError(
            f"cannot decompress {path}: the gzip file is truncated or corrupt ({err}); "
            "download or compress it again"
        ) from None
    atomic_write_text(stamp_path, json_text(stamp, indent=None, end=""))
    return target


def _name_for_pyfaidx(read_path: Path, compression: str, cache_dir: Path) -> Path:
    """pyfaidx picks BGZF vs plain by the file name; a misnamed file gets a well-named link."""
    says_gz = read_path.name.lower().endswith((".gz", ".bgz"))
    if says_gz == (compression == "bgzip"):
        return read_path
    name = read_path.name + ".gz" if compression == "bgzip" else read_path.name.rsplit(".", 1)[0]
    link = cache_dir / name
    cache_dir.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(read_path.resolve())
    return link


def _check_bgzf_eof(path: Path) -> None:
    with open(path, "rb") as handle:
        handle.seek(max(0, path.stat().st_size - len(BGZF_EOF)))
        tail = handle.read()
    if tail != BGZF_EOF:
        raise GoatDNAError(
            f"bgzip file {path} is truncated (no BGZF end-of-file block): "
            "download or compress it again"
        )


def _check_starts_with_header(source: Path, read_path: Path, compression: str) -> None:
    """The first non-blank, non-';' line must be a '>' header; otherwise this is not FASTA."""
    opener = gzip.open if compression == "bgzip" else open
    try:
        with opener(read_path, "rb") as handle:
            head = handle.read(1 << 16)
    except (EOFError, OSError, zlib.error) as err:
        raise GoatDNAError(f"cannot read {source}: {err}") from None
    for line in head.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(b";"):
            continue
        if stripped.startswith(b">"):
            return
        raise GoatDNAError(
            f"{source} is not FASTA: its first line does not start with '>' "
            "(every record needs a '>name' header line)"
        )
    if len(head) < (1 << 16):
        raise GoatDNAError(f"FASTA file {source} is empty: it holds no '>' header line")
    raise GoatDNAError(f"{source} is not FASTA: no '>' header line in its first 64 KiB")


# ---------------------------------------------------------------------------------------------
# index


def _fai_path(read_path: Path, cache_dir: Path) -> Path:
    """``FASTA.fai`` next to the FASTA, or in the cache dir when that directory is read-only
    (shared reference folders often are)."""
    if os.access(read_path.parent, os.W_OK):
        return Path(str(read_path) + ".fai")
    cache_dir.mkdir(parents=True, exist_ok=True)
    return cache_dir / (read_path.name + ".fai")


def _gzi_path(fai: Path) -> str:
    return str(fai)[: -len(".fai")] + ".gzi"


def open_faidx(read_path: Path, fai: Path, **kwargs):
    # imported here: training and analysis read shards, not FASTA, and run without pyfaidx
    import pyfaidx

    gzi = _gzi_path(fai) if read_path.name.lower().endswith((".gz", ".bgz")) else None
    return pyfaidx.Faidx(str(read_path), indexname=str(fai), gzi_indexname=gzi, **kwargs)


def _build_faidx(source: Path, read_path: Path, fai: Path):
    """Open (and if missing or older than the FASTA, build) the pyfaidx index; a FASTA it
    refuses leaves no fresh .fai beside it (a later run would read that index as valid)."""
    existed = fai.exists()
    try:
        return _open_or_refuse(source, read_path, fai)
    except GoatDNAError:
        if not existed:
            fai.unlink(missing_ok=True)
        raise


def _open_or_refuse(source: Path, read_path: Path, fai: Path):
    import pyfaidx

    try:
        return open_faidx(read_path, fai, duplicate_action="stop", rebuild=True)
    except pyfaidx.UnsupportedCompressionFormat as err:
        raise GoatDNAError(f"cannot read {source}: {' '.join(str(err).split())}") from None
    except pyfaidx.FastaIndexingError as err:
        raise GoatDNAError(f"cannot index {source}: {' '.join(str(err).split())}") from None
    except (ValueError, IndexError, KeyError) as err:
        if "uplicate" in str(err):
            dup = _find_duplicate_name(fai)
            raise GoatDNAError(
                f"duplicate contig name {dup!r} in {source}: contig names must be unique"
            ) from None
        raise GoatDNAError(f"cannot index {source}: {err}") from None
    except UnicodeDecodeError:
        raise GoatDNAError(f"{source} is not FASTA text (it holds non-ASCII bytes)") from None
    except OSError as err:
        raise GoatDNAError(f"cannot index {source}: {err}") from None


def _find_duplicate_name(fai: Path) -> str:
    seen: set[str] = set()
    try:
        for line in fai.read_text().splitlines():
            name = line.split("\t", 1)[0]
            if name in seen:
                return name
            seen.add(name)
    except OSError:
        pass
    return "?"


def _load_index(source: Path, read_path: Path, fai: Path, message: Message) -> list[ContigInfo]:
    """Index the FASTA, rebuilding a ``.fai`` that is stale or does not describe this file."""
    had_index = fai.exists()
    if had_index and fai.stat().st_mtime < read_path.stat().st_mtime:
        message(f"the index {fai.name} is older than {read_path.name}: rebuilding it")
    try:
        faidx = _build_faidx(source, read_path, fai)
    except GoatDNAError:
        if not had_index or not fai.exists():
            raise  # pyfaidx built the index from this FASTA itself: the FASTA is at fault
        # An unreadable index (e.g. duplicate keys from another file) is rebuilt from the FASTA.
        message(f"the index {fai.name} does not match {source.name}: rebuilding it")
        fai.unlink()
        faidx = _build_faidx(source, read_path, fai)
    contigs = _contigs_from(faidx)
    ok = _index_matches_file(faidx, contigs)
    faidx.close()
    if not ok:
        message(f"the index {fai.name} does not match {source.name}: rebuilding it")
        fai.unlink()
        faidx = _build_faidx(source, read_path, fai)
        contigs = _contigs_from(faidx)
        ok = _index_matches_file(faidx, contigs)
        faidx.close()
        if not ok:
            raise GoatDNAError(f"cannot index {source}: its line layout is inconsistent")
    return contigs


def _contigs_from(faidx) -> list[ContigInfo]:
    contigs = []
    for name, rec in faidx.index.items():
        if rec.rlen > 0 and (rec.lenc <= 0 or rec.lenb < rec.lenc):
            raise GoatDNAError(f"cannot index contig {name!r}: bad line layout")
        contigs.append(
            ContigInfo(name, int(rec.rlen), int(rec.offset), int(rec.lenc), int(rec.lenb))
        )
    return contigs


def _index_matches_file(faidx, contigs: list[ContigInfo]) -> bool:
    """Does every index entry sit right after its own '>name' header, and cover the file?

    A ``.fai`` copied from another file, or written before the FASTA was edited with its mtime
    preserved, fails here; pyfaidx alone only compares modification times.
    """
    raw = RawReader(faidx)
    try:
        return _entries_match(raw, contigs)
    finally:
        raw.close()


def _entries_match(raw: RawReader, contigs: list[ContigInfo]) -> bool:
    total = raw.size()
    prev_end = 0
    for info in contigs:
        gap_lo = prev_end
        if info.offset > total or info.offset < gap_lo:
            return False
        head = raw.read(max(gap_lo, info.offset - 65536), info.offset)
        if gap_lo > 0 and info.offset - gap_lo > 65536:
            return False
        header = re.compile(
            rb"(?:\A|\n)>" + re.escape(info.name.encode()) + rb"(?:[ \t][^\n]*)?\r?\n\Z"
        )
        if not header.search(head):
            return False
        if gap_lo > 0:
            between = head[len(head) - (info.offset - gap_lo) :]
            if not re.fullmatch(rb"[\r\n]*>[^\n]*\n", between):
                return False
        if info.length:
            _lo, hi = info.byte_range(0, info.length)
        else:
            hi = info.offset
        if hi > total:
            return False
        prev_end = hi
    if total - prev_end > 65536:
        return False
    return not raw.read(prev_end, total).strip()


# ---------------------------------------------------------------------------------------------
# reading bases


class RawReader:
    """Uncompressed byte ranges of a plain or BGZF file (BGZF via the ``.gzi`` block index)."""

    def __init__(self, faidx) -> None:
        self._faidx = faidx
        self._bgzf = bool(getattr(faidx, "_bgzf", False))
        self._fd = None if self._bgzf else os.open(faidx.filename, os.O_RDONLY)
        # BGZF block starts in uncompressed bytes, for the bisect of every read
        self._ustarts = [b.ustart for b in faidx.gzi_index or ()] if self._bgzf else []

    def _plain_fd(self) -> int:
        if self._fd is None:
            raise ValueError("RawReader is closed")
        return self._fd

    def size(self) -> int:
        if not self._bgzf:
            return os.fstat(self._plain_fd()).st_size
        last = self._faidx.gzi_index[-1] if self._faidx.gzi_index else None
        # Past the last block start, read to the end to learn the total uncompressed size.
        from Bio.bgzf import make_virtual_offset

        start = last.ustart if last is not None else 0
        self._faidx.file.seek(make_virtual_offset(last.cstart, 0) if last is not None else 0)
        rest = 0
        while True:
            chunk = self._faidx.file.read(1 << 20)
            if not chunk:
                break
            rest += len(chunk)
        return start + rest

    def read(self, lo: int, hi: int) -> bytes:
        if hi <= lo:
            return b""
        if not self._bgzf:
            return os.pread(self._plain_fd(), hi - lo, lo)
        from Bio.bgzf import make_virtual_offset

        blocks = self._faidx.gzi_index
        i = max(0, bisect.bisect_right(self._ustarts, lo) - 1)
        block = blocks[i]
        self._faidx.file.seek(make_virtual_offset(block.cstart, lo - block.ustart))
        return self._faidx.file.read(hi - lo)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class ContigReader:
    """Reads base ranges of a FastaSource as validated token bytes. One per process/thread."""

    def __init__(self, source: FastaSource) -> None:
        self.source = source
        self._faidx = open_faidx(
            source.read_path, source.index_path, rebuild=False, build_index=False
        )
        self._raw = RawReader(self._faidx)

    def read_tokens(self, contig: ContigInfo, start: int, end: int) -> bytes:
        """Token bytes of bases [start, end) of ``contig`` (0-based, half-open).

        Raises GoatDNAError naming the contig and the 1-based position of the first bad base.
        """
        return self._read(contig, start, end)[1]

    def read_text(self, contig: ContigInfo, start: int, end: int) -> str:
        """Bases [start, end) as the file writes them (case and IUPAC codes kept), validated
        as `read_tokens` validates them: a prompt is shown back to the user as they wrote it."""
        return self._read(contig, start, end)[0].translate(None, LINE_BREAKS).decode("ascii")

    def _read(self, contig: ContigInfo, start: int, end: int) -> tuple[bytes, bytes]:
        """(raw line-wrapped bytes, token bytes) of bases [start, end), checked."""
        if end <= start:
            return b"", b""
        lo, hi = contig.byte_range(start, end)
        raw = self._raw.read(lo, hi)
        tokens = raw.translate(TRANSLATE_TABLE, LINE_BREAKS)
        if len(tokens) != end - start or len(raw) != hi - lo:
            raise GoatDNAError(
                f"contig {contig.name!r} in {self.source.source.name} does not match its index "
                f"near position {start + 1}: delete {self.source.read_path.name}.fai and retry"
            )
        bad = tokens.find(bytes([INVALID]))
        if bad >= 0:
            pos = start + bad
            char = self._char_at(raw, bad)
            raise GoatDNAError(
                f"invalid character {char!r} in contig {contig.name!r} at position {pos + 1} "
                f"(1-based) of {self.source.source.name}: only A C G T N, IUPAC codes and "
                "their lowercase forms are allowed"
            )
        return raw, tokens

    @staticmethod
    def _char_at(raw: bytes, base_index: int) -> str:
        """The source character of the ``base_index``-th base in ``raw`` (line breaks skipped)."""
        seen = -1
        for byte in raw:
            if byte in LINE_BREAKS:
                continue
            seen += 1
            if seen == base_index:
                return chr(byte)
        return "?"

    def close(self) -> None:
        self._raw.close()
        self._faidx.close()


# ---------------------------------------------------------------------------------------------
# small FASTA files read whole


def _open_text(path: Path) -> TextIO:
    """The FASTA as text, gunzipped when its magic bytes say gzip (bgzip too), whatever its name."""
    if detect_compression(path) == "none":
        return open(path, encoding="utf-8")
    return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")


def read_fasta_text(path: str | Path) -> list[tuple[str, str]]:
    """(name, sequence as written) of each record, in file order: a sequence file or a small
    genome read whole. The name is the first word of the ``>`` line (``record<n>`` when the line
    is blank); line breaks, spaces and ``\r`` inside the sequence are dropped (Biopython's
    `SimpleFastaParser`, which also skips anything before the first ``>``)."""
    from Bio.SeqIO.FastaIO import SimpleFastaParser

    path = Path(path)
    if not path.is_file():
        raise GoatDNAError(f"{path}: file not found")
    records: list[tuple[str, str]] = []
    try:
        with _open_text(path) as handle:
            for title, seq in SimpleFastaParser(handle):
                name = title.split(None, 1)[0] if title.strip() else f"record{len(records) + 1}"
                records.append((name, seq))
    except (OSError, UnicodeDecodeError, ValueError, EOFError, zlib.error) as err:
        raise GoatDNAError(f"{path}: cannot read as FASTA ({err})") from None
    if not records:
        raise GoatDNAError(f"{path}: no FASTA records (a record starts with a '>' line)")
    return records


def fasta_titles(path: str | Path) -> Iterator[str]:
    """The ``>`` lines of a FASTA (without the ``>``), lazily: a header check stops at the first
    line it refuses without reading a human chromosome into memory."""
    path = Path(path)
    try:
        with _open_text(path) as handle:
            for line in handle:
                if line.startswith(">"):
                    yield line[1:].rstrip("\r\n")
    except (OSError, UnicodeDecodeError, EOFError, zlib.error) as err:
        raise GoatDNAError(f"{path}: cannot read as FASTA ({err})") from None
