"""Draw docs/report_preview.png from a report folder: the README's and getting started's picture.

    goatdna demo --out demo
    python docs/report_preview.py demo/report [--out docs/report_preview.png]

The picture is the report's own figures, unchanged, under its summary table (val NLL with its
95% bootstrap interval, formatted as report.md formats it): NLL vs context length with its error
bars, the training curves, the first GOAT run's prior curves and the GC trajectories. It is
quantised to a 256-colour palette so that it stays small (under 150 KB) in the repository.
Regenerate it from a fresh demo run whenever the report's figures change, so the picture and the
text around it (docs/getting-started.md) describe the same run.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import pandas as pd
from PIL import Image

from goatdna.analysis.report_frames import SUMMARY_FORMATS, formatted, with_intervals

ROOT = Path(__file__).resolve().parents[1]
TABLE_COLUMNS = ["model", "positional", "params", "val_nll", "bits_per_base", "gc_mae",
                 "gc_pearson", "base_accuracy"]  # fmt: skip
MAX_BYTES = 150_000


def _panel(report: Path, pattern: str) -> Path:
    found = sorted(report.glob(pattern))
    if not found:
        raise SystemExit(f"error: {report} has no {pattern}: pass a `goatdna report` folder")
    return found[0]


def draw(report: Path, out: Path) -> int:
    """Write the preview of ``report`` to ``out``; return its size in bytes."""
    summary = pd.read_csv(report / "summary.csv")
    shown = summary[[*TABLE_COLUMNS, "val_nll_low", "val_nll_high"]]  # the NLL's interval
    header, *rows = formatted(with_intervals(shown, SUMMARY_FORMATS), SUMMARY_FORMATS)
    header = [h.replace("val_nll", "val_nll (95% CI)") for h in header]
    panels = [
        _panel(report, "nll_vs_context.png"),
        _panel(report, "training_curves.png"),
        _panel(report, "prior_curves_*.png"),
        _panel(report, "gc_trajectories.png"),
    ]
    fig = plt.figure(figsize=(13.0, 10.4))
    grid = fig.add_gridspec(3, 2, height_ratios=[0.18, 1.0, 1.0], hspace=0.06, wspace=0.03)
    table_ax = fig.add_subplot(grid[0, :])
    table_ax.axis("off")
    table = table_ax.table(cellText=rows, colLabels=header, loc="center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(9.5)
    table.scale(1.0, 1.5)
    table.auto_set_column_width(list(range(len(header))))  # the interval column is the widest
    table_ax.set_title("goatdna report: summary.csv (NLL in nats/base; GC as fractions)", pad=14)
    for i, path in enumerate(panels):
        ax = fig.add_subplot(grid[1 + i // 2, i % 2])
        ax.imshow(mpimg.imread(path), interpolation="lanczos")
        ax.axis("off")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=95, bbox_inches="tight")
    plt.close(fig)
    buffer.seek(0)
    image = Image.open(buffer).convert("RGB").quantize(colors=256, dither=Image.Dither.NONE)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    image.save(tmp, format="PNG", optimize=True)
    tmp.replace(out)
    return out.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="a `goatdna report` folder, e.g. demo/report")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "report_preview.png")
    args = parser.parse_args()
    size = draw(args.report, args.out)
    print(f"wrote {args.out} ({size:,} bytes)")
    if size > MAX_BYTES:
        print(
            f"note: over {MAX_BYTES:,} bytes; lower the dpi in draw() to keep the repository small"
        )


if __name__ == "__main__":
    main()
