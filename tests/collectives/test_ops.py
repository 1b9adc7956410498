"""Every collective against a NumPy reference, eagerly, under jit and under disable_jit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from mpi4py import MPI
from reference import MODES, assert_same, make, run

from mpinb import mpi

ALL_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "bfloat16", "float32", "float64", "complex64", "complex128"]
SUM_DTYPES = ["int8", "int32", "int64", "uint16", "uint64", "float32", "float64", "complex64", "complex128"]


def _dtype(name):
    return jnp.bfloat16 if name == "bfloat16" else np.dtype(name)


def _peer(rank, size):
    """Partner for point-to-point tests: pairs (0,1), (2,3), ...; a rank without a partner
    (one process, or the last of an odd count) talks to MPI.PROC_NULL, whose sends vanish and
    whose receives complete at once with zeros."""
    p = rank ^ 1
    return p if p < size else MPI.PROC_NULL


def _expected_from(peer, shape, dtype):
    return np.zeros(shape, dtype) if peer == MPI.PROC_NULL else make(shape, dtype, peer)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", SUM_DTYPES)
def test_allreduce_sum(world, mode, dtype):
    rank, size = world
    x = make((3, 5), dtype, rank)
    got = run(mode, lambda a: mpi.allreduce(a, op=MPI.SUM), x)
    want = np.sum([make((3, 5), dtype, r) for r in range(size)], axis=0).astype(dtype)
    assert_same(got, want)


@pytest.mark.parametrize(("opname", "dtype", "reference"), [
    ("MAX", "float32", np.max),
    ("MIN", "int16", np.min),
    ("PROD", "int64", np.prod),
    ("LAND", "bool", np.logical_and.reduce),
    ("LOR", "bool", np.logical_or.reduce),
    ("LXOR", "bool", np.logical_xor.reduce),
    ("BAND", "uint8", np.bitwise_and.reduce),
    ("BOR", "int32", np.bitwise_or.reduce),
    ("BXOR", "uint32", np.bitwise_xor.reduce),
])
def test_allreduce_ops(world, opname, dtype, reference):
    rank, size = world
    x = make((4,), dtype, rank)
    got = run("jit", lambda a: mpi.allreduce(a, op=getattr(MPI, opname)), x)
    want = reference(np.stack([make((4,), dtype, r) for r in range(size)]), axis=0).astype(dtype)
    assert_same(got, want)


def test_allreduce_scalar_and_python_input(world):
    rank, size = world
    assert_same(mpi.allreduce(np.float32(rank), op=MPI.SUM), np.float32(size * (size - 1) / 2))
    got = mpi.allreduce([1, 2, 3], op=MPI.MAX)
    assert_same(got, np.array([1, 2, 3], dtype=got.dtype))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_alltoall(world, mode, dtype):
    rank, size = world
    got = run(mode, mpi.alltoall, make((size, 2, 3), _dtype(dtype), rank))
    want = np.stack([make((size, 2, 3), _dtype(dtype), s)[rank] for s in range(size)])
    assert_same(got, want)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["bool", "int8", "float16", "float64", "complex64"])
def test_allgather(world, mode, dtype):
    rank, size = world
    got = run(mode, mpi.allgather, make((2, 3), dtype, rank))
    assert_same(got, np.stack([make((2, 3), dtype, r) for r in range(size)]))


@pytest.mark.parametrize("mode", MODES)
def test_reduce_scatter(world, mode):
    rank, size = world
    got = run(mode, lambda a: mpi.reduce_scatter(a, op=MPI.SUM), make((size, 4), np.float64, rank))
    want = np.sum([make((size, 4), np.float64, r)[rank] for r in range(size)], axis=0)
    assert_same(got, want)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["bool", "uint64", "bfloat16", "float32", "complex128"])
def test_bcast(world, mode, dtype):
    rank, size = world
    root = size - 1
    got = run(mode, lambda a: mpi.bcast(a, root), make((3, 4), _dtype(dtype), rank))
    assert_same(got, make((3, 4), _dtype(dtype), root))


@pytest.mark.parametrize("mode", MODES)
def test_reduce(world, mode):
    rank, size = world
    root = 0
    x = make((5,), np.int32, rank)
    got = run(mode, lambda a: mpi.reduce(a, MPI.SUM, root), x)
    if rank == root:
        assert_same(got, np.sum([make((5,), np.int32, r) for r in range(size)], axis=0).astype(np.int32))
    else:
        assert_same(got, x)


@pytest.mark.parametrize("mode", MODES)
def test_gather(world, mode):
    rank, size = world
    root = size // 2
    x = make((2, 2), np.complex64, rank)
    got = run(mode, lambda a: mpi.gather(a, root), x)
    if rank == root:
        assert_same(got, np.stack([make((2, 2), np.complex64, r) for r in range(size)]))
    else:
        assert_same(got, x)


@pytest.mark.parametrize("mode", MODES)
def test_scatter(world, mode):
    rank, size = world
    root = 0
    x = make((size, 3), np.int64, root) if rank == root else np.zeros((3,), np.int64)
    got = run(mode, lambda a: mpi.scatter(a, root), x)
    assert_same(got, make((size, 3), np.int64, root)[rank])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("opname", "reference"), [("SUM", np.cumsum), ("MAX", np.maximum.accumulate)])
def test_scan(world, mode, opname, reference):
    rank, size = world
    x = make((4,), np.float32, rank)
    got = run(mode, lambda a: mpi.scan(a, getattr(MPI, opname)), x)
    want = reference(np.stack([make((4,), np.float32, r) for r in range(size)]), axis=0)[rank]
    assert_same(got, want)


@pytest.mark.parametrize("mode", MODES)
def test_send_recv(world, mode):
    rank, size = world
    peer = _peer(rank, size)
    x = make((6,), np.float64, rank)

    def exchange(a):
        if rank < peer or peer == MPI.PROC_NULL:  # lower rank sends first
            mpi.send(a, peer, tag=5)
            return mpi.recv(a, peer, tag=5)
        got = mpi.recv(a, peer, tag=5)
        mpi.send(a, peer, tag=5)
        return got

    assert_same(run(mode, exchange, x), _expected_from(peer, (6,), np.float64))


def test_recv_status(world):
    rank, size = world
    peer = _peer(rank, size)
    status = MPI.Status()
    x = make((3,), np.int32, rank)
    if rank < peer or peer == MPI.PROC_NULL:
        mpi.send(x, peer, tag=rank + 10)
        got = mpi.recv(x, peer, status=status)
    else:
        got = mpi.recv(x, MPI.ANY_SOURCE, status=status)
        mpi.send(x, peer, tag=rank + 10)
    assert_same(got, _expected_from(peer, (3,), np.int32))
    assert status.Get_source() == peer
    if peer != MPI.PROC_NULL:
        assert status.Get_tag() == peer + 10
        assert status.Get_count(MPI.INT32_T) == 3
    else:
        assert status.Get_count(MPI.INT32_T) == 0


@pytest.mark.parametrize("mode", MODES)
def test_sendrecv_matching(world, mode):
    rank, size = world
    left, right = (rank - 1) % size, (rank + 1) % size
    x = make((2, 3), np.float32, rank)
    got = run(mode, lambda a, b: mpi.sendrecv(a, b, source=left, dest=right, sendtag=3, recvtag=3), x, np.zeros_like(x))
    assert_same(got, make((2, 3), np.float32, left))


@pytest.mark.parametrize("mode", MODES)
def test_barrier(world, mode):
    before = mpi.counters()["calls"]
    run(mode, lambda: mpi.barrier())
    assert mpi.counters()["calls"] == before + 1


@pytest.mark.parametrize("mode", MODES)
def test_allgatherv(world, mode):
    rank, size = world
    counts = [r % 3 + 1 for r in range(size)]
    x = make((counts[rank], 2), np.float64, rank)
    got = run(mode, lambda a: mpi.allgatherv(a, counts), x)
    assert_same(got, np.concatenate([make((counts[r], 2), np.float64, r) for r in range(size)]))


@pytest.mark.parametrize("mode", MODES)
def test_alltoallv(world, mode):
    rank, size = world

    def rows(src, dst):  # rows rank src sends to rank dst
        return (src + 2 * dst) % 3

    sendcounts = [rows(rank, d) for d in range(size)]
    recvcounts = [rows(s, rank) for s in range(size)]

    def data(src):
        return make((sum(rows(src, d) for d in range(size)), 2), np.int32, src)

    got = run(mode, lambda a: mpi.alltoallv(a, sendcounts, recvcounts), data(rank))
    pieces = []
    for s in range(size):
        offset = sum(rows(s, d) for d in range(rank))
        pieces.append(data(s)[offset:offset + rows(s, rank)])
    assert_same(got, np.concatenate(pieces))


def test_explicit_communicator(world):
    rank, size = world
    comm = MPI.COMM_WORLD.Split(color=rank % 2, key=rank)
    try:
        got = mpi.allreduce(np.int32(1), MPI.SUM, comm=comm)
        assert int(got) == comm.Get_size()
        members = mpi.allgather(np.int32(rank), comm=comm)
        assert list(np.asarray(members)) == [r for r in range(size) if r % 2 == rank % 2]
    finally:
        comm.Free()


def test_support_flags_say_what_lowers(world):
    """No GPU support is claimed, and none is there: a collective lowers for the CPU and is
    refused for CUDA, ROCm and TPU (JAX lowers for any platform without its device) in mpinb's
    words, naming the platform and the way out, not JAX's missing-rule error."""
    rank, _ = world
    assert mpi.has_cuda_support() is False and mpi.has_sycl_support() is False
    traced = jax.jit(lambda x: mpi.allreduce(x, MPI.SUM)).trace(jnp.ones(2))
    assert "mpinb_allreduce" in traced.lower(lowering_platforms=("cpu",)).as_text()
    for platform in ("cuda", "rocm", "tpu"):
        with pytest.raises(NotImplementedError, match=rf"mpinb: allreduce on rank {rank}: mpinb's collectives move "
                                                      rf"arrays in host memory, but this computation is compiled "
                                                      rf"for {platform}\. Run the engines' JAX on the CPU .*"
                                                      r"JAX_PLATFORMS=cpu.*device_put"):
            traced.lower(lowering_platforms=(platform,))


def test_allreduce_in_place_keeps_a_live_operand_and_reuses_a_donated_one(world):
    """allreduce's result may share its operand's buffer (MPI_IN_PLACE): a live operand must
    survive the call, a donated one may be overwritten, and both results are right."""
    rank, size = world
    x = jnp.asarray(make((1024,), np.float64, rank))
    want = np.sum([make((1024,), np.float64, r) for r in range(size)], axis=0)
    f = jax.jit(lambda v: mpi.allreduce(v, MPI.SUM))
    assert_same(f(x), want)
    assert_same(x, make((1024,), np.float64, rank))  # not donated: untouched
    donated = jax.jit(lambda v: mpi.allreduce(v, MPI.SUM), donate_argnums=0)
    y = jnp.asarray(make((1024,), np.float64, rank))
    assert_same(donated(y), want)
    assert "mpinb_allreduce" in donated.lower(x).compile().as_text()


def _custom_call_line(fn, x, target: str) -> str:
    text = fn.lower(x).compile().as_text()
    return next(line for line in text.splitlines() if target in line and "custom-call(" in line)


def test_a_kept_argument_is_reduced_out_of_place_instead_of_copied(world):
    """XLA copies an argument the caller keeps to let the result share its buffer: a copy
    that costs more than the in-place call saves. So only a donated argument or an intermediate
    shares its buffer with allreduce's result; a kept argument is reduced out of place."""
    rank, size = world
    x = jnp.asarray(make((4096,), np.float64, rank))
    want = np.sum([make((4096,), np.float64, r) for r in range(size)], axis=0)
    kept = jax.jit(lambda v: mpi.allreduce(v, MPI.SUM))
    donated = jax.jit(lambda v: mpi.allreduce(v, MPI.SUM), donate_argnums=0)
    intermediate = jax.jit(lambda v: mpi.allreduce(v * 2.0, MPI.SUM))
    assert "output_to_operand_aliasing" not in _custom_call_line(kept, x, "mpinb_allreduce")
    assert " copy(" not in kept.lower(x).compile().as_text()
    assert "output_to_operand_aliasing" in _custom_call_line(donated, x, "mpinb_allreduce")
    assert "output_to_operand_aliasing" in _custom_call_line(intermediate, x, "mpinb_allreduce")
    assert_same(kept(x), want)
    assert_same(intermediate(x), 2.0 * want)
    assert_same(donated(jnp.asarray(make((4096,), np.float64, rank))), want)
    assert_same(x, make((4096,), np.float64, rank))


@pytest.mark.parametrize("iterations", [1, 3])
def test_alltoall_in_a_loop_shares_the_carry_buffer(world, iterations):
    """Inside a loop body a large alltoall writes its result into the carry's own buffer
    (ext/in_place.pxi: pairwise exchange through a scratch buffer): same result as out of place."""
    rank, size = world
    shape = (size, 3, 4096)  # 96 KiB per rank's row block: above the in-place threshold
    x = make(shape, np.float64, rank)
    f = jax.jit(lambda a: jax.lax.fori_loop(0, iterations, lambda i, c: mpi.alltoall(c) + i, a))
    text = f.lower(x).compile().as_text()
    assert "output_to_operand_aliasing" in next(line for line in text.splitlines() if "mpinb_alltoall" in line
                                                and "custom-call(" in line)
    want = np.stack([make(shape, np.float64, r) for r in range(size)])  # want[r] = rank r's input
    for i in range(iterations):  # block s of rank r after one step: block r of rank s, plus i
        want = np.swapaxes(want, 0, 1) + i
    assert_same(f(x), want[rank])


def test_an_eager_call_runs_its_compiled_computation_without_binding(world, monkeypatch):
    """Called outside any transformation, a collective reaches its compiled one-equation
    computation without JAX's bind machinery (mpinb/mpi/primitives.py, Collective.bind): once
    compiled, an eager call binds nothing; traced, it binds as any primitive."""
    from jax.extend.core import Primitive

    rank, size = world
    x = jnp.asarray(make((2, 3), "float32", rank))
    want = np.sum([make((2, 3), "float32", r) for r in range(size)], axis=0)
    assert_same(mpi.allreduce(x, op=MPI.SUM), want)  # compiled here
    bound = []
    unpatched = Primitive.bind

    def counting(self, *args, **params):
        bound.append(self.name)
        return unpatched(self, *args, **params)

    monkeypatch.setattr(Primitive, "bind", counting)
    assert_same(mpi.allreduce(x, op=MPI.SUM), want)
    assert bound == []
    assert_same(jax.jit(lambda a: mpi.allreduce(a, op=MPI.SUM) + 0)(x), want)  # a new computation, traced
    assert "mpinb_allreduce" in bound


def test_an_eager_call_under_disable_jit_and_with_new_parameters(world):
    """The eager path compiles a computation per set of parameters (each root its own) and, under
    jax.disable_jit, still runs the collective compiled (JAX's eager rule), without recursing."""
    rank, size = world
    x = make((4,), "int32", rank)
    for root in range(size):
        with jax.disable_jit():
            got = mpi.bcast(x, root)
        assert_same(got, make((4,), "int32", root))
        assert_same(mpi.bcast(x, root), make((4,), "int32", root))


def test_every_eager_barrier_runs_under_compile_time_eval(world):
    """An operandless collective called eagerly inside jax.ensure_compile_time_eval() runs at
    every call, not once while its computation is traced (JAX's eager path compiles it with
    constant folding off; so does mpinb's)."""
    before = mpi.counters()["calls"]
    with jax.ensure_compile_time_eval():
        for _ in range(3):
            mpi.barrier()
    assert mpi.counters()["calls"] - before == 3
