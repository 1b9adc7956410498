"""The workshop notebooks, executed headless on 2 ranks with the tools users use (plain
``jupyter execute`` and papermill, half of them each); their text renderings checked, and that no
cell waited on the client (tests/support/headless.py).

Each executed notebook is saved to tests/artifacts/notebooks/, where the documentation site's
build takes it (docs/conf.py): the site shows the outputs of this run, and CI runs no notebook
twice.
"""

import os
import re
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient
from support import headless

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "mpinb" / "tutorials"  # what the package ships
TWINS = ROOT / "notebooks"  # their jupytext twins, for readable diffs
EXECUTED = ROOT / "tests" / "artifacts" / "notebooks"  # read by docs/conf.py
#: which tool runs each tutorial (the long notebook of plain cells runs under both: test_headless.py)
TOOL = {"01_quickstart": "jupyter-execute", "02_debugging_transpose": "papermill", "03_pencil_fft": "jupyter-execute",
        "04_jax_native": "papermill", "05_distributed_cg": "jupyter-execute", "06_hangs": "papermill"}
#: seconds each cell may take (the longest, a restart after a hang, takes about 15 s)
CELL_TIMEOUT = 180


def execute(name):
    stem = name.removesuffix(".ipynb")
    # whole or not at all: .ci/run builds the site when all six are there
    partial = EXECUTED.parent / "notebooks-partial" / name
    nb = headless.run(TOOL[stem], NOTEBOOKS / name, partial, CELL_TIMEOUT, env={"MPINB_NOTEBOOK_RANKS": "2"})
    assert headless.late_starts(nb) == [], f"{TOOL[stem]} held cells back (cell index, seconds late)"
    assert widget_outputs(nb) == [], "finished cells keep widget views (broken after a kernel restart)"
    EXECUTED.mkdir(parents=True, exist_ok=True)
    os.replace(partial, EXECUTED / name)
    return nb


def widget_outputs(nb) -> list[int]:
    """The code cells with an output that is a widget view."""
    return [i for i, cell in enumerate(code_cells(nb)) for o in cell.get("outputs", [])
            if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]


def texts(cell):
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append(o["text"])
        elif "data" in o and "text/plain" in o["data"]:
            out.append(o["data"]["text/plain"])
        elif o.get("output_type") == "error":
            out.append(f"{o['ename']}: {o['evalue']}")
    return "\n".join(out)


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def assert_each_message_once(nb) -> int:
    """In every %%mpijax view of the notebook: no two rank groups say the same thing, no line
    is repeated under several groups, each layout finding appears once. Returns the views seen."""
    views = 0
    for cell in code_cells(nb):
        for o in cell.get("outputs", []):
            text = o.get("data", {}).get("text/plain", "")
            if not text.split(",")[0].endswith(" ranks") and not text.startswith("1 rank,"):
                continue
            views += 1
            blocks, current = {}, None
            for line in text.splitlines():
                if line.startswith("[rank"):
                    current = line
                    blocks[current] = []
                elif current and line.startswith("  "):
                    blocks[current].append(line)
                else:
                    current = None
            bodies = ["\n".join(b) for b in blocks.values()]
            assert len(set(bodies)) == len(bodies), text
            # the groups' own lines (values, errors, comparisons), not the printed text inside them
            # (a picture's line names its size and scale; the pictures themselves differ)
            shared = [ln for b in blocks.values() for ln in b if ln.startswith("  ") and not ln.startswith("   ")
                      and not ln.strip().endswith(":") and not ln.startswith("  picture ")]
            repeated = {ln for ln in shared if shared.count(ln) > 1}
            assert not repeated, (repeated, text)
            findings = [ln for ln in text.splitlines() if ln.startswith(("error [", "warning [", "info ["))]
            assert len(findings) == len(set(findings)), text
    return views


@pytest.mark.parametrize("name", ["01_quickstart", "02_debugging_transpose", "03_pencil_fft", "04_jax_native",
                                  "05_distributed_cg", "06_hangs"])
def test_paired_sources_are_in_sync(name):
    a = jupytext.read(TWINS / f"{name}.py")
    b = jupytext.read(NOTEBOOKS / f"{name}.ipynb")
    assert [c.source for c in a.cells] == [c.source for c in b.cells], f"run: jupytext --sync notebooks/{name}.py"


def test_quickstart():
    nb = execute("01_quickstart.ipynb")
    assert assert_each_message_once(nb) >= 4
    cells = code_cells(nb)
    hello = texts(cells[1])
    assert "[rank 0]" in hello and "[rank 1]" in hello  # x differs by rank
    # what they printed differs only by each rank's own number: said once, the number marked
    assert "[ranks 0-1]\n  stdout:\n      hello from rank \u27e80-1\u27e9 of 2" in hello, hello
    shown = texts(cells[2])
    assert "total: float32[4]" in shown and "everyone: float32[2,4]" in shown
    only0 = texts(cells[3])
    assert "[rank 0]" in only0 and "[rank 1]" not in only0.split("only rank")[-1]
    failing = texts(cells[4])
    assert "1 failed (rank 1)" in failing and "error: ValueError: rank 1 refuses" in failing
    assert "jit == eager" in texts(cells[5])


def test_debugging_transpose():
    nb = execute("02_debugging_transpose.ipynb")
    assert assert_each_message_once(nb) >= 3
    cells = code_cells(nb)
    seed = texts(cells[1])
    assert "jit == eager" in seed and "ok: True" in seed and "[non-row-major]" not in seed
    assert 'custom_call_target="mpinb_alltoall"' in texts(cells[2])
    unconstrained = texts(cells[3])
    assert "warning [unconstrained] ranks 0-1" in unconstrained
    assert unconstrained.count("[unconstrained]") == 1  # each distinct message once, with its ranks
    like_gpu = texts(cells[4])
    assert "jit != eager" in like_gpu and "error [non-row-major] ranks 0-1" in like_gpu
    assert like_gpu.count("[non-row-major]") == 1
    assert "compare: z: jit != eager" in like_gpu


def test_pencil_fft():
    nb = execute("03_pencil_fft.ipynb")
    assert assert_each_message_once(nb) >= 2
    cells = code_cells(nb)
    assert "[ranks 0-1]" in texts(cells[1]) and "rank ⟨0-1⟩: grid position (⟨0-1⟩, 0) of 2 x 1" in texts(cells[1])
    run = texts(cells[3])
    assert "distributed fft3d" in run
    error = float(run.split("max error ")[1].split()[0])
    assert error < 1e-2
    assert "jit == eager" in run or "jit ~ eager" in run
    everything = "\n".join(texts(c) for c in cells)
    assert "divergent" not in everything  # gather: the root's result shape differs by design
    pictures = cells[4]
    html = "\n".join(o["data"].get("text/html", "") for o in pictures.outputs if "data" in o)
    assert html.count("data:image/png;base64,") >= 4  # two slices on each of two ranks


def test_tracebacks_name_cells_by_their_prompts_through_reruns_and_restarts():
    """Executed by plain nbclient as a notebook front end runs it: each failing %%mpijax cell's
    traceback says ``Cell In[N]`` with the prompt number the notebook shows for that cell, for
    a first cell, the same cell run again, after ``%mpijax restart`` and after a kernel restart
    (where the count starts again at 1). The error under the view is one line."""
    failing = nbformat.v4.new_code_cell("%%mpijax --no-hlo\nx = rank\nraise ValueError('bad on every rank')")
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%load_ext mpinb\n%mpijax start -n 2"),
        nbformat.v4.new_code_cell("%%mpijax --setup\nfrom mpi4py import MPI\nrank = MPI.COMM_WORLD.Get_rank()"),
        failing, nbformat.v4.new_code_cell("%mpijax restart"), nbformat.v4.new_code_cell("%mpijax stop")])
    client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3", allow_errors=True)
    seen = []

    def run(index):
        cell = client.execute_cell(nb.cells[index], index)
        errors = ["\n".join(o["traceback"]) for o in cell.outputs if o.get("output_type") == "error"]
        seen.append((cell.execution_count, "\n".join([texts(cell), *errors])))

    with client.setup_kernel():
        for index in (0, 1, 2, 2, 3, 2, 4):
            run(index)
    with client.setup_kernel():  # a kernel started afresh, as "Restart Kernel" does
        for index in (0, 1, 2, 4):
            run(index)
    failures = [(count, text) for count, text in seen if "bad on every rank" in text]
    assert [count for count, _ in failures] == [3, 4, 6, 3], [c for c, _ in seen]
    for count, text in failures:
        assert f"Cell In[{count}], line 3" in text and text.count("Cell In[") == 1, text  # grouped: once
        assert "HTML object" not in text, text  # the live area leaves nothing behind
        assert text.strip().splitlines()[-1] == ("CellFailed: ranks 0-1 failed (see the view above; the whole "
                                                 "result is in _mpijax)"), text
    assert "the engines' variables are gone, 1 --setup cell replayed" in seen[4][1], seen[4]


def test_jax_native():
    nb = execute("04_jax_native.ipynb")
    assert assert_each_message_once(nb) >= 4
    cells = code_cells(nb)
    assert "[ranks 0-1]" in texts(cells[1]) and "rank ⟨0-1⟩: process ⟨0-1⟩ of 2, devices 2" in texts(cells[1])
    assert "mpinb_ok: True" in texts(cells[2]) and "jit == eager" in texts(cells[2])
    native = texts(cells[3])
    assert "jax_ok: True" in native
    assert "info [relayout] ranks 0-1: XLA copies 384 B around a collective at Cell In[4]:4" in native
    assert "y: float32[12,16] in 2 blocks over ranks 0-1" in native and "  rows 6:12  rank 1" in native, native
    assert "y[0:6, :]: jit == eager" in native and "y[6:12, :]: jit == eager" in native, native
    assert "both_ok: True" in texts(cells[4])
    side_by_side = texts(cells[5])
    assert "mpinb alltoall : equals numpy True" in side_by_side
    assert "jax all_to_all : equals numpy True" in side_by_side
    assert "mpinb in shard_map: equals numpy True" in side_by_side
    pulled = texts(cells[6])
    assert "pulled (12, 16) equals A.T: True" in pulled
    assert "picture y_global: 12x16 values, colour scale 0 to 191" in pulled, pulled
    stalled = texts(cells[7])
    assert "rank 0 is blocked inside a jitted collective and cannot be interrupted" in stalled
    assert ("still running, waits in jit(<lambda>) (all-to-all over 2 devices) at Cell In[8], line 3; "
            "rank 1 finished the cell without calling it") in stalled, stalled


def test_distributed_cg():
    nb = execute("05_distributed_cg.ipynb")
    assert assert_each_message_once(nb) >= 3
    cells = code_cells(nb)
    solve = texts(cells[2])
    assert "|A x - b| over all ranks below 1e-12: True" in solve
    assert "compare: x: jit ~ eager" in solve or "compare: x: jit == eager" in solve, solve
    assert "jit != eager" not in solve, solve  # the lesson shows no false alarm
    assert "[rank 0]" in solve and "[rank 1]" in solve and "my_residual: float64[]" in solve  # side by side
    gradient = texts(cells[3])
    assert "x equals numpy: True" in gradient and "grad equals numpy: True" in gradient
    assert "jax cg equals numpy: True" in texts(cells[4]) and "jit == eager: x_jax" in texts(cells[4])


def test_hangs():
    """Each hang of the lesson ends by itself (no timeout is set) with its diagnosis, and its
    fix runs in the next cell: the ranks freed where they wait in receives (the engines keep
    their variables), else the engines restarted and the setup cell replayed."""
    nb = execute("06_hangs.ipynb")
    cells = code_cells(nb)
    # the fixes: every rank runs the same collectives (rank 0 took the allreduce from JAX's cache,
    # rank 1 compiled it): no finding
    for fixed in (texts(cells[i]) for i in (3, 5, 7, 9, 11, 13)):
        assert "0 layout findings" in fixed and "divergent" not in fixed, fixed
    ring, ring_fixed = texts(cells[2]), texts(cells[3])
    assert ("deadlock: rank 0 waits to receive from rank 1 (line 3), rank 1 to receive from rank 0 (line 3)"
            in ring), ring
    assert "ranks 0-1 were freed where they waited" in ring and "replayed" not in ring and "CellFailed" not in ring
    assert "rank \u27e80-1\u27e9 got" in ring_fixed or "rank 0 got 1 from rank 1" in ring_fixed, ring_fixed
    swap, swap_fixed = texts(cells[4]), texts(cells[5])
    assert "swapped 16 values" in swap and "swapped 4000000 values" not in swap
    assert "1 --setup cell replayed" in swap, swap  # a send under way cannot be taken back
    # the finished view tells the cell's end: no rank still running, no start's progress bar,
    # the whole time in the header (the restart's share said)
    assert "running" not in swap and "engines" not in swap.split("\n")[0].split("s of it")[0], swap
    assert "restarted: ranks 0-1" in swap and "state: restarted" in swap, swap
    assert not [o for o in cells[4].outputs if "ready:" in o.get("data", {}).get("text/plain", "")], swap
    header = swap[swap.index("2 ranks, "):].split(",")[1]
    total, restart = float(header.split()[0]), float(header.split("(")[1].split()[0])
    assert total > restart > 0, header
    assert ("deadlock: rank 0 waits for rank 1 to receive its send (line 6), rank 1 for rank 0 to receive its "
            "send (line 6)") in swap, swap
    assert "swapped 4000000 values" in swap_fixed and "deadlock" not in swap_fixed
    branch = texts(cells[6])
    assert "deadlock: rank 0 waits in allreduce (line 3); rank 1 left the cell without calling it" in branch, branch
    assert "rank 0 was freed where it waited" in branch and "replayed" not in branch, branch
    freed = r"state: freed where it waited, at Cell In\[\d+\], line 3 \(its cell failed there\)"
    assert re.search(freed, branch), branch
    # the deadlock's sentence says what ran differs: no [divergent] finding says it again, and
    # rank 0's error is said once (its traceback without the same last line)
    assert "divergent" not in branch and branch.count("withdrawn before it ran") == 1, branch
    assert "total 1.0" in texts(cells[7])
    tag = texts(cells[8])
    assert ("deadlock: rank 1 waits to receive with tag 2 from rank 0 (line 5); rank 0 left the cell without "
            "sending it") in tag, tag
    assert "rank 1 dropped a message of 12 B from rank 0 (tag 1)" in tag, tag
    assert "received [1. 1. 1.]" in texts(cells[9])
    root = texts(cells[10])
    assert "checked mode: ranks disagree on the collective" in root and "note: deadlock" not in root, root
    assert "rank 0 called bcast float32[] root 0 but rank 1 called bcast float32[] root 1" in root, root
    assert "value 0.0" in texts(cells[11])
    own, own_fixed = texts(cells[12]), texts(cells[13])
    assert ("deadlock: rank 0 waits to receive from rank 1 (line 3), rank 1 to receive from rank 0 (line 3)"
            in own), own
    assert "were freed where they waited" in own and "replayed" not in own, own
    assert "rank 0 got 1 from rank 1" in own_fixed or "rank \u27e80-1\u27e9 got" in own_fixed, own_fixed
