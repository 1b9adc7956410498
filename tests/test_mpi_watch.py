"""The MPI watch (ext/mpi_watch.c, mpinb/engine/mpi4py_waits.py) on real MPI processes: while the main
thread blocks in an MPI call the program makes itself through mpi4py, another thread reads what
it waits for (op, peers as world ranks, tags, root, the communicator's members, bytes, the MPI
function, whether a nonblocking call was ever made); nothing once the call returned; calls of
other threads are not watched; the watch stays out when it is turned off or comes after mpi4py.
Each case runs in a fresh Python (the watch must be loaded before mpi4py), under mpiexec where
it needs two ranks."""

import json
import os
import subprocess
import sys

import pytest

from mpinb.engine import mpi4py_waits
from mpinb.launch.mpi_impl import find_launcher, loaded_mpi, shared_core_env

PRELUDE = """
import json, threading, time
from mpinb.engine import mpi4py_waits
loaded = mpi4py_waits.preload()
from mpi4py import MPI
import numpy as np
started = mpi4py_waits.start()
world = MPI.COMM_WORLD
rank = world.Get_rank()

def while_blocked(release):
    '''What the watch says from another thread while the main thread blocks; then release it.'''
    seen = []
    def look():
        time.sleep(0.4)
        seen.append(mpi4py_waits.inflight(MPI.Wtime()))
        release()
    thread = threading.Thread(target=look)
    thread.start()
    return thread, seen
"""

ONE_RANK = PRELUDE + """
out = {"loaded": loaded, "started": started}
thread, seen = while_blocked(lambda: world.Send(np.arange(3.0), dest=0, tag=5))
buf = np.empty(3)
world.Recv(buf, source=0, tag=5)
thread.join()
out["recv"], out["after"], out["received"] = seen[0], mpi4py_waits.inflight(MPI.Wtime()), buf.tolist()
thread, seen = while_blocked(lambda: world.send({"a": 1}, dest=0, tag=11))
world.recv(source=MPI.ANY_SOURCE)
thread.join()
out["object_recv"] = seen[0]
request = world.Irecv(np.empty(1), source=0, tag=12)  # a nonblocking call: requests may be in flight from now on
world.Send(np.zeros(1), dest=0, tag=12)
request.Wait()
thread, seen = while_blocked(lambda: world.send(2, dest=0, tag=13))
world.recv(source=0, tag=13)
thread.join()
out["after_nonblocking"] = seen[0]
out["other_thread"] = None
def other():
    world.Barrier()  # a call of another thread: not watched
    out["other_thread"] = mpi4py_waits.inflight(MPI.Wtime())
t = threading.Thread(target=other); t.start(); t.join()
print(json.dumps(out))
"""

TWO_RANKS = PRELUDE + """
reversed_ = world.Split(0, -rank)  # comm rank 0 is world rank 1
out = {}
if rank == 1:
    thread, seen = while_blocked(lambda: None)
    buf = np.empty(4, dtype=np.int64)
    reversed_.Recv(buf, source=1, tag=9)  # from comm rank 1: world rank 0
    thread.join()
    out["recv"] = seen[0]
    thread, seen = while_blocked(lambda: None)
    reversed_.Bcast(buf, root=1)
    thread.join()
    out["bcast"] = seen[0]
else:
    time.sleep(1.0)
    reversed_.Send(np.arange(4, dtype=np.int64), dest=0, tag=9)
    time.sleep(1.0)
    reversed_.Bcast(np.arange(4, dtype=np.int64), root=1)
print(json.dumps({"rank": rank, **out}))
"""

WITHDRAWN = PRELUDE + """
import os
import jax.numpy as jnp
from mpinb import mpi
from mpinb.engine import rank_release
mpi.default_comm()  # collective: both ranks
signum = rank_release.install()
out = {"rank": rank, "signal": signum}

def withdrawn(name, call, new_cell=True):
    # call waits in a receive that never comes; the wake signal (from another thread, as the
    # engine's nanny would send it) takes it back: what the watch said meanwhile, what was raised
    # (in the same cell as a wake, without a new one: a receive fails at once)
    seen = []
    def poke():
        time.sleep(0.5)
        seen.append(mpi4py_waits.inflight(MPI.Wtime()))
        os.kill(os.getpid(), signum)
    thread = threading.Thread(target=poke)
    if new_cell:
        rank_release.begin_cell()
        thread.start()
    t0 = time.perf_counter()
    try:
        call()
        out[name] = {"raised": None}
    except Exception as exc:
        out[name] = {"raised": type(exc).__name__, "words": str(exc), "watched": seen[0] if seen else None,
                     "seconds": time.perf_counter() - t0}
    if new_cell:
        thread.join()

if rank == 0:
    withdrawn("Recv", lambda: world.Recv(np.empty(3), source=1, tag=7))
    withdrawn("recv", lambda: world.recv(source=1, tag=8))
    withdrawn("Probe", lambda: world.Probe(source=MPI.ANY_SOURCE, tag=9))
    withdrawn("mpinb", lambda: mpi.recv(jnp.zeros(3), source=1, tag=10))
    withdrawn("again", lambda: world.Recv(np.empty(3), source=1, tag=11), new_cell=False)
world.Barrier()
if rank == 1:
    world.Send(np.ones(3), dest=0, tag=7)  # what the withdrawn receives waited for, too late
    world.send("late", dest=0, tag=8)
    mpi.send(jnp.ones(3), dest=0, tag=10)
world.Barrier()
if rank == 0:
    out["freed"] = rank_release.freed()
    out["dropped"] = rank_release.drop_left()
world.Barrier()
rank_release.begin_cell()
if rank == 1:
    world.Send(np.full(3, 5.0), dest=0, tag=7)
else:
    fresh = np.empty(3)
    world.Recv(fresh, source=1, tag=7)  # waits (polling) for the message, gets this one
    out["fresh"] = fresh.tolist()
    print(json.dumps(out), flush=True)  # rank 0 alone: the launcher may cut a long line by another's
"""


def run(script: str, ranks: int = 1, **env) -> list[dict]:
    mpi = loaded_mpi()  # the ranks wait as a local cluster's do (mpi_impl.shared_core_env)
    environment = {**os.environ, **shared_core_env(mpi, os.environ), mpi4py_waits.LIBMPI_ENV: mpi.path, **env}
    command = [sys.executable, "-c", script]
    if ranks > 1:
        command = [find_launcher(loaded_mpi(), local=True), "-n", str(ranks), *command]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, env=environment)
    assert proc.returncode == 0, proc.stderr
    return objects(proc.stdout)


def objects(text: str) -> list[dict]:
    """The JSON objects the ranks printed: Open MPI's launcher may put two ranks' lines on one."""
    decoder, out, at = json.JSONDecoder(), [], text.find("{")
    while at >= 0:
        obj, end = decoder.raw_decode(text, at)
        out.append(obj)
        at = text.find("{", end)
    return out


def test_the_ranks_output_is_read_however_the_launcher_joins_it():
    assert objects('noise\n{"rank": 0}{"rank": 1, "x": {"y": 2}}\n{"rank": 2}\n') == [
        {"rank": 0}, {"rank": 1, "x": {"y": 2}}, {"rank": 2}]


def test_the_watch_is_built_beside_the_collective_library():
    assert mpi4py_waits.library_path() is not None


def test_a_blocked_receive_is_read_from_another_thread_and_gone_once_it_returned():
    (out,) = run(ONE_RANK)
    assert out["loaded"] and out["started"]
    recv = out["recv"]
    assert recv["op"] == "recv" and recv["function"] == "MPI_Recv", recv
    assert (recv["source"], recv["dest"], recv["recvtag"], recv["root"]) == (0, None, 5, None)
    assert recv["comm"] == [0] and recv["bytes"] == 24 and recv["peer"] == 0
    assert 0.2 < recv["seconds"] < 30
    assert out["after"] is None and out["received"] == [0.0, 1.0, 2.0]
    obj = out["object_recv"]  # mpi4py's comm.recv probes for the message first
    assert obj["op"] == "recv" and obj["function"] == "MPI_Mprobe" and obj["source"] == "any", obj
    assert obj["recvtag"] is None and obj["call"] != recv["call"]
    assert recv["pending"] is False and obj["pending"] is False
    assert out["after_nonblocking"]["pending"] is True  # for good: requests may outlive the call
    assert out["other_thread"] is None


def test_peers_and_members_of_a_sub_communicator_are_world_ranks():
    outs = {o["rank"]: o for o in run(TWO_RANKS, ranks=2)}
    recv = outs[1]["recv"]
    assert (recv["op"], recv["source"], recv["recvtag"], recv["comm"]) == ("recv", 0, 9, [1, 0]), recv
    assert recv["bytes"] == 32
    bcast = outs[1]["bcast"]
    assert (bcast["op"], bcast["function"], bcast["root"], bcast["comm"]) == ("bcast", "MPI_Bcast", 0, [1, 0])


@pytest.mark.parametrize("how", ["off", "after mpi4py"])
def test_the_watch_stays_out_when_off_or_too_late(how):
    script = PRELUDE + "print(json.dumps({'loaded': loaded, 'started': started}))"
    if how == "after mpi4py":
        script = "import mpi4py.MPI\n" + script
    (out,) = run(script, **({mpi4py_waits.WATCH_ENV: "0"} if how == "off" else {}))
    assert out == {"loaded": False, "started": False}


def test_a_wake_signal_takes_waiting_receives_back_and_late_messages_are_dropped():
    """mpi4py's Recv, recv and Probe (through the watch) and mpinb's recv, each waiting for a
    message that has not come, fail when the wake signal comes (mpinb.engine.rank_release); the
    messages that come later are dropped, not received by the next receive, which gets its own."""
    outs = {o["rank"]: o for o in run(WITHDRAWN, ranks=2)}
    out = outs[0]
    assert out["signal"] is not None
    for name in ("Recv", "recv", "Probe"):
        assert out[name]["raised"] == "Exception" and "withdrawn" in out[name]["words"], out[name]
        assert out[name]["watched"]["op"] == "recv" and out[name]["watched"]["withdrawable"] is True
    assert out["mpinb"]["raised"] in ("JaxRuntimeError", "XlaRuntimeError"), out["mpinb"]  # JAX renamed it
    assert "receive from rank 1 (tag 10) withdrawn before a message came" in out["mpinb"]["words"]
    assert out["again"]["raised"] == "Exception" and out["again"]["seconds"] < 0.4, out["again"]
    assert out["freed"] == 5
    dropped, more = out["dropped"]
    assert sorted((m["source"], m["tag"]) for m in dropped) == [(1, 7), (1, 8), (1, 10)] and more == 0, dropped
    assert out["fresh"] == [5.0, 5.0, 5.0]
