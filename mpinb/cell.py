"""Running one cell on the ranks of a cluster and collecting one result (client side).

The plain-Python API behind ``%%mpijax``::

    result = run_cell(cluster, code, ranks="0-1", compare=True, show=["y"], timeout=30)
    result.ok, result.warnings, result.records[0].comparisons
    display(result)   # per-rank view: widgets in a notebook, text elsewhere
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

from . import compare as cmp
from . import hlo as hlo_mod
from .grouping import label
from .records import ErrorInfo, RankRecord, State


def parse_ranks(spec, size: int) -> list[int]:
    """'all', '0', '0,2', '1-3', '0,2-3' or a sequence of ints -> sorted ranks within [0, size)."""
    if spec is None or (isinstance(spec, str) and spec.strip().lower() in ("", "all", "*")):
        return list(range(size))
    if isinstance(spec, int):
        spec = [spec]
    if isinstance(spec, str):
        ranks = set()
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            try:
                if "-" in part:
                    lo, hi = part.split("-", 1)
                    ranks.update(range(int(lo), int(hi) + 1))
                else:
                    ranks.add(int(part))
            except ValueError:
                raise ValueError(f"--ranks: cannot parse {part!r} in {spec!r} (use e.g. 0,2-3)") from None
        spec = ranks
    ranks = sorted({int(r) for r in spec})
    bad = [r for r in ranks if not 0 <= r < size]
    if bad:
        raise ValueError(f"--ranks: rank(s) {bad} out of range for {size} ranks")
    if not ranks:
        raise ValueError("--ranks: no rank selected")
    return ranks


class ClusterBusy(RuntimeError):
    """Ranks are still running (or blocked in MPI inside) an earlier cell."""


class ClusterLost(RuntimeError):
    """The MPI job ended (a rank died); only a restart helps."""


class CellFailed(RuntimeError):
    """Raised by ``%%mpijax`` after the view is shown when a rank failed, died or did not finish
    (``--no-raise`` turns it off). ``.result`` is the :class:`CellResult`."""

    def __init__(self, result: CellResult):
        self.result = result
        problems = []
        for rank, state in sorted(result.states.items()):
            rec = result.records.get(rank)
            if state == "failed" and rec.error:
                problems.append(f"rank {rank}: {rec.error}")
            elif state == "dead":
                problems.append(f"rank {rank} {result.dead.get(rank, 'died')}")
            elif state == "running":
                problems.append(f"rank {rank} still running")
        super().__init__(f"{len(problems)} of {len(result.ranks)} ranks did not finish the cell: "
                         + "; ".join(problems))

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback (as for ipyparallel's CompositeError): one
        line under the view, which already shows each rank's error with its traceback."""
        words = {"failed": "failed", "dead": "died", "running": "still running"}
        by_state: dict[str, list[int]] = {}
        for rank, state in sorted(self.result.states.items()):
            if state in words:
                by_state.setdefault(state, []).append(rank)
        what = ", ".join(f"{label(ranks)} {words[state]}" for state, ranks in by_state.items())
        return [f"CellFailed: {what} (see the view above; the whole result is in _mpijax)"]


DEFAULT_GRACE = 2.0
#: seconds to wait, once a rank's result is in, for the rest of its output
OUTPUT_WAIT = 30.0


def _fmt_bytes(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def describe_inflight(info: dict | None) -> str:
    """'blocked in allreduce (call 57, 16 B, waiting 12.3 s)' or 'running Python code'."""
    if not info:
        return "not inside an mpinb collective (Python code, or an mpi4py call)"
    peer = f", peer {info['peer']}" if info.get("peer", -1) >= 0 else ""
    return (f"blocked in {info['op']} (call {info['call']}, {_fmt_bytes(info['bytes'])}{peer}, "
            f"waiting {info['seconds'] + info.get('age', 0.0):.1f} s)")


@dataclasses.dataclass
class CellResult:
    code: str
    ranks: list[int]
    records: dict[int, RankRecord | None]
    stdout: dict[int, str]
    stderr: dict[int, str]
    states: dict[int, State]
    elapsed: float
    warnings: list = dataclasses.field(default_factory=list)
    timed_out: bool = False
    compare: bool = False
    notes: list[str] = dataclasses.field(default_factory=list)
    inflight: dict[int, dict | None] = dataclasses.field(default_factory=dict)
    dead: dict[int, str] = dataclasses.field(default_factory=dict)
    faults: dict[int, str] = dataclasses.field(default_factory=dict)
    interrupted: bool = False
    # how the view shows it: ranks with the same output grouped (False) or every rank in full;
    # at most max_lines lines of each stream per rank (head and tail; None or 0: all)
    by_rank: bool = False
    max_lines: int | None = 200

    @property
    def ok(self) -> bool:
        return all(s == "finished" for s in self.states.values())

    @property
    def comparisons(self) -> list:
        out = []
        for rec in self.records.values():
            if rec:
                out.extend(rec.comparisons)
        return out

    def comparison_summary(self) -> str:
        if not self.compare:
            return ""
        if any(rec and rec.eager_error for rec in self.records.values()):
            return "eager run failed"
        per_rank = {r: rec.comparisons for r, rec in self.records.items() if rec}
        return cmp.summary(per_rank) or "nothing to compare"

    def summary(self) -> str:
        n = len(self.ranks)
        parts = [f"{n} rank{'s' if n != 1 else ''}", f"{self.elapsed:.2f} s"]
        failed = [r for r, s in self.states.items() if s == "failed"]
        running = [r for r, s in self.states.items() if s == "running"]
        dead = [r for r, s in self.states.items() if s == "dead"]
        if failed:
            parts.append(f"{len(failed)} failed ({label(failed)})")
        if running:
            parts.append(f"{len(running)} still running ({label(running)})")
        if dead:
            parts.append(f"{len(dead)} dead ({'; '.join(f'rank {r} {self.dead[r]}' for r in dead)})")
        if self.timed_out:
            parts.append("timed out")
        if self.interrupted:
            parts.append("interrupted")
        findings = [w for w, _ in hlo_mod.distinct(self.warnings)]
        kinds = sorted({w.kind for w in findings}, key=lambda k: (["error", "warning", "info"].index(
            hlo_mod.KINDS[k].severity), k))
        detail = ", ".join(f"{sum(w.kind == k for w in findings)} {k} ({hlo_mod.KINDS[k].severity})" for k in kinds)
        n_found = len(findings)
        parts.append(f"{n_found} layout finding{'s' if n_found != 1 else ''}" + (f": {detail}" if detail else ""))
        comp = self.comparison_summary()
        if comp:
            parts.append(comp)
        return ", ".join(parts)

    def text(self) -> str:
        from .display import render_text

        return render_text(self)

    def _repr_mimebundle_(self, include=None, exclude=None):
        from .display import mimebundle

        return mimebundle(self)

    def __repr__(self) -> str:
        return self.text()


def run_cell(cluster, code: str, *, ranks=None, compare: bool = False, hlo: bool = True,
             timeout: float | None = None, show: Sequence[str] = (), images: bool = False,
             stream: Callable[[int, str, str], None] | None = None, poll: float = 0.05,
             grace: float = DEFAULT_GRACE, label: str | None = None, header: str = "") -> CellResult:
    """Run ``code`` on the chosen ranks of a running :class:`~mpinb.cluster.MPICluster`.

    compare: first run the cell under ``jax.disable_jit()`` in each rank's namespace and roll
        back the names it bound, then run it jitted; compare the JAX values and Python ints it
        assigned, its value and its stdout. Caveat: the cell runs twice, so side effects
        (appending to a list, writing files) happen twice.
    hlo: capture and analyse the optimized HLO of the modules compiled during the cell.
    timeout: seconds to wait; on expiry the result lists the ranks still running and the MPI
        call each is blocked in.
    show: names of variables to summarise per rank.
    stream: callback(rank, "stdout"|"stderr"|"error", text) receiving output and errors while
        the cell runs; if it has a ``state(rank, state, seconds, inflight, error_name)`` method,
        that is told each rank's state after each poll ("running" with the seconds since the
        cell started and the collective it waits in, or "finished"/"failed" with the rank's
        time); if it has a ``tick()`` method, that is called after each poll (a throttled stream
        sends what it holds when its interval is up).
    grace: once a rank failed or died, seconds the others get to finish before the result is
        reported (fail fast instead of waiting for ranks blocked in a collective).
    label, header: how tracebacks name the cell (``In[5]``: ``Cell In[5], line 4``) and the
        cell's text above ``code`` (the ``%%mpijax`` line), so that line numbers are the notebook's.

    KeyboardInterrupt (the notebook's stop button) interrupts the engines and reports which
    ranks stay blocked inside MPI. Raises ClusterBusy while ranks still run an earlier cell,
    ClusterLost once the MPI job ended.
    """
    return CellRun(cluster, code, ranks=ranks, compare=compare, hlo=hlo, timeout=timeout, show=show,
                   images=images, stream=stream, poll=poll, grace=grace, label=label, header=header).run()


class CellRun:
    """One run of one cell on the chosen ranks of a cluster, in phases: submit, pump output, wait
    (timeout and grace), interrupt, settle deaths, collect. Use once, through :func:`run_cell`."""

    #: seconds between two checks of which engines are gone
    LIVENESS_INTERVAL = 0.3

    def __init__(self, cluster, code: str, *, ranks=None, compare: bool = False, hlo: bool = True,
                 timeout: float | None = None, show: Sequence[str] = (), images: bool = False,
                 stream: Callable[[int, str, str], None] | None = None, poll: float = 0.05,
                 grace: float = DEFAULT_GRACE, label: str | None = None, header: str = ""):
        self.cluster, self.code = cluster, code
        self.label, self.header = label, header
        self.ranks, self.compare, self.hlo, self.timeout = ranks, compare, hlo, timeout
        self.show, self.images, self.stream, self.poll, self.grace = show, images, stream, poll, grace
        self.targets: list[int] = []
        self.pending: dict = {}                    # rank -> AsyncResult of this cell
        self.seen: dict[tuple[int, str], int] = {}  # (rank, stream) -> characters passed on
        self.announced: set[int] = set()           # ranks whose end was passed on
        self.fetched: dict[int, RankRecord] = {}
        self.t0 = 0.0
        self.timed_out = self.interrupted = False
        self.first_failure: float | None = None
        self.dead: dict[int, str] = {}
        self.taken_down: set[int] = set()          # dead ranks the MPI launcher ended after another's death
        self.last_liveness: float | None = None  # never checked yet

    def run(self) -> CellResult:
        """Run every phase in turn and return the cell's result."""
        self.claim_cluster()
        self.check_options()
        self.submit()
        try:
            self.wait()
        except KeyboardInterrupt:
            self.interrupt()
        self.drain_output()
        elapsed = time.perf_counter() - self.t0
        self.settle_deaths()
        return self.collect(elapsed)

    # ----------------------------------------------------------------------- submit
    def claim_cluster(self) -> None:
        """Make sure the cluster can take a cell (else raise) and start a new one on it."""
        self.cluster.ensure_ready()
        self.cluster.begin_cell()

    def check_options(self) -> None:
        """Validate the timeout and resolve the ranks to run on."""
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError(f"timeout must be positive, got {self.timeout}")
        self.targets = parse_ranks(self.ranks, self.cluster.n)

    def submit(self) -> None:
        """Send the cell to each target rank and start the clock."""
        from . import engine

        cluster, targets = self.cluster, self.targets
        self.t0 = time.perf_counter()
        kwargs = {"compare": self.compare, "show": tuple(self.show), "hlo": self.hlo and cluster.hlo,
                  "images": self.images, "participants": tuple(targets) if len(targets) < cluster.n else None,
                  "label": self.label, "header": self.header}
        self.pending = {r: cluster.client[r].apply_async(engine.run_cell, self.code, **kwargs) for r in targets}
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
        report = getattr(self.stream, "state", None)
        if report is None:
            return
        now = time.perf_counter()
        for r, ar in self.pending.items():
            if not ar.ready():
                report(r, "running", now - self.t0, self.cluster.inflight(r), None)
                continue
            rec = self.record(r)
            report(r, "finished" if rec.ok else "failed", rec.elapsed, None, rec.error.ename if rec.error else None)

    def _pass_new_output(self, r: int, ar) -> None:
        """Pass the stdout and stderr ``r`` printed since the last call to ``stream``."""
        for s in ("stdout", "stderr"):
            text = getattr(ar, s) or ""
            if len(text) > self.seen[(r, s)]:
                new, self.seen[(r, s)] = text[self.seen[(r, s)]:], len(text)
                self.stream(r, s, new)

    def drain_output(self) -> None:
        """Wait for the rest of each finished rank's output (a result can arrive before it), pump it."""
        for r, ar in self.pending.items():
            if ar.ready() and not self.record(r).engine_died:
                ar.wait_for_output(OUTPUT_WAIT)
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
            self._wait_a_little()
            self.pump_output()

    def _liveness_due(self, now: float) -> bool:
        """Whether the engines' liveness was never checked, or not for ``LIVENESS_INTERVAL``."""
        return self.last_liveness is None or now - self.last_liveness > self.LIVENESS_INTERVAL

    def _out_of_time(self, now: float) -> bool:
        """Whether the timeout (if any) has passed."""
        return self.timeout is not None and now - self.t0 > self.timeout

    def _note_first_failure(self, now: float) -> None:
        """Start the grace period when a rank's result first reports a failure."""
        if self.first_failure is None and any(ar.ready() and not self.record(r).ok
                                              for r, ar in self.pending.items()):
            self.first_failure = now

    def _only_dead_left(self, now: float) -> bool:
        """Check which ranks died (a death starts the grace period); True if no live rank is still running."""
        self.last_liveness = now
        self.dead = {r: why for r, why in self.cluster.dead_ranks().items() if r in self.pending}
        if not self.dead:
            return False
        self.first_failure = self.first_failure or now
        return all(ar.ready() or r in self.dead for r, ar in self.pending.items())

    def _wait_a_little(self) -> None:
        """Block up to ``poll`` seconds on the first unfinished rank."""
        unfinished = [ar for ar in self.pending.values() if not ar.ready()]
        if unfinished:
            unfinished[0].wait(self.poll)

    # ----------------------------------------------------------------------- interrupt
    def interrupt(self) -> None:
        """SIGINT the target ranks (the stop button) and give them the grace period to stop."""
        self.interrupted = True
        self.cluster.interrupt(self.targets)
        end = time.perf_counter() + self.grace
        while time.perf_counter() < end and not self.all_ready():
            time.sleep(self.poll)

    # ----------------------------------------------------------------------- deaths
    def settle_deaths(self) -> None:
        """If a rank died or did not finish, settle which ranks are dead and why (see _settle_deaths)."""
        engine_died = [r for r, ar in self.pending.items() if ar.ready() and self.record(r).engine_died]
        if engine_died or self.dead or not self.all_ready():
            self.dead, self.taken_down = _settle_deaths(self.cluster, self.pending, engine_died)

    # ----------------------------------------------------------------------- collect
    def collect(self, elapsed: float) -> CellResult:
        """Build the CellResult, leaving ranks still running or a lost job with the cluster."""
        records, states, stdout, stderr, inflight, faults = {}, {}, {}, {}, {}, {}
        for r, ar in self.pending.items():
            stdout[r] = ar.stdout or ""
            stderr[r] = ar.stderr or ""
            if r in self.dead and (not ar.ready() or self.record(r).engine_died):
                records[r], states[r] = None, "dead"
                faults[r] = self.cluster.fault_report(r)
            elif not ar.ready():
                records[r], states[r] = None, "running"
                inflight[r] = self.cluster.inflight(r)
                self.cluster.keep_running(r, ar)
            else:
                rec = self.record(r)
                records[r] = rec
                states[r] = "finished" if rec.ok else "failed"
        notes = self._job_notes([r for r, s in states.items() if s == "running"], inflight)
        per_rank_hlo = {r: rec.hlo for r, rec in records.items() if rec}
        warnings = hlo_mod.analyze(per_rank_hlo) if any(per_rank_hlo.values()) else []
        if self.hlo and self.cluster.hlo and not all(rec.hlo_capture for rec in records.values() if rec):
            notes.append("HLO capture is off on some ranks (JAX was imported before mpinb set XLA_FLAGS)")
        return CellResult(self.code, self.targets, records, stdout, stderr, states, elapsed, warnings,
                          self.timed_out, self.compare, notes, inflight, self.dead, faults, self.interrupted)

    def _job_notes(self, running: list[int], inflight: dict[int, dict | None]) -> list[str]:
        """What to do next when the MPI job ended (marking the cluster lost) or ranks still run."""
        if self.dead:
            cause = self._cause_of_death()
            self.cluster.mark_lost(cause)
            return [f"the MPI job ended because {cause}: run %mpijax restart"]
        if not running:
            return []
        blocked = [r for r in running if inflight.get(r)]
        if blocked:
            replayed = len(self.cluster.setup_cells)
            after = (f" (your {replayed} --setup cell{'s are' if replayed > 1 else ' is'} replayed; the "
                     "engines' other variables are lost)" if replayed else " (the engines' variables are lost)")
            return [f"{label(blocked)} {'are' if len(blocked) > 1 else 'is'} blocked inside MPI and "
                    f"cannot be interrupted: run %mpijax restart{after}"]
        return ["the ranks still running can be interrupted (stop button) or restarted"]

    def _cause_of_death(self) -> str:
        """'rank R <how it ended>' for the first dead rank not merely taken down by the MPI launcher."""
        dead = self.dead
        causes = [r for r in sorted(dead) if r not in self.taken_down]
        first = causes[0] if causes else min(dead)
        return f"rank {first} {dead[first]}"


def _settle_deaths(cluster, pending, engine_died, wait: float = 5.0) -> tuple[dict[int, str], set[int]]:
    """({rank: cause} of dead ranks among ``pending``, the ranks among them that the MPI launcher
    took down after another rank's death, described as such). Waits (up to ``wait`` s) for the
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
        dead.setdefault(r, "process ended")
    causes = sorted(r for r in dead if r in records)
    taken_down = {r for r in dead if causes and r not in causes}
    for r in taken_down:
        dead[r] = f"ended by the MPI launcher after rank {causes[0]} {records[causes[0]]['description']}"
    return dead, taken_down


def _record(ar, rank: int) -> RankRecord:
    """The engine's record, or a failure record if the engine itself failed."""
    try:
        return ar.get(0)
    except Exception as exc:  # noqa: BLE001 - e.g. EngineError: the engine died
        return RankRecord(rank=rank, ok=False, error=ErrorInfo(type(exc).__name__, str(exc), str(exc)))
