"""Running one cell on the ranks of a cluster (client side), in phases: submit, pump output and
states, wait (timeout, grace after a failure), interrupt, settle deaths, collect the result.

``MPICluster.run_cell(code, ...)`` is the way in; the engines' side is mpinb.engine.execute.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import time
from collections.abc import Callable

from ..analysis import divergence
from ..analysis import hlo as hlo_mod
from ..analysis.deadlock import prove
from ..options.cell_options import CellOptions, parse_ranks
from ..view import error_words as _error_words  # noqa: F401 - gives mpinb.errors its voice
from ..view.divergence_words import divergence_finding
from ..wire.records import ErrorInfo, RankRecord
from . import freeing
from .rank_task import per_rank
from .result import CellResult, Note

#: seconds the other ranks get to finish once one failed or died
DEFAULT_GRACE = 2.0
#: seconds to wait, once a rank's result is in, for the rest of its output
OUTPUT_WAIT = 30.0
#: a deadlock is proven only from ranks blocked in the same call this long, and ranks that
#: left the cell this long ago (a message on its way has arrived by then)
SETTLE = 1.0
#: a blocked rank's report counts only if its engine refreshed it this recently (it does every 0.2 s)
FRESH = 1.0


def state_reporter(stream) -> Callable | None:
    """``stream.state`` as a function of six arguments (rank, state, seconds, inflight,
    error_name, where), also for a stream whose ``state`` takes the first five only (streams
    written before ``where`` existed); None for a stream without ``state``."""
    report = getattr(stream, "state", None)
    if report is None:
        return None
    function, method = getattr(report, "__func__", report), hasattr(report, "__func__")
    code = getattr(function, "__code__", None)  # a function edited in place (autoreload) is asked again
    try:
        takes = _takes_where(function, code, method)
    except TypeError:  # a callable that cannot be a key: read its signature each time
        takes = _takes_where.__wrapped__(function, code, method)
    if takes:
        return report
    return lambda *args: report(*args[:5])


@functools.lru_cache(maxsize=256)
def _takes_where(function, code, method: bool) -> bool:
    """Whether ``function`` (a stream's ``state``, unbound where it is a ``method``; ``code``: its
    code object, part of the key) takes the sixth argument; asked once per function, not once per cell."""
    try:
        inspect.signature(function).bind(*(None,) * method, 0, "running", 0.0, None, None, None)
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): give it all
        pass
    return True


class CellRun:
    """One run of one cell on the chosen ranks of a cluster, in phases: submit, pump output, wait
    (timeout and grace), interrupt, settle deaths, collect. Use once, through
    ``MPICluster.run_cell``.

    stream: callback(rank, "stdout"|"stderr"|"error", text) receiving output and errors while
        the cell runs; if it has a ``state(rank, state, seconds, inflight, error_name[, where])``
        method, that is told each rank's state after each poll ("running" with the seconds
        since the cell started, the mpinb collective it waits in and, if the method takes a
        sixth argument, where it is: the cell's line, the user's frame, a jitted call
        (mpinb.engine.stall); or "finished"/"failed" with the rank's time); if it has a
        ``tick()`` method, that is called after each poll (a throttled stream sends what it
        holds when its interval is up).
    grace: once a rank failed or died, seconds the others get to finish before the result is
        reported (fail fast instead of waiting for ranks blocked in a collective).

    KeyboardInterrupt (the notebook's stop button) interrupts the engines, frees those waiting
    in a receive or a checked collective's exchange (mpinb.cells.freeing), and reports which
    ranks stay blocked inside MPI.
    ClusterBusy while ranks still run an earlier cell,
    ClusterLost once the MPI job ended."""

    #: seconds between two checks of which engines are gone
    LIVENESS_INTERVAL = 0.3

    def __init__(self, cluster, code: str, options: CellOptions,
                 stream: Callable[[int, str, str], None] | None = None, poll: float = 0.05,
                 grace: float = DEFAULT_GRACE):
        self.cluster, self.code, self.options = cluster, code, options
        self.stream, self.poll, self.grace = stream, poll, grace
        self.targets: list[int] = []
        self.pending: dict = {}                    # rank -> RankTask of this cell
        self.seen: dict[tuple[int, str], int] = {}  # (rank, stream) -> characters passed on
        self.announced: set[int] = set()           # ranks whose end was passed on
        self.fetched: dict[int, RankRecord] = {}
        self.t0 = 0.0
        self.timed_out = self.interrupted = False
        self.first_failure: float | None = None
        self.dead: dict[int, dict] = {}             # rank -> its death (mpinb.cells.health.dead_ranks)
        self.taken_down: set[int] = set()          # dead ranks the MPI launcher ended after another's death
        self.last_liveness: float | None = None  # never checked yet
        self.deadlock = None                       # a proven deadlock (mpinb.analysis.deadlock.Deadlock)
        self.waits: dict[int, tuple] = {}          # rank -> (call, seconds, when the seconds last moved)
        self.left_at: dict[int, float] = {}        # rank -> when its result was first seen
        self.last_proof: float | None = None
        self.woken: list[int] = []                 # ranks the stop button freed where they waited
        self.freed_at: dict[int, dict | None] = {}  # ranks freed after a proven deadlock: where each waited
        self.report = state_reporter(stream)      # stream.state, if the stream shows states
        self.ended: dict | None = None             # the cluster ended outside the notebook meanwhile: how
        self.mended: list[dict] = []               # what the cluster mended before the cell (its notes)

    def run(self) -> CellResult:
        """Run every phase in turn and return the cell's result."""
        self.claim_cluster()
        self.check_options()
        self.submit()
        try:
            self.wait()
        except KeyboardInterrupt:
            self.interrupt()
        try:
            freed = self.free_in_place()
        except (Exception, KeyboardInterrupt):  # noqa: BLE001 - e.g. the stop button meanwhile: restart instead
            freed = []
        self.drain_output()
        elapsed = time.perf_counter() - self.t0
        self.settle_deaths()
        result = self.collect(elapsed)
        if self.deadlock is not None and not freed and self.options.deadlock == "restart":
            freeing.restart_after_deadlock(self.cluster, result)
            result.elapsed = time.perf_counter() - self.t0  # the cell's whole time, its restart too
        else:
            freeing.tidy_after(self, result, freed, self.woken)
            result.freed = self.freed_at
        return result

    def free_in_place(self) -> list[int]:
        """After a proven deadlock (``--deadlock restart``), free the ranks where they wait if each
        can be (mpinb.cells.freeing); the ranks freed."""
        if self.deadlock is None or self.options.deadlock != "restart":
            return []
        places = {r: self.cluster.where(r) for r, task in self.pending.items() if not task.ready()}
        freed = freeing.free_in_place(self)
        self.freed_at = {r: places.get(r) for r in freed}
        return freed

    # ----------------------------------------------------------------------- submit
    def claim_cluster(self) -> None:
        """Make sure the cluster can take a cell (else raise) and start a new one on it."""
        self.mended = self.cluster.ensure_ready()
        self.cluster.begin_cell()

    def check_options(self) -> None:
        """Resolve the ranks to run on."""
        self.targets = parse_ranks(self.options.ranks, self.cluster.n)

    def submit(self) -> None:
        """Send the cell to each target rank and start the clock."""
        from ..engine.execute import execute_cell

        cluster, targets = self.cluster, self.targets
        self.t0 = self.last_liveness = self.last_proof = time.perf_counter()  # both first due a moment on
        participants = tuple(targets) if len(targets) < cluster.n else None
        options = dataclasses.replace(self.options, hlo=self.options.hlo and cluster.hlo)  # none captured: none asked
        # one request for all ranks (each apply costs ~0.7 ms here), then one result per rank
        sent = cluster.on_engines(execute_cell, self.code, options, participants, ranks=targets)
        self.pending = dict(zip(targets, per_rank(sent), strict=True))
        cluster.watch(self.pending)
        self.seen = {(r, s): 0 for r in targets for s in ("stdout", "stderr")}

    # ----------------------------------------------------------------------- output
    def record(self, r: int) -> RankRecord:
        """The record of a finished rank, fetched once."""
        if r not in self.fetched:
            self.fetched[r] = _record(self.pending[r], r)
        return self.fetched[r]

    def all_ready(self) -> bool:
        """Whether every rank's result is in."""
        return all(ar.ready() for ar in self.pending.values())

    def pump_output(self) -> None:
        """Pass new output, and the error of each rank that just failed, to ``stream``; let a
        stream that buffers (``flush()``) show what it holds, so that the last lines before a
        hang are seen while the ranks hang."""
        for r, ar in self.pending.items():
            if self.stream is not None:
                self._pass_new_output(r, ar)
            if ar.ready() and r not in self.announced:
                self.announced.add(r)
                rec = self.record(r)
                if self.stream is not None and not rec.ok and rec.error:
                    self.stream(r, "error", str(rec.error))
        self._pass_states()
        tick = getattr(self.stream, "tick", None)
        if tick is not None:
            tick()

    def _pass_states(self) -> None:
        """Tell a stream that shows the ranks' states (``state()``) where each rank is: running
        for how long and in which collective, finished in how long, or failed with what."""
        report = self.report
        if report is None:
            return
        now = time.perf_counter()
        for r, ar in self.pending.items():
            if not ar.ready():
                report(r, "running", now - self.t0, self.cluster.inflight(r), None, self.cluster.where(r))
                continue
            rec = self.record(r)
            report(r, "finished" if rec.ok else "failed", rec.elapsed, None, rec.error.ename if rec.error else None,
                   None)

    def _pass_new_output(self, r: int, ar) -> None:
        """Pass the stdout and stderr ``r`` printed since the last call to ``stream``."""
        for s in ("stdout", "stderr"):
            text = getattr(ar, s)
            if len(text) > self.seen[(r, s)]:
                new, self.seen[(r, s)] = text[self.seen[(r, s)]:], len(text)
                self.stream(r, s, new)

    def drain_output(self) -> None:
        """Wait for the rest of each finished rank's output (a result can arrive before it), pump it."""
        for r, ar in self.pending.items():
            if ar.ready() and not self.record(r).engine_died:
                ar.wait_for_output(0 if self.ended else OUTPUT_WAIT)  # ended: nothing more will come
        self.pump_output()

    # ----------------------------------------------------------------------- wait
    def wait(self) -> None:
        """Wait for every rank, until the timeout, or until the others' grace after a failure or death ends."""
        while not self.all_ready():
            now = time.perf_counter()
            if self._out_of_time(now):
                self.timed_out = True
                return
            self._note_first_failure(now)
            if self.first_failure is not None and now - self.first_failure > self.grace:
                return  # fail fast: the others had their grace period
            if self._liveness_due(now) and self._only_dead_left(now):
                return
            if self._deadlock_proven(now):
                return
            self.wait_a_little()
            self.pump_output()

    def _liveness_due(self, now: float) -> bool:
        """Whether the engines' liveness was never checked, or not for ``LIVENESS_INTERVAL``."""
        return self.last_liveness is None or now - self.last_liveness > self.LIVENESS_INTERVAL

    def _out_of_time(self, now: float) -> bool:
        """Whether the timeout (if any) has passed."""
        return self.options.timeout is not None and now - self.t0 > self.options.timeout

    def _note_first_failure(self, now: float) -> None:
        """Start the grace period when a rank's result first reports a failure."""
        if self.first_failure is None and any(ar.ready() and not self.record(r).ok
                                              for r, ar in self.pending.items()):
            self.first_failure = now

    def _only_dead_left(self, now: float) -> bool:
        """Check which ranks died (a death starts the grace period); True if no live rank is still running."""
        self.last_liveness = now
        self.ended = self.cluster.ended_outside(job=False)  # stopped outside, or its controller gone
        if self.ended is not None:
            return True  # every rank still running is gone with it (settle_deaths)
        self.dead = {r: why for r, why in self.cluster.dead_ranks().items() if r in self.pending}
        if not self.dead:
            return False
        self.first_failure = self.first_failure or now
        return all(ar.ready() or r in self.dead for r, ar in self.pending.items())

    def _deadlock_proven(self, now: float) -> bool:
        """Whether the ranks still running are proven to wait for each other (or for ranks that
        left the cell) forever, from what each one waits in (mpinb.analysis.deadlock). Checked
        every 0.25 s, from blocked calls at least SETTLE old whose reports are fresh."""
        if self.options.deadlock == "off" or (self.last_proof is not None and now - self.last_proof < 0.25):
            return False
        self.last_proof = now
        blocked = {}
        for r, ar in self.pending.items():
            if ar.ready():
                self.left_at.setdefault(r, now)
                continue
            rec = self.cluster.inflight(r)
            if rec and not self.settled(r, rec, now):
                return False  # a rank only just blocked: wait for it, so that the proof names every rank
            if rec:
                blocked[r] = rec
        if not blocked or any(now - t < SETTLE for t in self.left_at.values()):
            return False  # or a rank only just left: wait for it too, so that the proof names every rank
        left = {r for r, t in self.left_at.items() if self.record(r).ok}
        lines = {r: (self.cluster.where(r) or {}).get("line") for r in blocked}
        self.deadlock = prove(blocked, left, lines)
        return self.deadlock is not None

    def settled(self, r: int, rec: dict, now: float) -> bool:
        """Whether rank ``r`` has been in the call ``rec`` for SETTLE seconds, by a fresh report."""
        call, seconds, moved = self.waits.get(r, (None, None, now))
        if rec.get("call") != call or rec.get("seconds") != seconds:
            moved = now
        self.waits[r] = (rec.get("call"), rec.get("seconds"), moved)
        return "comm" in rec and (rec.get("seconds") or 0.0) >= SETTLE and now - moved <= FRESH

    def wait_a_little(self) -> None:
        """Block up to ``poll`` seconds on the first unfinished rank."""
        unfinished = [ar for ar in self.pending.values() if not ar.ready()]
        if unfinished:
            unfinished[0].wait(self.poll)

    # ----------------------------------------------------------------------- interrupt
    def interrupt(self) -> None:
        """SIGINT the target ranks (the stop button) and give them the grace period to stop: after
        freeing.WAKE_AFTER, those still waiting in a receive are woken; then, once only ranks
        waiting in a collective's exchange are left, the others join it (freeing.after_stop)."""
        self.interrupted = True
        self.cluster.interrupt(self.targets)
        start = time.perf_counter()
        steps: set[str] = set()
        try:
            while time.perf_counter() < start + self.grace and not self.all_ready():
                try:
                    freeing.after_stop(self, time.perf_counter() - start, steps)
                except Exception:  # noqa: BLE001 - an engine that failed to join or died: free no more,
                    steps.add("given up")  # the report says what still runs
                time.sleep(self.poll)
        except KeyboardInterrupt:  # pressed again: report what is known now
            pass

    # ----------------------------------------------------------------------- deaths
    def settle_deaths(self) -> None:
        """If a rank died or did not finish, settle which ranks are dead and why (see _settle_deaths)."""
        engine_died = [r for r, ar in self.pending.items() if ar.ready() and self.record(r).engine_died]
        if self.ended is not None:  # what the MPI launcher said of the ranks before it was ended, if anything
            records = self.cluster.exit_records()
            self.dead = {r: records.get(r, {"returncode": None}) for r, ar in self.pending.items()
                         if not ar.ready() or r in engine_died}
        elif engine_died or self.dead or not self.all_ready():
            self.dead, self.taken_down = _settle_deaths(self.cluster, self.pending, engine_died)

    # ----------------------------------------------------------------------- collect
    def collect(self, elapsed: float) -> CellResult:
        """Build the CellResult, leaving ranks still running or a lost job with the cluster."""
        records, states, stdout, stderr, inflight, faults, where = {}, {}, {}, {}, {}, {}, {}
        for r, ar in self.pending.items():
            stdout[r], stderr[r] = ar.stdout, ar.stderr
            if r in self.dead and (not ar.ready() or self.record(r).engine_died):
                records[r], states[r] = None, "dead"
                faults[r] = self.cluster.fault_report(r)
            elif not ar.ready():
                records[r], states[r] = None, "running"
                inflight[r] = self.cluster.inflight(r)
                where[r] = self.cluster.where(r)
                self.cluster.keep_running(r, ar)
            else:
                rec = self.record(r)
                records[r] = rec
                states[r] = "finished" if rec.ok else "failed"
        running = [r for r, s in states.items() if s == "running"]
        if self.deadlock is not None and self.options.deadlock == "restart" and not self.dead:
            notes = [Note("deadlock", {"deadlock": self.deadlock})]  # what follows frees them (mpinb.cells.freeing)
        else:
            notes = self._job_notes(running, inflight, where)
            if self.deadlock is not None:
                notes.insert(0, Note("deadlock", {"deadlock": self.deadlock}))
        per_rank_hlo = {r: rec.hlo for r, rec in records.items() if rec}
        finished = [r for r, state in states.items() if state == "finished"]
        warnings = hlo_mod.analyze(per_rank_hlo) if any(per_rank_hlo.values()) else []
        ran = {r: rec.ran for r, rec in records.items() if rec}
        left = self.deadlock.left if self.deadlock is not None else []  # its sentence says those already
        warnings += [divergence_finding(d) for d in divergence.find(ran, finished)
                     if not divergence.said_by_deadlock(d, left)]
        if self.options.hlo and self.cluster.hlo and not all(rec.hlo_capture for rec in records.values() if rec):
            notes.append(Note("hlo_capture_off"))
        return CellResult(self.code, self.targets, records, stdout, stderr, states, elapsed, warnings,
                          self.timed_out, self.options.compare, notes, inflight, self.dead, faults, self.interrupted,
                          where, self.deadlock)

    def _job_notes(self, running: list[int], inflight: dict[int, dict | None],
                   where: dict[int, dict | None]) -> list[Note]:
        """What to do next when the cluster ended outside the notebook or the MPI job ended
        (marking the cluster so), or ranks still run; and what the cluster mended before the cell."""
        mended = [Note(fact["cause"], fact) for fact in self.mended]
        if self.ended is not None:
            self.cluster.mark_ended(self.ended)
            return [Note("ended_outside", {"ended": self.ended, "replayed": len(self.cluster.setup_cells)}), *mended]
        if self.dead:
            cause = self._cause_of_death()
            self.cluster.mark_lost(cause)
            return [Note("job_ended", {"lost": cause}), *mended]
        if not running:
            return mended
        return [Note("way_out", {"running": running, "inflight": inflight, "where": where,
                                 "replayed": len(self.cluster.setup_cells)}), *mended]

    def _cause_of_death(self) -> dict:
        """{"rank": R, and its death} for the first dead rank not merely taken down by the MPI launcher."""
        dead = self.dead
        causes = [r for r in sorted(dead) if r not in self.taken_down]
        first = causes[0] if causes else min(dead)
        return {"rank": first, **dead[first]}


def _settle_deaths(cluster, pending, engine_died, wait: float = 5.0) -> tuple[dict[int, dict], set[int]]:
    """({rank: death} of dead ranks among ``pending``, the ranks among them that the MPI launcher
    took down after another rank's death, their death saying so: ``after`` that rank, which
    ended with ``after_returncode``). Waits (up to ``wait`` s) for the
    exit record of at least one dead rank: it travels through the MPI launcher's output, after
    the death itself is known."""
    end = time.perf_counter() + wait
    while True:
        dead = {r: why for r, why in cluster.dead_ranks().items() if r in pending}
        records = cluster.exit_records()
        if (not engine_died or all(r in dead for r in engine_died)) and (not dead or any(r in records for r in dead)):
            break
        if time.perf_counter() > end:
            break
        time.sleep(0.1)
    for r in engine_died:
        dead.setdefault(r, {"returncode": None})
    causes = sorted(r for r in dead if r in records)
    taken_down = {r for r in dead if causes and r not in causes}
    for r in taken_down:
        dead[r] = {"returncode": dead[r]["returncode"], "after": causes[0],
                   "after_returncode": records[causes[0]]["returncode"]}
    return dead, taken_down


def _record(ar, rank: int) -> RankRecord:
    """The engine's record; if the engine itself failed, a failure record saying so, with the
    engine's death as a fact of its own (ipyparallel's EngineError), never read from a message."""
    from ipyparallel import error

    try:
        return ar.get(0)
    except Exception as exc:  # noqa: BLE001 - e.g. EngineError: the engine died
        ename = getattr(exc, "ename", None) or type(exc).__name__  # a RemoteError names the remote class
        died = isinstance(exc, error.EngineError) or ename == "EngineError"
        return RankRecord(rank=rank, ok=False, error=ErrorInfo(ename, str(exc), str(exc)), engine_died=died)
