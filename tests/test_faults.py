"""Fault handling on a real 3-rank cluster: every case ends with a per-rank diagnosis, and the
cluster is usable afterwards (directly or after restart).

Each test waits for the state it tests (read from the cluster's status, see tests/support/waiting.py)
before it presses the stop button, lets a timeout expire or makes a rank fail. Restart times are
a benchmark figure (benchmarks/restart.py), not asserted here."""

import json
import os
import re
import stat
import time

import psutil
import pytest
from support import three_ranks
from support.three_ranks import NO_HANG, usable
from support.topology import OTHER_HOST, SLURM, make_cluster
from support.waiting import OnOutput, inside, press_stop

from mpinb import view
from mpinb.cells.cell_run import DEFAULT_GRACE
from mpinb.cells.freeing import WITHDRAW_WAIT
from mpinb.errors import ClusterBusy, ClusterError, ClusterLost
from mpinb.launch.mpi_impl import find_launcher, loaded_mpi
from mpinb.view.words import death_words

#: Margin on the bounds that are the feature itself (fail fast after the grace period, a
#: timeout fires, a death is reported): generous enough for a loaded 2-core machine.
SLACK = 10.0


@pytest.fixture(scope="module")
def cluster():
    yield from three_ranks.started()


@pytest.fixture(autouse=True)
def _healthy(cluster):
    """Each test starts from a usable cluster, whatever the test before it left behind."""
    three_ranks.heal(cluster)


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def test_a_launcher_that_ends_at_once_fails_the_start_at_once_with_its_words():
    """A launcher that refuses (a bad option here; Open MPI as root, too few slots) ends the start
    when it ends, with its output, not after start_timeout."""
    started = time.monotonic()
    want = (r"the MPI launcher ended \(exit status \d+\) after [\d.]+ s, with 0 of 2 engines registered\n"
            r"last output of the MPI launcher:\n(.|\n)*no-such-option")
    with pytest.raises(ClusterError, match=want):
        make_cluster(2, mpi_args=["--no-such-option"], start_timeout=600).start()
    assert time.monotonic() - started < 300  # far less than the 600 s it was given


def test_rank_raising_before_a_collective_is_reported_fast(cluster):
    """Waits for ranks 0 and 2 to be inside allreduce (their status), then makes rank 1 raise
    (it turns the stop button into a RuntimeError); the report must follow within the grace."""
    code = ("import time\n"
            "if rank == 1:\n"
            "    print('waiting', flush=True)\n"
            "    try:\n        time.sleep(120)\n"
            "    except KeyboardInterrupt:\n        raise RuntimeError('rank 1 gives up') from None\n"
            "mpi.allreduce(jnp.ones(2), MPI.SUM)")
    fail = OnOutput("waiting", [1], lambda: cluster.interrupt([1]), lambda: inside(cluster, [0, 2], "allreduce"))
    res = cluster.run_cell(code, stream=fail)
    assert time.perf_counter() - fail.pressed_at < DEFAULT_GRACE + SLACK
    assert res.states == {0: "running", 1: "failed", 2: "running"}
    assert res.records[1].error.evalue == "rank 1 gives up"
    for r in (0, 2):
        assert res.inflight[r]["op"] == "allreduce" and res.inflight[r]["bytes"] == 8
    text = res.text()
    assert "state: still running, blocked in allreduce (call" in text
    assert "run %mpijax restart" in text
    with pytest.raises(ClusterBusy, match=r"ranks 0, 2 still run an earlier cell .*blocked in allreduce"):
        cluster.run_cell("1")
    cluster.restart()
    usable(cluster)  # the setup cell was replayed: mpi, jnp, rank, ready are defined again


def test_checked_mode_turns_a_mismatch_into_the_same_error_on_every_rank(cluster):
    """Waits for the cell to end by itself (within NO_HANG s): an error on every rank, not a hang."""
    res = cluster.run_cell(
        "if rank == 1:\n    mpi.alltoall(jnp.ones((3, 64, 64)))\nelse:\n    mpi.allreduce(jnp.ones(4), MPI.SUM)",
        timeout=NO_HANG)
    assert not res.timed_out
    assert res.states == {0: "failed", 1: "failed", 2: "failed"}
    for r in range(3):
        assert ("checked mode: ranks disagree on the collective: rank 1 called alltoall float32[3,64,64] (#"
                in res.records[r].error.evalue)
        assert "rank 0 called allreduce float32[4] SUM" in res.records[r].error.evalue
    usable(cluster)  # no restart needed


def test_timeout_reports_each_rank_and_its_mpi_call(cluster):
    """Waits for ranks 0 and 1 to be inside barrier while rank 2 sleeps in Python, then lets
    the 3 s timeout expire (or finds it expired): the report names each rank's state."""
    timeout = 3.0
    state = OnOutput("sleeping", [2], lambda: None, lambda: inside(cluster, [0, 1], "barrier"))
    t0 = time.perf_counter()
    res = cluster.run_cell("if rank == 2:\n    import time; print('sleeping', flush=True); time.sleep(60)\n"
                           "mpi.barrier()", timeout=timeout, stream=state)
    seconds = time.perf_counter() - t0
    assert state.pressed_at is not None
    assert timeout <= seconds < max(timeout, state.pressed_at - t0) + SLACK
    assert res.timed_out and set(res.states.values()) == {"running"}
    assert res.inflight[0]["op"] == res.inflight[1]["op"] == "barrier"
    assert res.inflight[2] is None
    assert "blocked in barrier" in res.text() and "not inside an mpinb collective" in res.text()
    cluster.restart()
    usable(cluster)


class States:
    """A ``stream`` that keeps the last state ``run_cell`` told it for each rank, and presses
    stop once ``wanted(states)`` holds (keeping that moment's states in ``seen``)."""

    def __init__(self, wanted):
        self.wanted, self.now, self.seen, self.where = wanted, {}, None, {}

    def __call__(self, rank, kind, text):
        pass

    def state(self, rank, state, seconds, inflight, error_name, where):
        self.now[rank] = (state, seconds, (inflight or {}).get("op"), error_name)
        self.where[rank] = where
        if self.seen is None and self.wanted(self.now):
            self.seen, self.where_seen = dict(self.now), dict(self.where)
            raise KeyboardInterrupt


def test_live_states_while_a_cell_waits(cluster):
    """While ranks 0 and 1 wait in barrier for rank 2, which finished the cell without calling
    it, the stream is told each rank's state: running, in which collective, for how long; rank
    2 finished. Seen half-way (then the stop button), not only at the end."""
    def wanted(now):
        return (now.get(2, ("",))[0] == "finished"
                and all(now.get(r, ("",))[:3:2] == ("running", "barrier") for r in (0, 1)))

    states = States(wanted)
    # deadlock="off": proven, that deadlock would end the cell by itself (tests/test_deadlocks_on_cluster.py)
    res = cluster.run_cell("if rank != 2:\n    mpi.barrier()", stream=states, deadlock="off")
    assert states.seen is not None, states.now
    assert states.seen[0][1] > 0 and states.seen[2][1] < states.seen[0][1]
    assert all(states.where_seen[r]["line"] == 2 for r in (0, 1)), states.where_seen  # the line with the barrier
    assert res.interrupted and res.states[2] == "finished"
    # rank 2 joined the barrier's exchange to free them (as in the test below)
    assert res.states[0] == res.states[1] == "failed", res.text()
    usable(cluster)


def test_a_stop_in_compare_s_eager_pass_stops_the_cell(cluster):
    """--compare runs the cell eagerly first (its output held for the comparison): stopped
    there, the cell ends, its jitted pass (which would sleep again) not run."""
    def wanted(now):  # every rank sleeps on line 2 (an idle engine would ignore the SIGINT)
        return all(now.get(r, ("",))[0] == "running" and (states.where.get(r) or {}).get("line") == 2
                   for r in range(3))

    states = States(wanted)
    res = cluster.run_cell("import time\ntime.sleep(60)", compare=True, stream=states)
    assert states.seen is not None, states.now
    assert res.interrupted and all(res.states[r] == "failed" for r in range(3)), res.text()
    assert all(res.records[r].error.ename == "KeyboardInterrupt" for r in range(3)), res.text()
    usable(cluster)


def test_interrupt_frees_ranks_running_python(cluster):
    """Waits until every rank has printed 'tick' (all run the cell's Python), then presses stop."""
    stop = OnOutput("tick", range(3), press_stop)
    res = cluster.run_cell("import time\nprint('tick', flush=True)\ntime.sleep(60)", stream=stop)
    assert time.perf_counter() - stop.pressed_at < DEFAULT_GRACE + SLACK
    assert res.interrupted
    assert all(res.records[r].error.ename == "KeyboardInterrupt" for r in range(3)), res.text()
    usable(cluster)  # no restart needed


def test_interrupt_frees_ranks_waiting_in_a_collective(cluster):
    """Waits for rank 0 to print 'tick' (it then sleeps in Python) and for ranks 1 and 2 to be
    inside barrier (checked mode's exchange), then presses stop: rank 0 stops, then joins the
    exchange to free 1 and 2 (mpinb.engine.rank_release.join); no restart, the variables kept."""
    cluster.run_cell("kept = 8")
    stop = OnOutput("tick", [0], press_stop, lambda: inside(cluster, [1, 2], "barrier"))
    res = cluster.run_cell(
        "import time\nif rank == 0:\n    print('tick', flush=True)\n    time.sleep(60)\nmpi.barrier()",
        stream=stop)
    assert time.perf_counter() - stop.pressed_at < DEFAULT_GRACE + WITHDRAW_WAIT + SLACK
    assert res.interrupted and all(res.states[r] == "failed" for r in range(3)), res.text()
    assert res.records[0].error.ename == "KeyboardInterrupt"
    # the barrier failed where it waited (the SIGINT, still pending, then ends the cell there)
    assert all(f"rank {r}: withdrawn before it ran" in res.text() for r in (1, 2)), res.text()
    assert "blocked inside MPI" not in res.text()
    usable(cluster)
    assert cluster.run_cell("kept").records[0].result["repr"] == "8"


def test_interrupt_says_when_ranks_stay_blocked_in_mpi(cluster):
    """As above, but the barrier is past any exchange (checked mode off): rank 0 is freed, 1 and
    2 cannot be, and the view says what to do."""
    stop = OnOutput("tick", [0], press_stop, lambda: inside(cluster, [1, 2], "barrier"))
    try:
        res = cluster.run_cell(
            "import time\nmpi.set_checked(False)\nif rank == 0:\n    print('tick', flush=True)\n    time.sleep(60)\n"
            "mpi.barrier()", stream=stop)
        assert time.perf_counter() - stop.pressed_at < DEFAULT_GRACE + SLACK
        assert res.interrupted
        assert res.records[0].error.ename == "KeyboardInterrupt"
        assert res.states[1] == res.states[2] == "running"
        note = "ranks 1-2 are blocked inside MPI and cannot be interrupted: run %mpijax restart"
        assert note in res.text() and "SIGINT" not in res.text()
        assert note in view.render_html(res)
    finally:
        cluster.restart()  # also turns checked mode back on (the setup), whatever happened
    usable(cluster)


def test_interrupt_frees_ranks_waiting_in_receives(cluster):
    """Ranks 1 and 2 wait in receives from rank 0 (mpinb's recv, mpi4py's recv), which sleeps in
    Python: the stop button frees all three, the receives taken back (mpinb.engine.rank_release), and
    the next cell runs with the engines' variables, without a restart."""
    cluster.run_cell("kept = 7")
    stop = OnOutput("tick", [0], press_stop, lambda: inside(cluster, [1, 2], "recv"))
    res = cluster.run_cell("import time\nif rank == 0:\n    print('tick', flush=True)\n    time.sleep(60)\n"
                           "elif rank == 1:\n    mpi.recv(jnp.zeros(2), source=0, tag=5)\n"
                           "else:\n    MPI.COMM_WORLD.recv(source=0, tag=6)", stream=stop)
    assert time.perf_counter() - stop.pressed_at < DEFAULT_GRACE + SLACK
    assert res.interrupted and all(res.states[r] == "failed" for r in range(3)), res.text()
    assert "blocked inside MPI" not in res.text()
    usable(cluster)
    assert cluster.run_cell("kept").records[0].result["repr"] == "7"


@pytest.mark.parametrize(("how", "cause"), [
    ("os.kill(os.getpid(), signal.SIGKILL)", "killed by signal 9 (SIGKILL)"),
    ("os._exit(3)", "exited with code 3"),
    ("import ctypes; ctypes.string_at(0)", "killed by signal 11 (SIGSEGV)"),
])
def test_engine_death_is_reported_with_rank_and_cause(cluster, how, cause):
    """Waits for nothing: rank 1 dies at once while the others sleep (60 s); the report must
    come long before they wake up."""
    res, seconds = timed(lambda: cluster.run_cell(
        f"import os, signal, time\nif rank == 1:\n    {how}\ntime.sleep(60)"))
    assert seconds < SLACK
    assert res.states[1] == "dead" and death_words(res.dead[1]) == cause, (res.dead, cluster.exit_records())
    assert "1 dead" in res.summary() or "3 dead" in res.summary()
    assert f"rank 1 {cause}" in res.text()
    if "SIGSEGV" in cause:
        assert "Segmentation fault" in res.faults[1] or "Fatal Python error" in res.faults[1]
    with pytest.raises(ClusterLost, match=re.escape(f"the MPI job is gone (rank 1 {cause})")):
        cluster.run_cell("1")
    cluster.restart()
    usable(cluster)


def test_mpi_error_inside_a_handler_is_an_exception_on_that_rank(cluster):
    res = cluster.run_cell("mpi.sendrecv(jnp.ones(8), jnp.zeros(4), source=rank, dest=rank)", timeout=NO_HANG)
    assert set(res.states.values()) == {"failed"}
    assert "mpinb.sendrecv: rank 2: received 8 elements from rank 2, more than the receive buffer holds (4)" \
        in res.records[2].error.evalue
    usable(cluster)


# ------------------------------------------------------------------------------- security

def cmdline(proc) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:  # ended meanwhile (a zombie of an earlier restart)
        return []


def listening_addresses(procs) -> list[str]:
    listening = []
    for proc in procs:
        try:
            listening += [c.laddr.ip for c in proc.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
        except psutil.Error:
            continue
    return listening


def test_listens_on_loopback_only_or_encrypted(cluster):
    """The cluster's processes on this host (controller, launcher, engines) - not this test
    process, whose own MPI (the collective suite runs here too) is not part of the cluster.
    Under Slurm the engines are remote: the controller listens on every interface, and then
    every connection is CurveZMQ-encrypted (the connection files carry the server key)."""
    procs = cluster_processes()
    listening = listening_addresses(procs)
    assert listening, "found no listening sockets at all"
    if SLURM:  # the ranks are slurmd's children, on the Slurm nodes
        assert len({e["host"] for e in cluster.engines}) >= 1
        assert "0.0.0.0" in listening  # noqa: S104 - the routable controller the issue asks for
        for path in cluster.connection_files():
            if path.endswith(("-client.json", "-engine.json")):
                with open(path) as fh:
                    assert json.load(fh).get("curve_serverkey"), path
        return
    engines = [p for p in procs if "mpinb.engine" in " ".join(cmdline(p))
               or "ipyparallel.engine" in " ".join(cmdline(p))]  # the engines (python -m mpinb.engine) and nannies
    assert len(engines) >= cluster.n
    if not OTHER_HOST:  # on "another host" the engines report PIDs of their own namespace
        assert {e["pid"] for e in cluster.engines} <= {p.pid for p in procs}
    else:
        assert {e["host"] for e in cluster.engines} == {"mpinb-other-host"}
    mpi = loaded_mpi()
    if mpi.implementation.launcher_listens_everywhere:  # Open MPI 4: its mpiexec alone (docs/how-to/choose-mpi.md)
        launcher = os.path.realpath(find_launcher(mpi, local=True))
        listening = listening_addresses([p for p in procs if executable(p) != launcher])
    assert set(listening) <= {"127.0.0.1", "::1"}, listening


def cluster_processes() -> list:
    """Every process below this test process but this process's own MPI runtime: an Open MPI
    singleton's ``orted`` (started when the collective suite ran in this process), which is no
    part of the cluster."""
    own = [p for p in psutil.Process().children() if p.name() == "orted"]
    excluded = {p.pid for daemon in own for p in [daemon, *daemon.children(recursive=True)]}
    return [p for p in psutil.Process().children(recursive=True) if p.pid not in excluded]


def executable(proc) -> str:
    try:
        return os.path.realpath(proc.exe())
    except psutil.Error:
        return ""


def test_connection_files_are_owner_only(cluster):
    files = cluster.connection_files()
    assert files
    for path in files:
        assert path.startswith(os.environ["IPYTHONDIR"] + os.sep)  # hermetic: not ~/.ipython
        mode = stat.S_IMODE(os.stat(path).st_mode)
        assert mode & 0o077 == 0, (path, oct(mode))


def test_client_with_the_wrong_key_is_refused(cluster):
    import ipyparallel as ipp

    path = next(f for f in cluster.connection_files() if f.endswith("-client.json"))
    with open(path) as fh:
        info = json.load(fh)
    if info.get("curve_serverkey"):  # encrypted: a client with another server key is refused
        import zmq

        info["curve_serverkey"] = zmq.curve_keypair()[0].decode("ascii")
    else:
        info["key"] = "0" * len(info["key"])

    def connect_and_ask():
        client = ipp.Client(info, timeout=3)
        try:
            client.wait_for_engines(3, timeout=3, interactive=False)
            client[:].apply_sync(os.getpid)
        finally:
            client.close()

    with pytest.raises(TimeoutError):  # the controller ignores them
        connect_and_ask()
    usable(cluster)
