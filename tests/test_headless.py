"""A long notebook of plain ``%%mpijax`` cells, run headless by plain ``jupyter execute`` and by
papermill on 2 ranks: every cell's output is there, and no cell waited on the client (the stall
of docs/how-to/headless.md, "A headless run stalls", which a live view made of ipywidgets
``Output`` areas provoked in about one run in three of 25 cells). The tutorials run the same
way in tests/test_notebooks.py."""

import nbformat
import pytest
from support import headless

CELLS = 50
#: seconds each cell may take: a plain cell takes well under one, the start about ten
CELL_TIMEOUT = 60


def plain_cells(n: int) -> nbformat.NotebookNode:
    """The start, ``n`` cells that print from every rank (a line each, and one on stderr every
    tenth), the stop."""
    cells = [nbformat.v4.new_code_cell("%load_ext mpinb\n%mpijax start -n 2")]
    for i in range(n):
        warn = "\nimport sys; print('warned', file=sys.stderr)" if i % 10 == 9 else ""
        cells.append(nbformat.v4.new_code_cell(
            f"%%mpijax --no-hlo\nfrom mpi4py import MPI\nprint('cell {i} on rank', MPI.COMM_WORLD.Get_rank()){warn}"))
    cells.append(nbformat.v4.new_code_cell("%mpijax stop"))
    return nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}})


@pytest.mark.parametrize("tool", headless.TOOLS)
def test_a_long_notebook_of_plain_cells_runs_headless_without_a_stall(tool, tmp_path):
    source = tmp_path / "plain.ipynb"
    nbformat.write(plain_cells(CELLS), source)
    nb = headless.run(tool, source, tmp_path / "executed.ipynb", CELL_TIMEOUT)
    assert headless.late_starts(nb) == [], f"{tool} held cells back (cell index, seconds late)"
    for i, cell in enumerate(nb.cells[1:-1]):
        text = "\n".join(o.get("data", {}).get("text/plain", "") for o in cell.outputs)
        assert f"cell {i} on rank" in text and "1 rank" not in text, text
        assert ("warned" in text) == (i % 10 == 9), text
    assert [o for o in nb.cells[-1].outputs if "stopped" in o.get("text", "") + str(o.get("data", ""))], \
        nb.cells[-1].outputs
