"""The divergence finding on a real 4-rank cluster compares what the ranks ran in the cell, not
what each compiled: the hangs tutorial's fixes, whose computation some ranks compiled and one
took from JAX's cache, get no finding; a collective only some ranks call is known whether it
was compiled in the cell or taken from the cache (the proven deadlock says it, once). (The same
on 2 ranks: test_notebooks.py's run of 06_hangs; the analysis alone: test_divergence.py.)"""

from pathlib import Path

import jupytext
import pytest
from support.three_ranks import NO_HANG
from support.topology import make_cluster

from mpinb.view.hlo_words import finding_message

TUTORIAL = Path(__file__).resolve().parent.parent / "notebooks" / "06_hangs.py"


def tutorial_cell(starts: str) -> str:
    """The code of the tutorial's %%mpijax cell whose first line after the magic is ``starts``,
    without the magic line (the cluster runs cells as code)."""
    for cell in jupytext.read(TUTORIAL).cells:
        lines = cell.source.splitlines()
        if cell.cell_type == "code" and lines and lines[0].startswith("%%mpijax") and lines[1:2] == [starts]:
            return "\n".join(lines[1:])
    raise LookupError(starts)


@pytest.fixture(scope="module")
def cluster():
    c = make_cluster(4).start()
    assert c.run_cell(tutorial_cell("import jax.numpy as jnp"), setup=True).ok
    yield c
    c.stop()


def divergent(result) -> list[str]:
    return [finding_message(w) for w in result.warnings if w.kind == "divergent"]


def test_the_tutorial_s_fixed_branch_is_no_finding(cluster):
    """Rank 0 compiled the allreduce in the hang; in the fix it takes it from JAX's cache and
    ranks 1-3 compile it: the same collective runs on every rank."""
    hang = cluster.run_cell(tutorial_cell("if rank == 0:"), timeout=NO_HANG)
    assert hang.deadlock is not None, hang.text()
    fixed = cluster.run_cell(tutorial_cell("total = mpi.allreduce(jnp.float32(rank), op=MPI.SUM)"))
    assert fixed.ok and divergent(fixed) == [], fixed.text()
    assert "total 6.0" in fixed.stdout[0]
    # the hang itself: what ran differs, said once, by the deadlock's sentence (no finding repeats it)
    assert divergent(hang) == [] and hang.deadlock.left == [1, 2, 3], hang.text()


def test_the_tutorial_s_fixed_root_is_no_finding(cluster):
    wrong = cluster.run_cell(tutorial_cell("value = mpi.bcast(jnp.float32(rank), root=rank)"), timeout=NO_HANG)
    assert not wrong.ok
    (finding,) = divergent(wrong)  # every rank called it, with its own root
    assert "rank 0 called bcast float32[] root 0 but rank 1 called bcast float32[] root 1" in finding, finding
    fixed = cluster.run_cell(tutorial_cell("value = mpi.bcast(jnp.float32(rank), root=0)"))
    assert fixed.ok and divergent(fixed) == [], fixed.text()


def test_a_collective_only_some_ranks_call_is_found_from_the_cache_too(cluster):
    """Compiled on every rank in one cell, called by rank 0 alone in the next (nothing compiled
    there): still found, with the ranks that finished without it."""
    assert cluster.run_cell("import jax\ntotal_of = jax.jit(lambda v: mpi.allreduce(v, op=MPI.SUM))\n"
                            "first = total_of(jnp.ones(2))").ok
    res = cluster.run_cell("if rank == 0:\n    again = total_of(jnp.ones(2))", timeout=NO_HANG)
    assert not any(rec.hlo for rec in res.records.values() if rec), "nothing was compiled in this cell"
    # what rank 0 ran is known though nothing was compiled, and said once: by the deadlock's sentence
    assert [run["op"] for run in res.records[0].ran["runs"]] == ["allreduce"], res.records[0].ran
    assert res.deadlock is not None and res.deadlock.left == [1, 2, 3] and divergent(res) == [], res.text()
