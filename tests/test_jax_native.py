"""JAX's own multi-process stack on an mpinb cluster (``jax_distributed=True``): no boilerplate,
``jax.process_count()`` is the number of ranks, a ``shard_map`` transpose over the processes
equals NumPy's, the mode survives a restart and shows in the status; on 2 and 4 ranks."""

import subprocess
import sys

import numpy as np
import pytest
from support.topology import make_cluster

from mpinb import MPICluster
from mpinb.errors import EngineSetupError, PullError
from mpinb.view.hint_words import hint_words
from mpinb.view.hlo_words import finding_message
from mpinb.view.tables import jax_runtime_words

TRANSPOSE = """
import jax, numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((jax.device_count(),), ("x",))
A = np.arange({rows} * {cols}, dtype=np.float32).reshape({rows}, {cols})
mine = A.reshape(jax.process_count(), -1, {cols})[jax.process_index()]   # this process's rows
x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), mine)
transpose = jax.jit(jax.shard_map(lambda b: jax.lax.all_to_all(b, "x", 1, 0, tiled=True).T,
                                  mesh=mesh, in_specs=P("x"), out_specs=P("x")))
y = transpose(x)
whole = multihost_utils.process_allgather(y, tiled=True)
same = bool(np.array_equal(whole, A.T))
where = (jax.process_count(), jax.process_index(), jax.device_count(), jax.local_device_count())
"""


@pytest.fixture(scope="module", params=[2, 4], ids=["2 ranks", "4 ranks"])
def cluster(request):
    # where the tests run (tests/support/topology.py): tests/test_other_host.py and
    # tests/test_slurm.py rerun the stall test on another host and as a Slurm job step
    with make_cluster(request.param, jax_distributed=True) as c:
        yield c


def test_a_cell_ends_once_the_work_it_queued_ran_on_every_process(cluster):
    """The end of a cell waits for a fence on each of this process's own CPU devices
    (mpinb.engine.settle), not on process 0's: the work a cell queued is done when the next
    cell starts, on every rank."""
    code = ("import jax, jax.numpy as jnp\n"
            "slow = jax.jit(lambda a: jax.lax.fori_loop(0, 400, lambda i, b: jnp.tanh(b @ b), a))\n"
            "a = jnp.full((300, 300), 1e-3, jnp.float32)\nslow(a).block_until_ready()\n")
    assert cluster.run_cell(code).ok
    assert cluster.run_cell("queued = slow(a)").ok
    res = cluster.run_cell("done = queued.is_ready()", show=["done"])
    assert [res.records[r].show["done"]["repr"] for r in range(cluster.n)] == ["True"] * cluster.n, res.text()


def test_process_count_is_the_number_of_ranks_without_boilerplate(cluster):
    res = cluster.run_cell("import jax\nwhere = (jax.process_count(), jax.process_index(), jax.device_count())",
                           show=["where"])
    assert res.ok, res.text()
    for rank, rec in res.records.items():
        assert rec.show["where"]["repr"] == repr((cluster.n, rank, cluster.n))
    assert jax_runtime_words(cluster.status()["jax"]) == f"jax.distributed: {cluster.n} processes, 1 CPU device each"


def test_a_shard_map_transpose_over_the_processes_equals_numpy(cluster):
    """... and --show y draws which rank holds which block of the global result, once."""
    n = cluster.n
    replicated = "rep = jax.make_array_from_callback((3,), NamedSharding(mesh, P()), lambda i: np.arange(3.0)[i])\n"
    res = cluster.run_cell(TRANSPOSE.format(rows=4 * n, cols=2 * n) + replicated, show=["same", "whole", "y", "rep"])
    assert res.ok, res.text()
    for rank, rec in res.records.items():
        assert rec.show["same"]["value"] is True, res.text()
        assert tuple(rec.show["whole"]["shape"]) == (2 * n, 4 * n)
        assert rec.show["y"]["local"] and rec.show["y"]["min"] == 2 * rank  # A.T's rows 2r and 2r+1
        assert "local" not in rec.show["rep"] and rec.show["rep"]["max"] == 2  # every rank holds all of it
    text = res.text()
    assert text.count(f"y: float32[{2 * n},{4 * n}] in {n} blocks over ranks 0-{n - 1}") == 1, text
    assert f"rep: float32[3] in 1 block over ranks 0-{n - 1}" in text, text
    for rank in range(n):
        assert f"  rows {2 * rank}:{2 * rank + 2}  rank {rank}" in text, text


IN_SHARD_MAP = """
import jax, jax.numpy as jnp, numpy as np
from mpi4py import MPI
from jax.sharding import NamedSharding, PartitionSpec as P
import mpinb.mpi as mpi
n, rank = jax.process_count(), jax.process_index()
mesh = jax.make_mesh((n,), ("x",))
A = np.arange(4 * n * 2 * n, dtype=np.float32).reshape(4 * n, 2 * n)
x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), A.reshape(n, -1, 2 * n)[rank])
def by_mpinb(b):   # lax.all_to_all(b, "x", 1, 0, tiled=True) with mpinb's alltoall
    r, c = b.shape
    return mpi.alltoall(b.reshape(r, n, c // n).transpose(1, 0, 2)).reshape(n * r, c // n)
def by_lax(b):
    return jax.lax.all_to_all(b, "x", 1, 0, tiled=True)
def mixed_mpinb(b):   # a ring shift, then alltoall and allreduce, beside one of JAX's psums
    b = mpi.sendrecv(b, b, source=(rank - 1) % n, dest=(rank + 1) % n)
    return mpi.allreduce(by_mpinb(b), op=MPI.SUM) + jax.lax.psum(b.sum(), "x")
def mixed_lax(b):
    b = jax.lax.ppermute(b, "x", [(i, (i + 1) % n) for i in range(n)])
    return jax.lax.psum(by_lax(b), "x") + jax.lax.psum(b.sum(), "x")
sm = lambda f, out=P("x"): jax.jit(jax.shard_map(f, mesh=mesh, in_specs=P("x"), out_specs=out))
def whole(f):
    return np.asarray(jax.experimental.multihost_utils.process_allgather(sm(f)(x), tiled=True))
def weighted(out):
    return (out ** 2 * jnp.arange(out.size).reshape(out.shape)).sum()
loss = lambda f: jax.jit(jax.grad(lambda v: weighted(sm(f)(v))))
import jax.experimental.multihost_utils
def same_grad(f, g):
    return bool(np.allclose(*(np.asarray(loss(h)(x).addressable_shards[0].data) for h in (f, g))))
checks = {"transpose": bool(np.array_equal(whole(by_mpinb), whole(by_lax))),
          "transpose is A.T": bool(np.array_equal(whole(lambda b: by_mpinb(b).T), A.T)),
          "mixed": bool(np.array_equal(whole(mixed_mpinb), whole(mixed_lax))),
          "grad": same_grad(by_mpinb, by_lax),
          "allreduce grad": same_grad(lambda b: mpi.allreduce(b, op=MPI.SUM), lambda b: jax.lax.psum(b, "x"))}
scan_of_replicated = lambda b: mpi.scan(jnp.ones(2), MPI.SUM)
for name, per_process in (("alltoall", by_mpinb), ("scan of a replicated value", scan_of_replicated)):
    try:
        sm(per_process, out=P())(x)
        checks[f"{name} taken as replicated"] = True
    except ValueError:
        pass
try:
    sm(lambda b: mpi.gather(b, 0).reshape(-1))(x)
except NotImplementedError:
    checks["gather refused"] = True
"""


ALLREDUCE_IN_SHARD_MAP = """
import jax, numpy as np
from mpi4py import MPI
from jax.sharding import NamedSharding, PartitionSpec as P
import mpinb.mpi as mpi
mesh = jax.make_mesh((jax.device_count(),), ("x",))
total = jax.jit(jax.shard_map(lambda b: mpi.allreduce(b, op=MPI.SUM), mesh=mesh, in_specs=P("x"), out_specs=P("x")))
ones = np.ones(jax.local_device_count(), np.float32)
total(jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), ones))
"""


def test_mpinb_collectives_inside_shard_map_equal_jax_s(cluster):
    """mpinb's alltoall, allreduce and sendrecv in a shard_map body (one device per process) give
    what lax.all_to_all, psum and ppermute give, with JAX's collectives beside them and under
    grad (allreduce's as psum's: each process's copy counts); their results vary per process,
    even of a replicated operand, so out_specs=P() is refused as for JAX's; gather, whose shape
    differs between root and the others, is refused."""
    res = cluster.run_cell(IN_SHARD_MAP, show=["checks"])
    assert res.ok, res.text()
    for rec in res.records.values():
        assert rec.show["checks"]["repr"] == repr({"transpose": True, "transpose is A.T": True, "mixed": True,
                                                   "grad": True, "allreduce grad": True,
                                                   "gather refused": True}), res.text()


def test_compare_on_a_shard_map_cell_compares_each_rank_s_shards(cluster):
    """--compare: a jax.Array spread over the processes is compared block by block on the rank
    that holds it; where what multihost_utils gathered differs (under disable_jit it may see
    only this process's data), the hint says so instead of blaming jit."""
    n = cluster.n  # (shapes no other test gathers: a gather JAX compiled before runs whole, eager or not)
    res = cluster.run_cell(TRANSPOSE.format(rows=4 * n, cols=3 * n), compare=True)
    assert res.ok, res.text()
    for rank, rec in res.records.items():
        status = {c.name: c.status for c in rec.comparisons}
        assert status[f"x[{4 * rank}:{4 * rank + 4}, :]"] == "equal", res.text()
        assert status[f"y[{3 * rank}:{3 * rank + 3}, :]"] == "equal", res.text()
        if status.get("same") == "different":  # JAX's eager gather saw only this process's rows
            assert any(hint_words(h).startswith("same was computed from multihost_utils.process_allgather, "
                                                "which under jax.disable_jit") for h in rec.hints), res.text()


def test_the_mode_survives_a_restart(cluster):
    cluster.restart()
    res = cluster.run_cell("import jax\ncount = jax.process_count()", show=["count"])
    assert [rec.show["count"]["value"] for rec in res.records.values()] == [cluster.n] * cluster.n


def test_local_devices_per_process():
    with MPICluster(n=2, jax_distributed=True, local_devices=3, progress=False) as c:
        res = c.run_cell(TRANSPOSE.format(rows=12, cols=6), show=["where", "same"])
        assert res.ok, res.text()
        for rank, rec in res.records.items():
            assert rec.show["where"]["repr"] == repr((2, rank, 6, 3))
            assert rec.show["same"]["value"] is True, res.text()
        assert jax_runtime_words(c.status()["jax"]) == "jax.distributed: 2 processes, 3 CPU devices each"
        refused = c.run_cell(ALLREDUCE_IN_SHARD_MAP)
        assert set(refused.states.values()) == {"failed"}, refused.text()
        assert ("NotImplementedError: mpinb: a collective inside shard_map (or pmap) over a mesh with 3 devices "
                "of this process") in refused.text()


SET_MESH = """
import jax, jax.numpy as jnp
jax.config.update("jax_num_cpu_devices", 2)
from jax.sharding import NamedSharding, PartitionSpec as P
from mpi4py import MPI
import mpinb.mpi as mpi
body = lambda b: mpi.allreduce(b, op=MPI.SUM)
for n in (1, 2):   # a mesh from the context (abstract when shard_map is lowered)
    mesh = jax.make_mesh((n,), ("x",))
    with jax.set_mesh(mesh):
        f = jax.jit(jax.shard_map(body, in_specs=P("x"), out_specs=P("x")))
        x = jax.device_put(jnp.arange(4.0), NamedSharding(mesh, P("x")))
        try:
            print(n, "ran", f(x).tolist())
        except NotImplementedError as exc:
            print(n, "refused", exc)
"""


def test_a_context_mesh_with_several_devices_of_this_process_is_refused_too():
    """shard_map without ``mesh=`` (``jax.set_mesh``) gives mpinb an abstract mesh: one device
    runs, two of this one process are refused as with a concrete mesh (one process, 2 devices)."""
    proc = subprocess.run([sys.executable, "-c", SET_MESH], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 ran [0.0, 1.0, 2.0, 3.0]" in proc.stdout, proc.stdout
    assert ("2 refused mpinb: a collective inside shard_map (or pmap) over a mesh with 2 devices of this "
            "process") in proc.stdout


def test_a_failing_setup_is_an_engine_setup_error_and_stops_the_engines():
    """jax.distributed cannot start a backend (JAX_PLATFORMS names one that is not there): the
    start fails with the rank and JAX's words, not a hang, and nothing is left running."""
    c = MPICluster(n=2, jax_distributed=True, progress=False, engine_env={"JAX_PLATFORMS": "tpu"})
    with pytest.raises(EngineSetupError, match=r"the engines' setup failed on rank 0: RuntimeError: .*backend 'tpu'"):
        c.start()
    assert c.status()["running"] is False
    del c.engine_env["JAX_PLATFORMS"]  # the cause gone, the same object starts
    with c:
        res = c.run_cell("import jax\ncount = jax.process_count()", show=["count"])
        assert [rec.show["count"]["value"] for rec in res.records.values()] == [2, 2], res.text()


def test_bad_local_devices_are_refused_before_anything_starts():
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="local_devices must be a positive int"):
            MPICluster(n=2, local_devices=bad)


STEPPER = """
import jax, numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((jax.device_count(),), ("x",))
def stepper(b):
    return jax.lax.psum(b, "x")
step = jax.jit(jax.shard_map(stepper, mesh=mesh, in_specs=P("x"), out_specs=P()))
x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), np.ones(2, np.float32))
total = step(x)
"""


def test_a_rank_that_skips_a_collective_is_named_and_the_waiting_rank_s_line_shown(cluster):
    """JAX's collectives hang silently when only some processes reach them: the timeout's report
    says where rank 0 waits (the cell's line, the jitted call and what it holds) and that the
    other ranks finished without calling it."""
    warm = cluster.run_cell(STEPPER, show=["total"])
    assert warm.ok, warm.text()
    res = cluster.run_cell("y = 1\nif jax.process_index() == 0:\n    y = step(x)\n", timeout=6, label="In[7]")
    assert res.states[0] == "running" and all(res.states[r] == "finished" for r in range(1, cluster.n))
    others = "rank 1" if cluster.n == 2 else f"ranks 1-{cluster.n - 1}"
    expected = (f"state: still running, waits in jit(stepper) (all-reduce over {cluster.n} devices) "
                f"at Cell In[7], line 3; {others} finished the cell without calling it")
    assert expected in res.text(), res.text()
    cluster.restart()


DIVERGENT = """
def body(b):
    if jax.process_index() == 0:
        return jax.lax.psum(b, "x") + jax.lax.all_gather(b, "x", tiled=True)[:2]
    return jax.lax.all_gather(b, "x", tiled=True)[:2] + jax.lax.psum(b, "x")
divergent = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x")))
compiled = divergent.lower(x).compile()   # compiled only: run, the ranks would hang or mix data up
"""


def test_ranks_that_compile_different_collectives_get_a_divergent_finding(cluster):
    """Rank 0 compiles psum then all_gather, the others the other way round: the finding names
    the first difference and the line each rank compiled it from (compiled only, not run)."""
    res = cluster.run_cell(STEPPER + DIVERGENT, label="In[9]")
    assert res.ok, res.text()
    (finding,) = [w for w in res.warnings if w.kind == "divergent"]
    first = STEPPER.count("\n") + 4  # the lines of body's two returns, in the cell
    expected = (f"at collective #1 of jit_body, rank 0 compiled all-reduce f32[2]{{0}} groups "
                f"{{{{{','.join(map(str, range(cluster.n)))}}}}} at Cell In[9]:{first} (body) but rank 1 compiled "
                f"all-gather f32[{2 * cluster.n}]{{0}}")
    assert finding_message(finding).startswith(expected), finding_message(finding)
    assert f"at Cell In[9]:{first + 1} (body): the ranks may deadlock" in finding_message(finding)


def test_pull_assembles_the_global_array_in_index_order(cluster):
    """A jax.Array sharded over the processes comes back whole; per-rank arrays are stacked."""
    res = cluster.run_cell(TRANSPOSE.format(rows=4 * cluster.n, cols=2 * cluster.n) +
                           "col_sharded = jax.make_array_from_callback((6, 4 * jax.device_count()), "
                           "NamedSharding(mesh, P(None, 'x')), lambda idx: np.arange(24 * jax.device_count(),"
                           " dtype=np.int32).reshape(6, -1)[idx])\n"
                           "mine_only = np.full(3, jax.process_index())")
    assert res.ok, res.text()
    A = np.arange(4 * cluster.n * 2 * cluster.n, dtype=np.float32).reshape(4 * cluster.n, 2 * cluster.n)
    np.testing.assert_array_equal(cluster.pull("y"), A.T)  # rows spread over the ranks
    expected = np.arange(24 * cluster.n, dtype=np.int32).reshape(6, -1)
    np.testing.assert_array_equal(cluster.pull("col_sharded"), expected)  # columns spread
    np.testing.assert_array_equal(cluster.pull("mine_only"), np.repeat(np.arange(cluster.n), 3).reshape(-1, 3))
    with pytest.raises(PullError, match=r"over the limit of 10 .*--max-mib"):
        cluster.pull("y", max_bytes=10)
    with pytest.raises(PullError, match="no variable 'nothing_here' on this rank"):
        cluster.pull("nothing_here")
