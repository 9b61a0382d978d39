"""`goatdna.data_prep.shards`: a damaged or hand-edited manifest.json is one line naming the
field, in every command that reads shards (`info`, `info --verify`, `train`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import assert_one_error_line, invoke

REPO = Path(__file__).resolve().parents[1]


def _edit_splits_missing(m):
    del m["splits"]


def _edit_length_string(m):
    m["records"][0]["length"] = str(m["records"][0]["length"])


def _edit_length_null(m):
    m["records"][0]["length"] = None


def _edit_records_empty(m):
    m["records"] = {}


def _edit_split_bogus(m):
    m["records"][1]["split"] = "bogus"


def _edit_split_total(m):
    m["splits"]["val"]["length"] += 1


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (_edit_splits_missing, "field splits "),
        (_edit_length_string, "field records[0].length"),
        (_edit_length_null, "field records[0].length"),
        (_edit_records_empty, "field records "),
        (_edit_split_bogus, "field records[1].split"),
        (_edit_split_total, "field splits.val "),
    ],
)
def test_damaged_manifest_is_one_line_naming_the_field(synthetic_shards, tmp_path, edit, field):
    data = tmp_path / "shards"
    shutil.copytree(synthetic_shards, data, ignore=shutil.ignore_patterns("*.fa", "*.fai"))
    manifest = json.loads((data / "manifest.json").read_text())
    edit(manifest)
    (data / "manifest.json").write_text(json.dumps(manifest))
    for args in (["info", data], ["info", data, "--verify"]):
        result = invoke(args)
        assert field in assert_one_error_line(result)
        assert "verified" not in result.output
    train = invoke(
        ["train", "--config", REPO / "configs" / "goat-tiny.yaml", "--data", data,
         "--out", tmp_path / "run"]
    )  # fmt: skip
    assert field in assert_one_error_line(train)
    assert not (tmp_path / "run").exists()
