"""What `goatdna motifs` writes: ``motifs.meme``, ``seqlets.tsv`` and ``motifs.html``.

* ``motifs.meme``: every pattern's PWM in the MEME suite's *minimal* motif format (version
  line, ``ALPHABET= ACGT``, ``strands: + -``, background frequencies, then per motif ``MOTIF
  name`` and a ``letter-probability matrix: alength= 4 w= W nsites= S`` block of W rows), the
  file tomtom reads (https://meme-suite.org/meme/doc/meme-format.html). Written by
  modisco-lite's own `MEMEWriter`.
* ``seqlets.tsv``: one row per seqlet: ``sequence`` (the input's name), 0-based ``start``,
  end-exclusive ``end``, ``strand``, ``pattern``.
* ``motifs.html``: one section per pattern: its seqlet count, a logomaker logo of its mean
  contribution and one of its PWM (information content), the images embedded, so the page is
  one self-contained file.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from goatdna.analysis.motifs import BASES, Pattern

MEME_VERSION = "5"
PPM_FLOOR = 1e-3  # a probability of exactly 0 makes tomtom's log-odds infinite


def meme_text(patterns: Sequence[Pattern], background: np.ndarray) -> str:
    """The minimal-format text of ``patterns`` (rows renormalised after a small floor)."""
    from modiscolite.meme_writer import MEMEWriter, MEMEWriterMotif

    writer = MEMEWriter(
        memesuite_version=MEME_VERSION,
        motifs=[],
        alphabet=BASES,
        background_frequencies=" ".join(
            f"{b} {p:.6f}" for b, p in zip(BASES, background, strict=True)
        ),
        strands="+ -",  # the file's line is text: "strands: + -"
    )
    for pattern in patterns:
        ppm = np.maximum(pattern.ppm, PPM_FLOOR)
        ppm = ppm / ppm.sum(axis=1, keepdims=True)
        writer.add_motif(MEMEWriterMotif(pattern.name, ppm, len(pattern.seqlets), BASES))
    return writer.get_output()


def seqlet_rows(patterns: Sequence[Pattern], names: Sequence[str]) -> str:
    """``seqlets.tsv``'s text."""
    lines = ["sequence\tstart\tend\tstrand\tpattern"]
    for pattern in patterns:
        for s in sorted(pattern.seqlets, key=lambda s: (s.index, s.start)):
            lines.append(f"{names[s.index]}\t{s.start}\t{s.end}\t{s.strand}\t{pattern.name}")
    return "\n".join(lines) + "\n"


def _logo_png(matrix: np.ndarray, title: str, ylabel: str) -> str:
    """A logomaker logo of ``matrix`` (w, 4) as base64 PNG text."""
    import logomaker
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    fig, ax = plt.subplots(figsize=(max(3.0, 0.35 * len(matrix)), 1.8))
    logomaker.Logo(pd.DataFrame(matrix, columns=list(BASES)), ax=ax)
    ax.set_title(title, fontsize=9)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.set_xticks([])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def information(ppm: np.ndarray) -> np.ndarray:
    """A PWM scaled to its information content per column (bits), the usual logo height."""
    p = np.clip(ppm, 1e-9, 1.0)
    bits = 2.0 + (p * np.log2(p)).sum(axis=1, keepdims=True)
    return ppm * bits


def html_page(patterns: Sequence[Pattern], source: Path, n_sequences: int) -> str:
    """``motifs.html``: a heading, then per pattern its seqlet count and its two logos."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>goatdna motifs</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}"
        "img{display:block;margin:.3em 0}section{border-top:1px solid #ccc;padding:.5em 0}"
        "</style></head><body>",
        f"<h1>Motifs of {html.escape(source.name)}</h1>",
        f"<p>TF-MoDISco (modisco-lite) over {n_sequences} sequence(s): {len(patterns)} "
        "pattern(s). <code>pos_*</code> raise the explained output, <code>neg_*</code> lower "
        "it. The PWMs are in <code>motifs.meme</code>, the seqlets in <code>seqlets.tsv</code>.</p>",
    ]
    if not patterns:
        parts.append(
            "<p><b>No pattern was found</b>: no cluster of seqlets passed modisco's thresholds.</p>"
        )
    for pattern in patterns:
        title = f"{pattern.name}: {len(pattern.seqlets)} seqlets"
        contribution = _logo_png(
            pattern.contribution, f"{pattern.name} contribution", "contribution"
        )
        pwm = _logo_png(information(pattern.ppm), f"{pattern.name} PWM", "bits")
        parts.append(
            f"<section id='{pattern.name}'><h2>{html.escape(title)}</h2>"
            f"<img alt='{pattern.name} contribution logo' src='data:image/png;base64,{contribution}'>"
            f"<img alt='{pattern.name} PWM logo' src='data:image/png;base64,{pwm}'></section>"
        )
    parts.append("</body></html>\n")
    return "\n".join(parts)
