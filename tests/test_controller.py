"""The controller's start (mpinb.cluster.controller): ipyparallel's controller binds the ports it
picked only after it has named them, each in its own process, so a port another process took
in between left a controller without one of its queues, whose engines registered and then never
answered. The start now sees that at once and starts another controller; a port taken every
time ends the start with ControllerError, nothing left running. The ports are forced here
(``--IPController.ports``) so that the test can take one of them first."""

from __future__ import annotations

import socket
import time

import psutil
import pytest
from ipyparallel.util import select_random_ports

from mpinb import MPICluster
from mpinb.cluster import controller
from mpinb.engine.self_account import report
from mpinb.errors import ControllerError

#: the place in the controller's port pool of the port the test takes: ipyparallel draws the
#: engine-side ports first (registration, control, mux, ...): the direct queue's, without which
#: no engine receives what is sent to it
TAKEN = 2


def _cluster_with_ports(pool: list[int], **options) -> MPICluster:
    cluster = MPICluster(n=2, progress=False, **options)
    config = cluster.config

    def with_ports():
        c = config()
        c.Cluster.controller_args = [*c.Cluster.get("controller_args", []),
                                     "--IPController.ports=" + ",".join(map(str, pool))]
        return c

    cluster.config = with_ports
    return cluster


def _listening_on(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(1)
    return sock


def _controllers_of(cluster_id: str) -> list[psutil.Process]:
    """The controller processes of a cluster, by the id mpinb puts in their environment."""
    found = []
    for proc in psutil.process_iter():
        try:
            if (proc.environ().get("MPINB_CLUSTER_ID") == cluster_id
                    and "ipyparallel.controller" in " ".join(proc.cmdline())):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def test_the_ports_a_connection_file_names():
    info = {"interface": "tcp://127.0.0.1", "registration": 40001, "control": 40002, "mux": 40003,
            "hb_ping": 40004, "hb_pong": 40005, "broadcast": [40006, 40007], "key": "abc",
            "signature_scheme": "hmac-sha256", "ssh": "", "location": "host"}
    assert controller.named_ports(info) == set(range(40001, 40008))
    assert controller.named_ports({"notification": 40010, "broadcast": 40011, "task": 40012,
                                   "iopub": 40013}) == {40010, 40011, 40012, 40013}


def test_a_port_taken_before_the_controller_listens_gets_a_new_controller(monkeypatch):
    pool = select_random_ports(24)
    holder = _listening_on(pool[TAKEN])
    stopped = []
    stop = controller._stop

    def stop_then_free(ipp_cluster):  # the port is free again for the second controller
        stop(ipp_cluster)
        stopped.append(ipp_cluster.cluster_id)
        holder.close()

    monkeypatch.setattr(controller, "_stop", stop_then_free)
    with _cluster_with_ports(pool) as cluster:
        assert [r["rank"] for r in cluster.every_engine.apply(report)] == [0, 1]
        assert stopped == [cluster.cluster_id]
        assert _controllers_of(cluster.cluster_id)  # what the tests below count as left running


def test_a_port_held_by_a_connection_s_own_end_gets_a_new_controller(monkeypatch):
    # how a port is lost to connections: not listened on, so only its never opening tells
    pool = select_random_ports(24)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    holder = socket.socket()
    holder.bind(("127.0.0.1", pool[TAKEN]))
    holder.connect(listener.getsockname())
    accepted, _ = listener.accept()
    stopped = []
    stop = controller._stop

    def stop_then_free(ipp_cluster):  # the far end closes first: the port is left in no state
        stop(ipp_cluster)
        stopped.append(ipp_cluster.cluster_id)
        accepted.close()
        holder.close()

    monkeypatch.setattr(controller, "_stop", stop_then_free)
    monkeypatch.setattr(controller, "GRACE", 5.0)
    try:
        with _cluster_with_ports(pool) as cluster:
            assert [r["rank"] for r in cluster.every_engine.apply(report)] == [0, 1]
            assert stopped == [cluster.cluster_id]
    finally:
        listener.close()


def test_a_port_taken_every_time_ends_the_start_at_once_with_nothing_left():
    pool = select_random_ports(24)
    holder = _listening_on(pool[TAKEN])
    cluster = _cluster_with_ports(pool, start_timeout=120, cluster_id=f"ports-taken-{pool[0]}")
    t0 = time.monotonic()
    try:
        with pytest.raises(ControllerError, match=str(pool[TAKEN])):
            cluster.start()
    finally:
        holder.close()
    assert time.monotonic() - t0 < 60  # seen at once, not after start_timeout
    assert not cluster.running
    assert not _controllers_of(cluster.cluster_id)


def test_a_controller_that_cannot_listen_at_all_ends_the_start_at_once_with_its_words():
    # 192.0.2.1 (TEST-NET-1) is no address of this host: the controller cannot bind there
    cluster = MPICluster(n=2, progress=False, controller_ip="192.0.2.1", start_timeout=120,
                         cluster_id="no-such-interface")
    t0 = time.monotonic()
    with pytest.raises(ControllerError) as raised:
        cluster.start()
    assert time.monotonic() - t0 < 60  # seen at once, not after start_timeout
    assert "Traceback" in str(raised.value)  # the controller's own output, quoted
    assert not cluster.running
    assert not _controllers_of("no-such-interface")
