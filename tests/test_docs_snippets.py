"""Every code block of the documentation runs (tests/support/doc_blocks.py): each ```` ```python ````
block as a program of its own in a fresh Python (one rank), and the ```` ```ipython ```` blocks of a
page in order in one IPython shell, as the cells of one notebook, on a real cluster of 2 ranks
(started first unless the page starts one, stopped after)."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

import pytest
from support import doc_blocks
from support.shell import ipython_shell

PYTHON = [(page, i, code) for page in doc_blocks.pages() for i, code in enumerate(doc_blocks.blocks(page, "python"))]
NOTEBOOKS = [page for page in doc_blocks.pages() if doc_blocks.blocks(page, "ipython")]


@pytest.mark.parametrize(("page", "index", "code"), PYTHON,
                         ids=[f"{p.relative_to(doc_blocks.ROOT).as_posix()}-{i}" for p, i, _ in PYTHON])
def test_a_python_block_runs_as_a_program(page, index, code, tmp_path):
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          check=False)
    said = done.stdout[-2000:] + done.stderr[-3000:]
    assert done.returncode == 0, f"{page.name}, python block {index}:\n{code}\n{said}"


@pytest.mark.parametrize("page", NOTEBOOKS, ids=[p.relative_to(doc_blocks.ROOT).as_posix() for p in NOTEBOOKS])
def test_the_ipython_blocks_of_a_page_run_as_a_notebook(page):
    shell = ipython_shell()
    cells = doc_blocks.blocks(page, "ipython")
    if not any("%mpijax start" in cell for cell in cells):
        cells = ["%load_ext mpinb\n%mpijax start -n 2", *cells]
    try:
        for index, cell in enumerate(cells):
            with contextlib.redirect_stdout(io.StringIO()) as out:
                result = shell.run_cell(cell)
            said = f"{out.getvalue()[-2000:]}\n{result.error_in_exec!r}"
            assert result.success, f"{page.name}, cell {index}:\n{cell}\n{said}"
    finally:
        with contextlib.redirect_stdout(io.StringIO()):
            shell.run_line_magic("mpijax", "stop")
