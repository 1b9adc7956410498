"""The controller's start, checked: ipyparallel's controller picks its ports when it starts (each
one free at that moment), writes them into its connection files, and binds each one later, in
the process that serves it (the hub, the direct and control queues, the schedulers, the heart
monitor). A port taken in between (another controller starting at the same moment picked the
same one, an outgoing connection got it as its own port) kills that one process and leaves the
rest running: the engines register, then never receive what is sent to them, and the start used
to end after start_timeout with "did not answer" (seen in CI, where two test lanes start clusters
side by side). So the start waits until the controller's own processes listen on every port its
connection files name, and starts a new controller (new ports) as soon as another process
listens on one of them or a process of the controller ended, or when one never opens (a port
held by a connection's own end, GRACE). This wait takes the place of ipyparallel's
fixed one-second pause between the controller and the engines (``Cluster.delay``); a 2-rank
start takes what it took before (8.0 s here).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import signal
import time

import psutil

from ..errors import ControllerError
from .lifetime import process_entry
from .watchdog import kill_with_group

#: controllers started at most, when a process of the previous one ended before listening
ATTEMPTS = 3
#: seconds between looks at the controller's processes
POLL = 0.05
#: seconds without a new port opened after which the ports still missing count as never to open
GRACE = 20.0
#: the entries of the connection files that are ports ("broadcast": one, or one per leaf scheduler)
PORT_KEYS = ("registration", "control", "mux", "task", "iopub", "notification", "hb_ping", "hb_pong", "broadcast")


class ControllerDied(Exception):
    """The controller cannot listen on all its ports: ``facts`` say why (``cause``: a port
    "ports_taken" or "never_opened", a "process_ended" before they opened, or the controller
    itself "ended"), as mpinb.view.error_words words them."""

    def __init__(self, **facts):
        super().__init__(facts)
        self.facts = facts
        self.port_lost = facts["cause"] != "ended"


def named_ports(info: dict) -> set[int]:
    """The ports a connection file's contents name."""
    ports = set()
    for key in PORT_KEYS:
        value = info.get(key)
        for port in value if isinstance(value, list) else [value]:
            if isinstance(port, int) and not isinstance(port, bool):
                ports.add(port)
    return ports


def _read_files(paths) -> dict | None:
    """{path: contents} of the controller's connection files, None while one is missing or
    half written."""
    found = {}
    for path in paths:
        try:
            with open(path) as fh:
                found[path] = json.load(fh)
        except (OSError, ValueError):
            return None
    return found


def _connections(proc: psutil.Process) -> list:
    """A process's TCP sockets (psutil >= 6 calls it net_connections, earlier ones connections)."""
    method = getattr(proc, "net_connections", None) or proc.connections
    return method(kind="tcp")


def _tree(pid: int) -> list[psutil.Process]:
    """The process ``pid`` and its descendants; ControllerDied when it has ended."""
    try:
        root = psutil.Process(pid)
        if root.status() != psutil.STATUS_ZOMBIE:
            return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        pass
    raise ControllerDied(cause="ended", pid=pid)


def listening_ports(tree: list[psutil.Process]) -> set[int]:
    """The TCP ports the processes of ``tree`` listen on (those that ended meanwhile left out)."""
    ports = set()
    for proc in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            ports.update(c.laddr.port for c in _connections(proc) if c.status == psutil.CONN_LISTEN)
    return ports


def taken(ports: set[int], root: int) -> dict[int, int | None]:
    """{port: PID (None where not visible)} of the ``ports`` a process other than ``root`` and its
    descendants listens on, so that the controller cannot. (A connection's own end on one of the
    ports is not counted: whether it keeps the controller from listening there depends on how
    that socket was made; when it does, the port never opens, which GRACE catches.)"""
    try:
        every = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:  # a system that shows other processes' sockets to root only
        return {}
    found = {c.laddr.port: c.pid for c in every
             if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port in ports}
    return {port: pid for port, pid in found.items() if not _descends_from(pid, root)}


def _descends_from(pid: int | None, root: int) -> bool:
    """Whether process ``pid`` is ``root`` or one of its descendants (a process forked since the
    last look at the controller's processes is one)."""
    if pid is None:
        return False
    try:
        proc = psutil.Process(pid)
        return pid == root or any(parent.pid == root for parent in proc.parents())
    except psutil.NoSuchProcess:
        return False


def wait_until_listening(ipp_cluster, deadline: float) -> None:
    """Return once the controller of ``ipp_cluster`` listens on every port its connection files
    name. ControllerDied as soon as the controller or one of its processes ended, or another
    process listens on a port it has not opened, or when no new port opened for GRACE seconds
    (the process that was to open it ended unseen); ControllerError at ``deadline``
    (time.monotonic())."""
    root = ipp_cluster.controller.process.pid
    paths = list(ipp_cluster.controller.connection_files.values())
    named: set[int] | None = None  # once the files are whole: they do not change after
    missing: set[int] = set()
    seen: set[int] = set()
    opened, progress = -1, time.monotonic()
    while True:
        tree = _tree(root)
        now = {p.pid for p in tree}
        ended, seen = seen - now, seen | now
        listening = listening_ports(tree)
        if named is None:
            files = _read_files(paths)
            named = None if files is None else set().union(*map(named_ports, files.values()))
        if named is not None:
            missing = named - listening
            if not missing:
                return
            why = _why_lost(missing, root, ended)
            if why:
                raise ControllerDied(**why)
        if len(listening) > opened:
            opened, progress = len(listening), time.monotonic()
        elif missing and time.monotonic() - progress > GRACE:
            raise ControllerDied(cause="never_opened", ports=sorted(missing))
        if time.monotonic() > deadline:
            raise ControllerError(cause="not_opened", ports=sorted(missing))
        time.sleep(POLL)


def _why_lost(missing: set[int], root: int, ended: set[int]) -> dict | None:
    """Why the ``missing`` ports of the controller ``root`` will not open, if that is known (the
    facts of a ControllerDied): a process of it ``ended``, or another process listens there."""
    if ended:
        return {"cause": "process_ended", "pids": sorted(ended), "ports": sorted(missing)}
    holders = taken(missing, root)
    if holders:  # looked at twice: a socket seen before its (new) process was is not taken
        time.sleep(POLL)
        again = taken(missing, root)
        holders = {port: again[port] for port in sorted(holders) if port in again}
    if holders:
        return {"cause": "ports_taken", "holders": holders}
    return None


def _stop(ipp_cluster) -> None:
    """End a controller that cannot serve: SIGKILL to its process group (it leads one, so the
    processes it forked go too, even those forked since the last look), then ipyparallel's stop."""
    pid = ipp_cluster.controller.process.pid
    entry = process_entry(pid)
    try:
        left = _tree(pid)
    except ControllerDied:
        left = []
    if entry is not None:
        kill_with_group(entry)
    with contextlib.suppress(Exception):  # already ended: ipyparallel forgets it
        ipp_cluster.stop_controller_sync()
    psutil.wait_procs(left, timeout=5)  # gone before the next one starts


def _stop_engines(ipp_cluster) -> None:
    """End the engines started for a controller that cannot serve (they know its ports only)."""
    for engine_set in list(getattr(ipp_cluster, "engines", {}).values()):
        with contextlib.suppress(Exception):  # already gone
            engine_set.signal(signal.SIGKILL)
    with contextlib.suppress(Exception):
        ipp_cluster.stop_engines_sync()
    ipp_cluster.engines.clear()


def remove_connection_files(ipp_cluster) -> None:
    """Remove the connection files of the cluster's id (a controller's that ended, or was killed):
    engines that wait for the next controller's file would read these."""
    security = os.path.join(ipp_cluster.profile_dir, "security")
    for stale in glob.glob(os.path.join(security, f"ipcontroller-{ipp_cluster.cluster_id}-*")):
        with contextlib.suppress(OSError):
            os.remove(stale)


def start_controller(ipp_cluster, timeout: float, with_engines: bool = False) -> int:
    """Start the controller of ``ipp_cluster`` and wait until it serves every port it named (see
    the module's docstring); a controller that cannot (a port taken or never opened, or it
    ended) is stopped and a new one started, ATTEMPTS in all. Returns how many were started.
    ControllerError when the last one failed too, or when ``timeout`` seconds passed.
    ``with_engines``: start the engines as soon as the controller has written where it listens,
    while it opens its ports (the engines' own start, a second of Python imports, goes on
    meanwhile; they connect once the ports are open); a controller that cannot serve takes its
    engines with it, and the next one gets new ones."""
    deadline = time.monotonic() + timeout
    for attempt in range(1, ATTEMPTS + 1):
        remove_connection_files(ipp_cluster)
        ipp_cluster.start_controller_sync()
        try:
            if with_engines:  # they wait for its connection file if they are not given its contents
                ipp_cluster.start_engines_sync()
            wait_until_listening(ipp_cluster, deadline)
            return attempt
        except ControllerDied as exc:
            output = "" if exc.port_lost else ipp_cluster.controller.get_output()[-2000:]
            if with_engines:
                _stop_engines(ipp_cluster)
            _stop(ipp_cluster)
            if attempt == ATTEMPTS or time.monotonic() > deadline:
                raise ControllerError(cause="could_not_start", attempts=attempt, died=exc.facts,
                                      output=output) from None
    raise AssertionError("unreachable")
