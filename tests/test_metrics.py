"""One definition each (issue 42 item 5): one bootstrap interval, in `goatdna.metrics`, and one
JSON writer with one NaN policy, `goatdna.formats.json_text`; a second copy anywhere else in
goatdna fails here.

Issue 42 found two percentile intervals (`goatdna.metrics` and the variant benchmark's own) and
four NaN-in-JSON policies (null, bare ``NaN`` tokens, ``Infinity`` kept, raising). This scan
stops a module writing its own again.

The package scanned is the imported ``goatdna`` (``goatdna.__file__``), so running this file with
another checkout first on ``PYTHONPATH`` checks that tree.
"""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pytest

import goatdna

PACKAGE = Path(goatdna.__file__).resolve().parent

INTERVAL_HOME = "metrics.py"
JSON_HOME = "formats.py"

QUANTILE_CALLS = {"quantile", "percentile", "nanquantile", "nanpercentile"}
"""How a bootstrap interval is cut from its resampled values: such a call outside metrics.py is
a second interval (variant_metrics._interval was one)."""

ALLOWED_QUANTILES = {
    # the GC tertile thresholds of a task's training windows: no interval
    ("data_prep/tasks.py", "_task_files"),
}

ALLOWED_JSON = {
    # keys and fingerprints hashed or compared, never written as a JSON document: their bytes
    # name the cache entries and calibrations already on disk
    ("training/probe.py", "probe_features"),
    ("inference/calibration.py", "save"),
    ("inference/calibration.py", "default_null_path"),
    # plain-type normalisation of settings for comparison (no file written from it)
    ("analysis/report.py", "report_inputs"),
    ("analysis/report.py", "report_is_current"),
    # shipped verbatim with `goatdna export` as HF remote code: it cannot import goatdna; its
    # vocabulary holds no float
    ("hf/tokenization_goatdna.py", "save_vocabulary"),
}


def _functions_with_parents(tree: ast.Module) -> list[tuple[ast.AST, str]]:
    """Every node with the name of the innermost function (or ``<module>``) holding it."""
    out: list[tuple[ast.AST, str]] = []

    def visit(node: ast.AST, owner: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = owner
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = child.name
            out.append((child, name))
            visit(child, name)

    visit(tree, "<module>")
    return out


def _called(node: ast.AST) -> tuple[str, str] | None:
    """(object, attribute) of a call like ``json.dumps(...)`` / ``np.quantile(...)``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        base = node.func.value
        return (base.id if isinstance(base, ast.Name) else "", node.func.attr)
    return None


def scan(package: Path) -> tuple[list[str], set[tuple[str, str]]]:
    """(offenders outside the homes, allowed exceptions seen)."""
    offenders: list[str] = []
    seen: set[tuple[str, str]] = set()
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, owner in _functions_with_parents(tree):
            line = getattr(node, "lineno", 0)
            if isinstance(node, ast.FunctionDef) and rel != JSON_HOME and "json_safe" in node.name:
                offenders.append(f"goatdna/{rel}:{line}: {node.name} (a NaN-in-JSON policy)")
            if isinstance(node, ast.keyword) and node.arg == "allow_nan" and rel != JSON_HOME:
                offenders.append(f"goatdna/{rel}:{line}: allow_nan= (a NaN-in-JSON policy)")
            called = _called(node)
            if called is None:
                continue
            if called[0] == "json" and called[1] in ("dump", "dumps") and rel != JSON_HOME:
                if (rel, owner) in ALLOWED_JSON:
                    seen.add((rel, owner))
                else:
                    offenders.append(f"goatdna/{rel}:{line}: json.{called[1]} in {owner}")
            if called[1] in QUANTILE_CALLS and rel != INTERVAL_HOME:
                if (rel, owner) in ALLOWED_QUANTILES:
                    seen.add((rel, owner))
                else:
                    offenders.append(f"goatdna/{rel}:{line}: {called[1]} in {owner}")
    return offenders, seen


def test_intervals_and_json_are_written_only_in_their_homes() -> None:
    offenders, _ = scan(PACKAGE)
    assert not offenders, (
        "use goatdna.metrics.percentile_interval / goatdna.formats.json_text:\n"
        + "\n".join(offenders)
    )


def test_the_allowed_exceptions_still_exist() -> None:
    """An exception that no longer exists is removed from its list, so the lists stay true."""
    _, seen = scan(PACKAGE)
    assert seen == ALLOWED_JSON | ALLOWED_QUANTILES


def test_json_text_writes_every_non_finite_float_as_null() -> None:
    from goatdna.formats import json_text

    doc = {"a": math.nan, "b": [1.5, math.inf, (-math.inf, 2)], "c": {"d": math.nan}, "e": "NaN"}
    text = json_text(doc)
    assert (
        text
        == json.dumps(
            {"a": None, "b": [1.5, None, [None, 2]], "c": {"d": None}, "e": "NaN"}, indent=2
        )
        + "\n"
    )
    assert json.loads(text, parse_constant=lambda c: 1 / 0)["e"] == "NaN"  # strict JSON
    # without a non-finite float, the bytes are json.dumps' own
    plain = {"z": 1, "a": [0.1, True, None, "x"], "n": {"k": 2.5e-12}}
    assert json_text(plain, indent=1, sort_keys=True, end="") == json.dumps(
        plain, indent=1, sort_keys=True
    )
    assert json_text(plain, indent=None) == json.dumps(plain) + "\n"


def test_probe_sweep_json_writes_an_undefined_metric_as_null(tmp_path: Path) -> None:
    """A probe whose validation AUROC is undefined (one class) wrote a bare ``NaN`` token, which
    strict JSON readers refuse; it is ``null`` now, as in summary.json."""
    from goatdna.training.probe import ProbeChoice, ProbeSweep, SweepRow, write_sweep

    rows = [
        SweepRow(ProbeChoice(1, "mean"), 3, {"auroc": math.nan, "loss": 0.5}),
        SweepRow(ProbeChoice(None, "last"), 4, {"auroc": 0.75, "loss": math.inf}),
    ]
    write_sweep(tmp_path, ProbeSweep(rows, ProbeChoice(None, "last"), "auroc", True))
    text = (tmp_path / "probe_sweep.json").read_text()
    document = json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in {text}"))
    assert [(r["val_auroc"], r["val_loss"]) for r in document["rows"]] == [
        (None, 0.5),
        (0.75, None),
    ]
