"""Headless runs that stall: notebooks run again and again by plain ``jupyter execute`` and by
papermill, counting the cells that started more than 5 s after the previous cell's reply (the
client missed the reply's wake-up until the cell timeout: docs/troubleshooting.md, "A headless
run stalls").

    python benchmarks/headless.py [--runs 20] [--tools jupyter-execute,papermill]
                                  [--notebooks output-widgets,plain-50,01_quickstart,...] [--timeout 15]

The notebooks: ``output-widgets`` (25 cells that each display an ipywidgets ``Output`` and print
three lines into it: the upstream reproducer, no mpinb), ``display-updates`` (the same, drawn
as mpinb's live view draws: a display updated in place), ``plain-50`` (50 plain ``%%mpijax``
cells on 2 ranks), and the tutorials by name (on 2 ranks). The table gives, for each notebook
and tool, the runs, the cells held back and the runs with one, the run time (mean, worst) and
the longest wait between a reply and the next cell. ``--timeout`` is each cell's timeout, which
a stall lasts; a tutorial's cells get at least 180 s, the time its longest cell needs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT / "tests"))
import headless  # noqa: E402  tests/support/headless.py: the runs and the check the tests make
from test_headless import plain_cells  # noqa: E402

TUTORIALS = ROOT / "mpinb" / "tutorials"
KERNEL = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}


def widget_cells(n: int, widgets: bool) -> nbformat.NotebookNode:
    """``n`` cells that each print three lines into an ``Output`` widget, or into a display that
    is updated in place (what mpinb's live view does)."""
    if widgets:
        setup = "import ipywidgets as w\nfrom IPython.display import display"
        cell = "out = w.Output()\ndisplay(out)\nwith out:\n    print('a', {i})\n    print('b')\n    print('c')"
    else:
        setup = "from IPython.display import display"
        cell = ("shown = display({{'text/plain': ''}}, raw=True, display_id=True)\ntext = ''\n"
                "for line in ('a {i}', 'b', 'c'):\n    text += line + '\\n'\n"
                "    shown.update({{'text/plain': text}}, raw=True)")
    cells = [nbformat.v4.new_code_cell(setup)] + [nbformat.v4.new_code_cell(cell.format(i=i)) for i in range(n)]
    return nbformat.v4.new_notebook(cells=cells, metadata=KERNEL)


def source_of(name: str, folder: Path) -> Path:
    """The notebook to run for ``name``, written into ``folder`` where it is made here."""
    if (TUTORIALS / f"{name}.ipynb").exists():
        return TUTORIALS / f"{name}.ipynb"
    made = {"output-widgets": lambda: widget_cells(25, True), "display-updates": lambda: widget_cells(25, False),
            "plain-50": lambda: plain_cells(50)}
    if name not in made:
        raise SystemExit(f"headless.py: no notebook {name!r}: one of {sorted(made)} or a tutorial's name")
    path = folder / f"{name}.ipynb"
    nbformat.write(made[name](), path)
    return path


def measure(name: str, tool: str, runs: int, timeout: int, folder: Path) -> dict:
    source = source_of(name, folder)
    cell_timeout = max(timeout, 180) if source.parent == TUTORIALS else timeout
    seconds, late, gaps = [], [], []
    for run in range(runs):
        started = time.monotonic()
        nb = headless.run(tool, source, folder / f"{name}-{tool}-{run}.ipynb", cell_timeout,
                          env={"MPINB_NOTEBOOK_RANKS": "2"})
        seconds.append(time.monotonic() - started)
        late.append(len(headless.late_starts(nb)))
        gaps.append(max(gap for _, gap in headless.start_gaps(nb)))
        print(f"  {name} {tool} run {run + 1}/{runs}: {seconds[-1]:.1f} s, {late[-1]} held back", flush=True)
    return {"notebook": name, "tool": tool, "runs": runs, "held": sum(late), "stalled_runs": sum(map(bool, late)),
            "mean": statistics.fmean(seconds), "worst": max(seconds), "gap": max(gaps)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--tools", default=",".join(headless.TOOLS))
    parser.add_argument("--notebooks", default="output-widgets,display-updates,plain-50")
    parser.add_argument("--timeout", type=int, default=15, help="each cell's timeout, in seconds")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="mpinb-headless-") as folder:
        for name in args.notebooks.split(","):
            for tool in args.tools.split(","):
                rows.append(measure(name, tool, args.runs, args.timeout, Path(folder)))
    print(f"\n{'notebook':24} {'tool':16} {'runs':>4} {'cells held':>10} {'runs held':>9} "
          f"{'mean s':>7} {'worst s':>7} {'longest wait s':>14}")
    for r in rows:
        print(f"{r['notebook']:24} {r['tool']:16} {r['runs']:4d} {r['held']:10d} {r['stalled_runs']:9d} "
              f"{r['mean']:7.1f} {r['worst']:7.1f} {r['gap']:14.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
