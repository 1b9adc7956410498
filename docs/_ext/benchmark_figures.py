"""The performance figures, drawn at build time from the benchmarks' numbers in docs/data/*.csv.

Each file holds one figure: ``# key: value`` lines first (title, ylabel, scale: linear or log,
source: which benchmark and runs; reference: a value drawn as a dashed line, such as 1 for a
ratio to raw mpi4py), then rows of ``case,series,low,high``. A measurement taken once has
low == high; one taken in several runs has the lowest and highest seen. Each case is a group
of bars, one per series, drawn to ``low`` with a line up to ``high``. The figure is written to
``_generated/figures/NAME.svg`` in the source folder, where a page shows it with
``{figure} /_generated/figures/NAME.svg``.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import pathlib

DATA = "data"
OUT = pathlib.Path("_generated") / "figures"


@dataclasses.dataclass
class Table:
    meta: dict
    rows: list  # (case, series, low, high)

    def cases(self) -> list:
        return list(dict.fromkeys(r[0] for r in self.rows))

    def series(self) -> list:
        return list(dict.fromkeys(r[1] for r in self.rows))


def read(path: pathlib.Path) -> Table:
    """One data file: its ``# key: value`` header and its rows, checked."""
    meta, body = {}, []
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            key, _, value = line[1:].partition(":")
            meta[key.strip()] = value.strip()
        elif line.strip():
            body.append(line)
    missing = {"title", "ylabel", "scale", "source"} - meta.keys()
    if missing:
        raise ValueError(f"{path.name}: no {', '.join(sorted(missing))} in its header")
    reader = csv.reader(io.StringIO("\n".join(body)))
    if next(reader) != ["case", "series", "low", "high"]:
        raise ValueError(f"{path.name}: the columns must be case,series,low,high")
    rows = []
    for n, (case, series, low, high) in enumerate(reader, start=2):
        if float(low) > float(high):
            raise ValueError(f"{path.name}, row {n}: low {low} is above high {high}")
        rows.append((case, series, float(low), float(high)))
    return Table(meta, rows)


def draw(table: Table, out: pathlib.Path) -> None:
    """A grouped bar chart of one table, as SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "mpinb"  # the same file for the same numbers
    cases, series = table.cases(), table.series()
    values = {(c, s): (lo, hi) for c, s, lo, hi in table.rows}
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for i, name in enumerate(series):
        xs = [k + (i - (len(series) - 1) / 2) * width for k, c in enumerate(cases) if (c, name) in values]
        spans = [values[(c, name)] for c in cases if (c, name) in values]
        bars = ax.bar(xs, [lo for lo, _ in spans], width * 0.9, label=name)
        ranged = [(x, lo, hi) for x, (lo, hi) in zip(xs, spans, strict=True) if hi > lo]
        if ranged:
            colour = bars.patches[0].get_facecolor()
            ax.vlines([x for x, _, _ in ranged], [lo for _, lo, _ in ranged], [hi for _, _, hi in ranged],
                      colors=[colour], linewidth=2.5)
    if "reference" in table.meta:
        ax.axhline(float(table.meta["reference"]), color="0.3", linestyle="--", linewidth=1)
    ax.set_yscale(table.meta["scale"])
    ax.set_xticks(range(len(cases)), cases, fontsize=8)
    ax.set_ylabel(table.meta["ylabel"])
    ax.set_title(table.meta["title"], fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.grid(axis="y", alpha=0.3)
    fig.text(0.01, 0.01, table.meta["source"] + "; a line above a bar: the highest of the runs",
             fontsize=6, color="0.35")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)


def draw_all(srcdir: pathlib.Path) -> list:
    """Every data file drawn; returns the figures' paths."""
    written = []
    for path in sorted((srcdir / DATA).glob("*.csv")):
        out = srcdir / OUT / f"{path.stem}.svg"
        draw(read(path), out)
        written.append(out)
    return written


def _builder_inited(app) -> None:
    draw_all(pathlib.Path(app.srcdir))


def setup(app):
    app.connect("builder-inited", _builder_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
