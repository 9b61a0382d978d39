"""The list of commands, in the order `goatdna --help` shows them.

Each command module defines one function with Typer annotations (its name, with ``_`` as ``-``,
is the command's); add new commands here. The modules import only typer and light library
definitions at the top, so importing them all keeps `goatdna --help` instant.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from goatdna.cli.attention import attention
from goatdna.cli.attribute import attribute
from goatdna.cli.check_precision import check_precision
from goatdna.cli.demo import demo
from goatdna.cli.embed import embed
from goatdna.cli.eval_variants import eval_variants
from goatdna.cli.evaluate import evaluate
from goatdna.cli.export import export
from goatdna.cli.finetune import finetune
from goatdna.cli.generate import generate
from goatdna.cli.info import info
from goatdna.cli.make_task import make_task
from goatdna.cli.make_variant_task import make_variant_task
from goatdna.cli.model_info import model_info
from goatdna.cli.motifs import motifs
from goatdna.cli.mutagenesis import mutagenesis
from goatdna.cli.predict import predict
from goatdna.cli.prepare import prepare
from goatdna.cli.probe_recall import probe_recall
from goatdna.cli.report import report
from goatdna.cli.score_track import score_track
from goatdna.cli.score_variants import score_variants
from goatdna.cli.train import train

COMMANDS: list[Callable[..., Any]] = [
    demo,
    prepare,
    info,
    model_info,
    train,
    generate,
    evaluate,
    report,
    export,
    embed,
    probe_recall,
    score_variants,
    eval_variants,
    score_track,
    check_precision,
    mutagenesis,
    attention,
    attribute,
    motifs,
    make_task,
    make_variant_task,
    finetune,
    predict,
]
