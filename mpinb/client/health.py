"""What the client knows about the engines' health: which are gone and how they ended (the
launcher's exit records, faulthandler's report), which MPI call a running rank waits in (its
published status), and the signals it sends them (the stop button, SIGKILL on stop).

A mixin of :class:`mpinb.client.cluster.MPICluster`: it reads the cluster's ipyparallel client,
cluster and engines. Never a local ``os.kill`` with a PID an engine reported: on a cluster
that number belongs to another host.
"""

from __future__ import annotations

import contextlib
import signal
import time

import psutil

from ..wire.status import inflight_of, parse_exit_lines, where_of


def first_remote_error(exc) -> tuple[int | None, str, str]:
    """(rank, exception name, message) of the first engine's error in ipyparallel's
    CompositeError (engine ids are the MPI ranks)."""
    ename, evalue, _, info = exc.elist[0]
    return info.get("engine_id"), ename, evalue


class ClusterHealth:
    """Dead ranks, exit records, fault reports, in-flight calls, signals (see the module)."""

    #: set by MPICluster
    client = None
    _cluster = None
    engines: list
    outstanding: dict
    _watched: dict

    def status(self) -> dict:
        """The cluster at a glance (what ``%mpijax status`` shows): launcher, ranks blocked in an
        earlier cell, how JAX runs, engines, PIDs, hosts, uptime, setup cells."""
        if not self.running:
            return {"running": False, "n": self.n}
        return {
            "running": True,
            "launcher": self.launcher + (f" ({self.slurm_mode})" if self.slurm_mode else ""),
            "lost": self.lost,
            "blocked_ranks": sorted(r for r, ar in self.outstanding.items() if not ar.ready()),
            "checked": self.checked,
            "jax": self._jax_runtime(),
            "n": self.n,
            "engines": list(self.client.ids),
            "uptime_s": round(time.time() - (self.started_at or time.time()), 1),
            "start_s": round(self.start_seconds or 0.0, 2),
            "hlo_capture": all(e.get("hlo_capture") for e in self.engines),
            "mpi_watch": all(e.get("mpi_watch") for e in self.engines),
            "withdraw": self.can_wake(),
            "pids": [e["pid"] for e in self.engines],
            "hosts": sorted({e["host"] for e in self.engines}),
            "setup_cells": len(self.setup_cells),
        }

    def _jax_runtime(self) -> str:
        """How JAX runs on the engines, as the engines said at setup."""
        first = self.engines[0] if self.engines else {}
        devices = len(first.get("devices", ())) or first.get("local_devices", 1)
        each = f"{devices} {first.get('platform', 'cpu').upper()} device{'s' if devices != 1 else ''} each"
        if self.jax_distributed:
            return f"jax.distributed: {first.get('jax_processes')} processes, {each}"
        return f"one process per rank, {each}"

    def interrupt(self, ranks=None) -> None:
        """SIGINT the engines (the notebook's stop button). A rank in Python stops with
        KeyboardInterrupt; a rank blocked inside MPI stays blocked (see inflight), unless it waits
        in a receive and is then woken (``wake``), or in a collective's exchange that the stopped
        ranks then join (``join``): the stop button does both (mpinb.client.freeing.after_stop)."""
        self._signal_engines(signal.SIGINT, ranks)

    def can_wake(self) -> bool:
        """Whether every engine takes back a waiting receive when woken (mpinb.engine.withdraw)."""
        return bool(self.engines) and all(e.get("wake_signal") for e in self.engines)

    def at_rest(self, ranks, timeout: float = 10.0) -> bool:
        """Whether every one of the idle ``ranks`` has no call of its own under way or queued, so
        that all of them may join an exchange (mpinb.engine.withdraw.at_rest); False if one
        cannot say so within ``timeout``."""
        from ..engine.withdraw import at_rest

        try:
            return all(self.on_engines(at_rest, ranks=ranks).get(timeout=timeout))
        except Exception:  # noqa: BLE001 - an engine that cannot answer cannot join either
            return False

    def join(self, ranks, comm: str):
        """Have the idle ``ranks`` join the signature exchange that the others wait in on ``comm``
        ("world" or "default"), to free them (mpinb.engine.withdraw.join); its AsyncResult."""
        from ..engine.withdraw import join

        return self.on_engines(join, comm, ranks=ranks)

    def drop_left(self, ranks):
        """Have the idle ``ranks`` drop the messages left unreceived after ranks were freed
        (mpinb.engine.withdraw.drop_left); its AsyncResult."""
        from ..engine.withdraw import drop_left

        return self.on_engines(drop_left, ranks=ranks)

    def wake(self, ranks=None) -> bool:
        """Send the engines the wake signal: a rank waiting in a receive takes it back and its cell
        fails there (mpinb.engine.withdraw). False, sending nothing, if some engine cannot be woken
        (its setup named no signal: the signal's default action would end it). Never right after
        another signal: Linux gives a signal sent to a process whose main thread has one pending
        to another thread, and Python's sleep then misses a SIGINT."""
        if not self.can_wake():
            return False
        self._signal_engines(self.engines[0]["wake_signal"], ranks)
        return True

    def _signal_engines(self, sig: int, ranks=None) -> None:
        """Send ``sig`` to engines through ipyparallel: each engine's nanny, on the engine's own
        host, signals its engine. Never a local os.kill with a PID an engine reported: on a
        cluster that number belongs to another host."""
        if self.client is None:
            return
        targets = sorted(self._registered() if ranks is None else set(ranks) & self._registered())
        if targets:
            with contextlib.suppress(Exception):  # an engine already gone has no nanny to answer
                self.client.send_signal(sig, targets=targets, block=False)

    def _registered(self) -> set[int]:
        """Engine ids the controller still knows (a dead engine's nanny unregisters it)."""
        try:
            return set(self.client.ids) if self.client is not None else set()
        except Exception:  # noqa: BLE001 - the controller itself is gone
            return set()

    def _kill_engines(self) -> None:
        """SIGKILL every engine (SIGINT cannot free a rank blocked inside MPI), then give the
        nannies a moment to report them gone."""
        self._signal_engines(signal.SIGKILL)
        end = time.monotonic() + 3.0
        while self._registered() and time.monotonic() < end:
            time.sleep(0.05)

    def launcher_ended(self):
        """The exit status of the MPI launcher started on this host if it has ended (an int, or
        'unknown'), else None; None too for a launcher that leaves nothing running here (a
        batch job's ``sbatch``)."""
        engine_sets = getattr(self._cluster, "engines", {}) if self._cluster is not None else {}
        for engine_set in list(engine_sets.values()):
            process = getattr(engine_set, "process", None)
            if not isinstance(process, psutil.Process):
                continue
            if getattr(engine_set, "state", "") == "after":  # ipyparallel saw it end
                status = (getattr(engine_set, "stop_data", None) or {}).get("exit_code")
                return "unknown" if status is None else status
            try:
                status = process.wait(timeout=0)
            except psutil.TimeoutExpired:
                continue
            except psutil.Error:  # already reaped by ipyparallel's own waiter
                status = None
            return "unknown" if status is None else status
        return None

    def _launcher_output(self) -> str:
        """What the MPI launcher and the engines printed so far: the launcher's output file on
        the notebook's host (a batch job's output file is where Slurm writes it). Read afresh
        each time: ipyparallel's get_output() keeps its first read and may delete the file."""
        engine_sets = getattr(self._cluster, "engines", {}) if self._cluster is not None else {}
        text = ""
        for engine_set in list(engine_sets.values()):
            path = getattr(engine_set, "output_file", "")
            try:
                with open(path, errors="replace") as fh:
                    text += fh.read()
            except OSError:  # gone: once the launcher ended, ipyparallel read it and removed it
                with contextlib.suppress(Exception):
                    text += engine_set.get_output() or ""
        return text

    def exit_records(self) -> dict[int, dict]:
        """How dead engines ended: {rank: {"description": ..., "fault": ...}}, from the exit
        record lines mpinb.launch.rank writes and the MPI launcher brings back (mpinb.wire.status)."""
        return parse_exit_lines(self._launcher_output())

    def dead_ranks(self) -> dict[int, str]:
        """{rank: how it ended} for engines that are gone: unregistered from the controller (their
        nanny saw them exit), described by the launcher's exit record where there is one."""
        registered = self._registered()
        gone = [e["rank"] for e in self.engines if e["rank"] not in registered]
        if not gone:
            return {}
        records = self.exit_records()  # only read once something ended: it is the launcher's log
        return {rank: records[rank]["description"] if rank in records else "process ended" for rank in gone}

    def watch(self, results: dict) -> None:
        """The RankTasks of the cell being submitted, by rank: where ``inflight`` reads."""
        self._watched = dict(results)

    def inflight(self, rank: int) -> dict | None:
        """The MPI call ``rank`` is blocked in, as its engine last published it over the
        network while running a cell (None if idle, not in a collective, or unknown)."""
        ar = self.outstanding.get(rank) or self._watched.get(rank)
        info = inflight_of(ar.data) if ar is not None else None
        return None if info is None else dict(info, age=0.0)  # published every 0.2 s: fresh

    def where(self, rank: int) -> dict | None:
        """Where ``rank``'s running cell is (its line, the user's frame, a jitted call), as its
        engine last published it (mpinb.engine.stall); None if idle or unknown."""
        ar = self.outstanding.get(rank) or self._watched.get(rank)
        return where_of(ar.data) if ar is not None else None

    def fault_report(self, rank: int) -> str:
        """What faulthandler wrote for a rank that crashed (segfault traceback), if anything."""
        return self.exit_records().get(rank, {}).get("fault", "")

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds (None: no limit) for the ranks still running an
        earlier cell (one that timed out, say) to finish it; True once every rank is idle."""
        end = None if timeout is None else time.monotonic() + timeout
        for ar in list(self.outstanding.values()):
            left = None if end is None else max(0.0, end - time.monotonic())
            ar.wait(left)
        return all(ar.ready() for ar in self.outstanding.values())
