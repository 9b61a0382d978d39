"""`goatdna embed`: a full disk at a .zarr output, then --resume."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import assert_ok, assert_one_error_line, invoke, random_sequences

pytestmark = pytest.mark.usefixtures("one_thread")


def test_embed_zarr_disk_full_leaves_no_temporary_and_resume_is_identical(
    backbone: Path, tmp_path: Path, monkeypatch
) -> None:
    import errno

    import numpy as np

    pytest.importorskip("zarr")
    import zarr

    import goatdna.inference.embed_io as embed_io

    fasta = tmp_path / "s.fa"
    fasta.write_text("".join(f">r{i}\n{s}\n" for i, s in enumerate(random_sequences(30))))
    args = ["embed", "-c", str(backbone), "--sequences", str(fasta), "--accelerator", "cpu"]
    whole, cut = tmp_path / "whole.zarr", tmp_path / "cut.zarr"
    assert_ok(invoke([*args, "--out", str(whole)]))
    write = embed_io._write_zarr

    def fills_the_disk(path: Path, arrays) -> None:
        write(path, arrays)  # the store is half on disk when the disk fills up
        raise OSError(errno.ENOSPC, "No space left on device", str(path / "embeddings"))

    monkeypatch.setattr(embed_io, "_write_zarr", fills_the_disk)
    line = assert_one_error_line(invoke([*args, "--out", str(cut)]), "disk full while writing")
    assert "--resume" in line  # "rerun the command" would be refused: the work folder is kept
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [".cut.zarr.goatdna-work", "s.fa", "whole.zarr"]
    monkeypatch.setattr(embed_io, "_write_zarr", write)
    assert_ok(invoke([*args, "--out", str(cut), "--resume"]))
    a, b = zarr.open_group(str(whole), mode="r"), zarr.open_group(str(cut), mode="r")
    assert sorted(a.array_keys()) == sorted(b.array_keys())
    for key in a.array_keys():
        assert np.array_equal(a[key][:], b[key][:])
