"""The on-disk shard format and its reader, `ShardedGenome`.

A dataset directory holds one flat ``{split}.bin`` per split (one uint8 per base, see tokens.py)
and ``manifest.json`` describing the source, the token table, every record's place in its split
file with its base counts and sha256, and each split's total length. Files are written to a
temporary name and renamed, so a ``.bin`` or manifest that exists is complete.

A dataset prepared from several FASTA files (``goatdna prepare a.fa b.fa --source-names x,y``)
lists them under ``sources`` (instead of the one-file ``source``), and each of its records names
its ``source``. A manifest without ``sources`` reads as one source, named after its FASTA file.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from goatdna.data_prep.splits import SPLITS
from goatdna.errors import GoatDNAError
from goatdna.formats import json_text
from goatdna.io.tokens import IUPAC_AMBIGUOUS, REPEAT_FLAG, TOKEN_MASK, TOKEN_TABLE

FORMAT_NAME = "goatdna-shards"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
HASH_BLOCK = 1 << 24


def split_file_name(split: str) -> str:
    return f"{split}.bin"


def token_table_manifest() -> dict:
    """The token table as stored in every manifest, so a reader needs no goatdna to decode."""
    return {
        "tokens": dict(TOKEN_TABLE),
        "iupac_ambiguous_as_N": IUPAC_AMBIGUOUS,
        "token_mask": TOKEN_MASK,
        "repeat_flag": REPEAT_FLAG,
        "repeat_flag_meaning": "base was lowercase (soft-masked) in the source FASTA",
    }


@dataclass(frozen=True)
class Record:
    """One contig or BED interval: where it came from, where it lies in its split's .bin."""

    name: str
    split: str
    start: int  # source coordinates, 0-based, half-open
    end: int
    offset: int  # position of its first base in {split}.bin
    length: int
    n_count: int
    softmask_count: int
    gc_count: int
    sha256: str
    source: str = ""
    """Name of the FASTA source it came from ("" in a one-file manifest: see `ShardedGenome`)."""

    def to_dict(self) -> dict:
        data = asdict(self)
        if not self.source:
            del data["source"]  # one-file manifests keep their original shape
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Record:
        return cls(**{f: data[f] for f in cls.__dataclass_fields__ if f in data})


_FASTA_SUFFIXES = re.compile(r"(\.(fa|fasta|fna|fas|seq))?(\.(gz|bgz|bgzf))?$", re.IGNORECASE)


def default_source_name(file_name: str) -> str:
    """A source's name from its FASTA file name: ``hg38.fa.gz`` -> ``hg38``."""
    return _FASTA_SUFFIXES.sub("", file_name) or file_name


def manifest_bytes(manifest: dict) -> bytes:
    """Canonical serialisation: the same dataset always gives the same manifest bytes."""
    return json_text(manifest).encode()


_RECORD_INTS = ("start", "end", "offset", "length", "n_count", "softmask_count", "gc_count")
_SPLIT_INTS = ("length", "records", "n_count", "softmask_count", "gc_count")


def _bad(path: Path, field: str, problem: str) -> GoatDNAError:
    return GoatDNAError(
        f"{path}: field {field} {problem}; the manifest is damaged or hand-edited: prepare the "
        "data again (goatdna prepare ... --force)"
    )


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_manifest(manifest: dict, path: Path) -> None:  # noqa: C901 (one check per manifest field, each its own error line)
    """Every field a reader relies on is there, has its type, and the parts add up.

    Raises GoatDNAError naming the first bad field (``records[3].split``), so a hand-edited or
    damaged manifest never reaches `info`, `--verify` or `train` as a traceback, and a manifest
    that describes no bases is never "verified".
    """
    source_names = _check_sources(manifest, path)
    if not isinstance(manifest.get("split_mode"), str):
        raise _bad(path, "split_mode", "is missing or not a string")
    splits = manifest.get("splits")
    if not isinstance(splits, dict) or not splits:
        raise _bad(path, "splits", "is missing or empty")
    for name, split in splits.items():
        if name not in SPLITS:
            raise _bad(path, f"splits.{name}", f"is not one of {', '.join(SPLITS)}")
        if not isinstance(split, dict):
            raise _bad(path, f"splits.{name}", "is not an object")
        if split.get("file") != split_file_name(name):
            raise _bad(path, f"splits.{name}.file", f"is not {split_file_name(name)!r}")
        for key in _SPLIT_INTS:
            if not _count(split.get(key)):
                raise _bad(path, f"splits.{name}.{key}", "is missing or not a count (int >= 0)")
    records = manifest.get("records")
    if not isinstance(records, list):
        raise _bad(path, "records", "is missing or not a list")
    if not records:
        raise _bad(path, "records", "is empty: the manifest describes no bases")
    totals = dict.fromkeys(splits, 0)
    counts = dict.fromkeys(splits, 0)
    for i, rec in enumerate(records):
        where = f"records[{i}]"
        if not isinstance(rec, dict):
            raise _bad(path, where, "is not an object")
        if not isinstance(rec.get("name"), str) or not rec["name"]:
            raise _bad(path, f"{where}.name", "is missing or not a string")
        if rec.get("split") not in splits:
            raise _bad(
                path, f"{where}.split", f"is {rec.get('split')!r}, not one of the splits listed"
            )
        for key in _RECORD_INTS:
            if not _count(rec.get(key)):
                raise _bad(path, f"{where}.{key}", "is missing or not a count (int >= 0)")
        if source_names is not None and rec.get("source") not in source_names:
            raise _bad(path, f"{where}.source", "is missing or not one of the sources listed")
        sha = rec.get("sha256")
        if not isinstance(sha, str) or len(sha) != 64:
            raise _bad(path, f"{where}.sha256", "is missing or not a sha256 hex digest")
        if rec["end"] - rec["start"] != rec["length"] or rec["length"] == 0:
            raise _bad(path, f"{where}.length", "does not equal end - start (or is 0)")
        if rec["offset"] != totals[rec["split"]]:
            raise _bad(path, f"{where}.offset", "does not follow the previous record")
        totals[rec["split"]] += rec["length"]
        counts[rec["split"]] += 1
    for name, split in splits.items():
        if split["length"] != totals[name] or split["records"] != counts[name]:
            raise _bad(
                path, f"splits.{name}", "does not add up to its records (length or record count)"
            )


def _check_sources(manifest: dict, path: Path) -> set[str] | None:
    """Check ``source`` (one FASTA) or ``sources`` (several); the names of the latter."""
    fields = (("size", int), ("sha256", str), ("compression", str))
    if "sources" not in manifest:
        source = manifest.get("source")
        if not isinstance(source, dict):
            raise _bad(path, "source", "is missing or not an object")
        for key, kind in (("name", str), *fields):
            if not isinstance(source.get(key), kind):
                raise _bad(path, f"source.{key}", f"is missing or not a {kind.__name__}")
        return None
    sources = manifest["sources"]
    if not isinstance(sources, list) or not sources:
        raise _bad(path, "sources", "is not a non-empty list")
    names: set[str] = set()
    for i, source in enumerate(sources):
        if not isinstance(source, dict):
            raise _bad(path, f"sources[{i}]", "is not an object")
        for key, kind in (("name", str), ("file", str), *fields):
            if not isinstance(source.get(key), kind):
                raise _bad(path, f"sources[{i}].{key}", f"is missing or not a {kind.__name__}")
        if source["name"] in names:
            raise _bad(path, f"sources[{i}].name", "repeats another source's name")
        names.add(source["name"])
    return names


class ShardedGenome:
    """Read side of a prepared dataset: manifest, per-split memmaps, record boundaries."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        path = self.root / MANIFEST_NAME
        if not self.root.is_dir():
            raise GoatDNAError(
                f"dataset directory {self.root} does not exist: run `goatdna prepare` first"
            )
        if not path.is_file():
            raise GoatDNAError(
                f"{self.root} holds no {MANIFEST_NAME}: it is not a prepared dataset "
                "(run `goatdna prepare FASTA --out DIR`, or finish it with --resume)"
            )
        raw = path.read_bytes()
        try:
            manifest = json.loads(raw)
        except ValueError as err:
            raise GoatDNAError(
                f"{path} is not valid JSON ({err}): prepare the data again"
            ) from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
            raise GoatDNAError(f"{path} is not a goatdna shard manifest")
        if manifest.get("format_version") != FORMAT_VERSION:
            raise GoatDNAError(
                f"{path} has format version {manifest.get('format_version')}, this goatdna reads "
                f"{FORMAT_VERSION}: prepare the data again with this version"
            )
        check_manifest(manifest, path)
        self.manifest: dict = manifest
        self.manifest_sha256: str = hashlib.sha256(raw).hexdigest()
        self._records = [Record.from_dict(r) for r in manifest["records"]]
        if "sources" not in manifest:  # one FASTA: every record is from that one source
            only = default_source_name(manifest["source"]["name"])
            self._records = [replace(r, source=only) for r in self._records]

    def __repr__(self) -> str:
        sizes = ", ".join(f"{s}={self.split_length(s):,}" for s in self.split_names())
        return f"ShardedGenome({str(self.root)!r}: {sizes})"

    def _check_split(self, split: str) -> None:
        if split not in self.manifest["splits"]:
            raise GoatDNAError(
                f"unknown split {split!r} in {self.root}: choose one of {', '.join(SPLITS)}"
            )

    def sources(self) -> list[dict]:
        """One entry per FASTA source: ``name``, ``file``, ``size``, ``sha256``, ``compression``
        (and, in a multi-source manifest, ``split_mode`` and the ``renamed`` contigs)."""
        if "sources" in self.manifest:
            return [dict(s) for s in self.manifest["sources"]]
        src = self.manifest["source"]
        return [{**src, "name": default_source_name(src["name"]), "file": src["name"]}]

    def source_names(self) -> list[str]:
        """Names of the FASTA sources, in the order they were prepared."""
        return [s["name"] for s in self.sources()]

    def split_names(self) -> list[str]:
        """Splits holding at least one base, in train/val/test order."""
        return [s for s in SPLITS if self.manifest["splits"].get(s, {}).get("length", 0) > 0]

    def split_length(self, split: str) -> int:
        self._check_split(split)
        return int(self.manifest["splits"][split]["length"])

    def records(self, split: str | None = None) -> list[Record]:
        """Records of one split in file order (all records when ``split`` is None)."""
        if split is None:
            return list(self._records)
        self._check_split(split)
        return [r for r in self._records if r.split == split]

    def split_path(self, split: str) -> Path:
        self._check_split(split)
        return self.root / self.manifest["splits"][split]["file"]

    def tokens(self, split: str) -> np.memmap:
        """The split's bytes, shape (split_length,), uint8 with the repeat flag (`REPEAT_FLAG`)."""
        length = self.split_length(split)
        if length == 0:
            raise GoatDNAError(
                f"split {split!r} of {self.root} is empty: it has no bases (see `goatdna info`)"
            )
        path = self.split_path(split)
        if not path.is_file() or path.stat().st_size != length:
            raise GoatDNAError(
                f"{path} is missing or not {length} bytes long: prepare the data again"
            )
        return np.memmap(path, dtype=np.uint8, mode="r", shape=(length,))

    def verify(self) -> None:
        """Re-hash every record; raise GoatDNAError naming the first file/record that differs.

        File sizes are checked for all splits first (cheap), then every record is re-hashed.
        """
        present = [s for s in SPLITS if s in self.manifest["splits"]]
        for split in present:
            length = self.split_length(split)
            path = self.split_path(split)
            if not path.is_file():
                raise GoatDNAError(f"verify: {path} is missing")
            if path.stat().st_size != length:
                raise GoatDNAError(
                    f"verify: {path} is {path.stat().st_size} bytes, the manifest says {length}"
                )
        for split in present:
            length = self.split_length(split)
            if length == 0:
                continue
            path = self.split_path(split)
            data = np.memmap(path, dtype=np.uint8, mode="r", shape=(length,))
            for rec in self.records(split):
                digest = hashlib.sha256()
                for lo in range(rec.offset, rec.offset + rec.length, HASH_BLOCK):
                    hi = min(rec.offset + rec.length, lo + HASH_BLOCK)
                    digest.update(data[lo:hi].data)
                if digest.hexdigest() != rec.sha256:
                    raise GoatDNAError(
                        f"verify: record {rec.name}:{rec.start}-{rec.end} in {path.name} "
                        "does not match its sha256: the file is corrupt, prepare it again"
                    )
            del data
