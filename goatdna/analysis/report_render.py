"""report.md from templates, and report.html converted from it with markdown-it-py.

The prose lives in Markdown templates shipped with the package (``report_templates/*.md``, one per
section, filled with `string.Template`); this module only computes the values that go into them.
report.html is report.md rendered by a CommonMark parser (tables on, raw HTML off), with every
image inlined as a base64 data URI so the HTML file is self-contained. Text that comes from the
user (model names, paths, split names) is escaped or put in code spans, so it reads literally in
both files.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from goatdna.analysis.report_figures import PriorImages
from goatdna.analysis.report_frames import (
    EXTRAPOLATION_FORMATS,
    GC_FORMATS,
    RECALL_COLUMNS,
    RECALL_FORMATS,
    REPEAT_FORMATS,
    SUMMARY_FORMATS,
    extrapolation_frame,
    formatted,
    nll_difference,
    paper_frame,
    paper_pair,
    repeat_frame,
    summary_differences,
    validation_result,
    with_intervals,
)
from goatdna.analysis.report_options import ReportOptions
from goatdna.analysis.report_runs import RunData

if TYPE_CHECKING:
    import pandas as pd

TEMPLATES = "report_templates"


@dataclass
class ReportDocument:
    """Everything report.md shows, computed; `markdown_document` only formats it."""

    options: ReportOptions
    runs: Sequence[RunData]
    manifest_sha256: str
    summary: pd.DataFrame  # report_frames.summary_frame
    gc_table: pd.DataFrame  # gc_study.summary_frame
    recall: pd.DataFrame | None  # report_frames.recall_table, None when the probe was skipped
    images: Mapping[str, Path]  # "nll", "gc", optional "training" and "recall"
    priors: Sequence[PriorImages]
    warnings: Sequence[str]


def unwrap_paragraphs(text: str) -> str:
    """Join the lines of each prose paragraph: templates are wrapped for their editors, report.md
    keeps one line per paragraph. Headings, tables and images stay as they are."""

    def unwrap(block: str) -> str:
        if block.startswith(("#", "|", "!")):
            return block
        return " ".join(line.strip() for line in block.splitlines())

    return "\n\n".join(unwrap(block) for block in text.split("\n\n"))


@cache
def template(name: str) -> Template:
    """A template of ``report_templates`` (package data); Markdown ones with unwrapped prose."""
    text = (files("goatdna.analysis") / TEMPLATES / name).read_text(encoding="utf-8")
    text = text.rstrip("\n")
    return Template(unwrap_paragraphs(text) if name.endswith(".md") else text)


def fill(template_name: str, /, **values: Any) -> str:
    return template(template_name).substitute(values)


# ----------------------------------------------------------------------------- Markdown pieces


def markdown_escape(text: str) -> str:
    """Backslash-escape the characters that would end or nest a Markdown link text or cell."""
    return re.sub(r"([\\`*_\[\]()<>|#!])", r"\\\1", text)


_CELL_SPECIALS = re.compile(r"([\\`*\[\]<>|])|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def cell_escape(text: str) -> str:
    """Escape a table cell so it renders as written; intra-word underscores (val_nll) stay bare."""
    return _CELL_SPECIALS.sub(lambda m: "\\" + m.group(0), text)


def code(text: str) -> str:
    """``text`` as one Markdown code span, whatever backticks it holds."""
    fence = "`"
    while fence in text:
        fence += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_table(rows: list[list[str]]) -> str:
    header, *body = rows

    def row(cells: list[str]) -> str:
        return "| " + " | ".join(cell_escape(c) for c in cells) + " |"

    lines = [row(header), "|" + "|".join("---" for _ in header) + "|"]
    lines += [row(r) for r in body]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- sections


def _run_line(run: RunData) -> str:
    return fill(
        "run.md",
        name=code(run.name),
        scheme=run.scheme,
        checkpoint=code(str(run.checkpoint)),
        steps=run.summary.get("steps", "?"),
        device=run.summary.get("device", "?"),
        precision=run.summary.get("precision", "?"),
        train_length=run.train_length,
    )


def _paper_section(doc: ReportDocument) -> list[str]:
    pair = paper_pair(doc.runs)
    if pair is None:
        return []
    goat, rope = pair
    runs = {run.name: run for run in doc.runs}
    change = nll_difference(validation_result(runs[goat]), validation_result(runs[rope]))
    devices = {run.name: run.summary.get("device") for run in doc.runs}
    recipes = (runs[goat].recipe, runs[rope].recipe)
    table = formatted(
        paper_frame(doc.summary, goat, rope, change, devices=devices, recipes=recipes), {}
    )
    return [fill("paper.md", goat=code(goat), rope=code(rope), table=markdown_table(table))]


def _gc_section(doc: ReportDocument) -> str:
    options = doc.options
    return fill(
        "gc.md",
        prompts=options.n_prompts,
        prompt_length=options.prompt_length,
        split=code(options.gc_split),
        seed=options.seed,
        samples=options.samples_per_prompt,
        continuation_length=options.continuation_length,
        temperature=f"{options.temperature:g}",
        top_k=options.top_k or "off",
        table=markdown_table(
            formatted(with_intervals(doc.gc_table, GC_FORMATS, ".4f"), GC_FORMATS, ".4f")
        ),
        image=doc.images["gc"].name,
    )


def _recall_section(doc: ReportDocument) -> list[str]:
    if doc.recall is None:
        return []
    options = doc.options
    return [
        fill(
            "recall.md",
            trials=options.recall_trials,
            segment=options.recall_segment,
            split=code(options.gc_split),
            table=markdown_table(
                formatted(
                    with_intervals(doc.recall[RECALL_COLUMNS], RECALL_FORMATS, ".4f"),
                    RECALL_FORMATS,
                    ".4f",
                )
            ),
            image=doc.images["recall"].name,
        )
    ]


def _prior_sections(doc: ReportDocument) -> list[str]:
    return [
        fill(
            "prior.md",
            name=markdown_escape(p.name),
            layer=p.layer,
            curves=p.curves.name,
            heatmap=p.heatmap.name,
            positions=p.heatmap_positions,
        )
        for p in doc.priors
    ]


def sections(doc: ReportDocument) -> list[str]:
    """The report's sections in reading order, each a Markdown fragment with its ## heading."""
    options = doc.options
    out = []
    if doc.warnings:
        out.append(fill("warnings.md", warnings="\n\n".join(map(markdown_escape, doc.warnings))))
    out.append(
        fill(
            "summary.md",
            split=code(options.split),
            table=markdown_table(formatted(with_intervals(doc.summary, SUMMARY_FORMATS), {})),
            differences="\n\n".join(markdown_escape(line) for line in summary_differences(doc.runs))
            or "One model: nothing to compare.",
        )
    )
    out += _paper_section(doc)
    out.append(
        fill(
            "extrapolation.md",
            split=code(options.split),
            max_tokens=options.max_eval_tokens or "all",
            table=markdown_table(
                formatted(extrapolation_frame(doc.runs), EXTRAPOLATION_FORMATS, ".4f")
            ),
            image=doc.images["nll"].name,
        )
    )
    out.append(
        fill(
            "repeats.md",
            table=markdown_table(formatted(repeat_frame(doc.runs), REPEAT_FORMATS, ".4f")),
        )
    )
    if "training" in doc.images:
        out.append(fill("training.md", image=doc.images["training"].name))
    out.append(_gc_section(doc))
    out += _recall_section(doc)
    out += _prior_sections(doc)
    return out


def report_title(runs: Sequence[RunData]) -> str:
    return "goatdna report: " + " vs ".join(run.name for run in runs)


def markdown_document(doc: ReportDocument, now: _dt.datetime | None = None) -> str:
    """report.md: the title, where the numbers come from, then every section once."""
    when = (now or _dt.datetime.now(_dt.timezone.utc)).strftime("%Y-%m-%d %H:%M UTC")
    text = fill(
        "report.md",
        models=" vs ".join(markdown_escape(run.name) for run in doc.runs),
        when=when,
        data_dir=code(str(doc.options.data_dir)),
        manifest=code(doc.manifest_sha256[:16] + "..."),
        runs="; ".join(_run_line(run) for run in doc.runs),
        sections="\n\n".join(sections(doc)),
    )
    return text + "\n"


# ----------------------------------------------------------------------------- HTML


def _markdown_parser() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable("table")


def _data_uri(image_dir: Path, src: str) -> str:
    name = unquote(src)
    if Path(name).name != name:
        raise ValueError(f"report image {src!r} is not a file name in {image_dir}")
    data = base64.b64encode((image_dir / name).read_bytes()).decode("ascii")
    return f"data:image/png;base64,{data}"


def html_document(markdown: str, title: str, image_dir: Path) -> str:
    """report.html: ``markdown`` rendered by markdown-it-py, images from ``image_dir`` inlined."""
    parser = _markdown_parser()
    tokens = parser.parse(markdown)
    for token in tokens:
        for child in token.children or []:
            if child.type == "image":
                child.attrSet("src", _data_uri(image_dir, str(child.attrGet("src"))))
    body = parser.renderer.render(tokens, parser.options, {})
    return fill("page.html", title=html.escape(title), body=body.rstrip("\n")) + "\n"
