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
            parts.append(f"{len(failed)} failed ({', '.join(map(str, failed))})")
        if running:
            parts.append(f"{len(running)} still running ({', '.join(map(str, running))})")
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
             grace: float = DEFAULT_GRACE) -> CellResult:
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
        the cell runs.
    grace: once a rank failed or died, seconds the others get to finish before the result is
        reported (fail fast instead of waiting for ranks blocked in a collective).

    KeyboardInterrupt (the notebook's stop button) interrupts the engines and reports which
    ranks stay blocked inside MPI. Raises ClusterBusy while ranks still run an earlier cell,
    ClusterLost once the MPI job ended.
    """
    from . import engine

    if not cluster.running:
        raise RuntimeError("no cluster running: start one with %mpijax start -n N (or MPICluster(n).start())")
    if cluster.lost:
        raise ClusterLost(f"the MPI job is gone ({cluster.lost}); run %mpijax restart (cluster.restart())")
    busy = {r: ar for r, ar in cluster.outstanding.items() if not ar.ready()}
    if busy:
        where = "; ".join(f"rank {r} {describe_inflight(cluster.inflight(r))}" for r in sorted(busy))
        raise ClusterBusy(f"rank(s) {sorted(busy)} still run an earlier cell ({where}); wait for it, "
                          "interrupt it, or %mpijax restart")
    cluster.outstanding = {}
    if timeout is not None and timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    targets = parse_ranks(ranks, cluster.n)
    t0 = time.perf_counter()
    kwargs = {"compare": compare, "show": tuple(show), "hlo": hlo and cluster.hlo, "images": images,
              "participants": tuple(targets) if len(targets) < cluster.n else None}
    pending = {r: cluster.client[r].apply_async(engine.run_cell, code, **kwargs) for r in targets}
    cluster.watch(pending)
    seen = {(r, s): 0 for r in targets for s in ("stdout", "stderr")}
    announced = set()
    finished: dict[int, RankRecord] = {}

    def record(r: int) -> RankRecord:
        """The record of a finished rank, fetched once."""
        if r not in finished:
            finished[r] = _record(pending[r], r)
        return finished[r]

    def pump():
        for r, ar in pending.items():
            if stream is not None:
                for s in ("stdout", "stderr"):
                    text = getattr(ar, s) or ""
                    if len(text) > seen[(r, s)]:
                        new, seen[(r, s)] = text[seen[(r, s)]:], len(text)
                        stream(r, s, new)
            if ar.ready() and r not in announced:
                announced.add(r)
                rec = record(r)
                if stream is not None and not rec.ok and rec.error:
                    stream(r, "error", str(rec.error))

    timed_out = interrupted = False
    first_failure = None
    dead: dict[int, str] = {}
    last_liveness = 0.0
    try:
        while not all(ar.ready() for ar in pending.values()):
            now = time.perf_counter()
            if timeout is not None and now - t0 > timeout:
                timed_out = True
                break
            if first_failure is None and any(ar.ready() and not record(r).ok for r, ar in pending.items()):
                first_failure = now
            if first_failure is not None and now - first_failure > grace:
                break  # fail fast: the others had their grace period
            if now - last_liveness > 0.3:
                last_liveness = now
                dead = {r: why for r, why in cluster.dead_ranks().items() if r in pending}
                if dead:
                    first_failure = first_failure or now
                    if all(pending[r].ready() or r in dead for r in pending):
                        break
            unfinished = [ar for ar in pending.values() if not ar.ready()]
            if unfinished:
                unfinished[0].wait(poll)
            pump()
    except KeyboardInterrupt:
        interrupted = True
        cluster.interrupt(targets)
        end = time.perf_counter() + grace
        while time.perf_counter() < end and not all(ar.ready() for ar in pending.values()):
            time.sleep(poll)
    for r, ar in pending.items():
        if ar.ready() and not record(r).engine_died:  # a result can arrive before its output
            ar.wait_for_output(OUTPUT_WAIT)
    pump()
    elapsed = time.perf_counter() - t0
    engine_died = [r for r, ar in pending.items() if ar.ready() and record(r).engine_died]
    if engine_died or dead or not all(ar.ready() for ar in pending.values()):
        dead = _settle_deaths(cluster, pending, engine_died)

    records, states, stdout, stderr, notes, inflight, faults = {}, {}, {}, {}, [], {}, {}
    for r, ar in pending.items():
        stdout[r] = ar.stdout or ""
        stderr[r] = ar.stderr or ""
        if r in dead and (not ar.ready() or record(r).engine_died):
            records[r], states[r] = None, "dead"
            faults[r] = cluster.fault_report(r)
            continue
        if not ar.ready():
            records[r], states[r] = None, "running"
            inflight[r] = cluster.inflight(r)
            cluster.outstanding[r] = ar
            continue
        rec = record(r)
        records[r] = rec
        states[r] = "finished" if rec.ok else "failed"
    if dead:
        causes = [r for r in sorted(dead) if not dead[r].startswith("ended by the MPI launcher")]
        first = causes[0] if causes else min(dead)
        cluster.lost = f"rank {first} {dead[first]}"
        notes.append(f"the MPI job ended because rank {first} {dead[first]}: run %mpijax restart")
    elif cluster.outstanding:
        blocked = [r for r in cluster.outstanding if inflight.get(r)]
        if blocked:
            notes.append(f"rank(s) {blocked} are blocked inside MPI; SIGINT cannot free them: "
                         "run %mpijax restart (the --setup cells are replayed)")
        else:
            notes.append("the ranks still running can be interrupted (stop button) or restarted")
    per_rank_hlo = {r: rec.hlo for r, rec in records.items() if rec}
    warnings = hlo_mod.analyze(per_rank_hlo) if any(per_rank_hlo.values()) else []
    if hlo and cluster.hlo and not all(rec.hlo_capture for rec in records.values() if rec):
        notes.append("HLO capture is off on some ranks (JAX was imported before mpinb set XLA_FLAGS)")
    return CellResult(code, targets, records, stdout, stderr, states, elapsed, warnings, timed_out,
                      compare, notes, inflight, dead, faults, interrupted)


def _settle_deaths(cluster, pending, engine_died, wait: float = 5.0) -> dict[int, str]:
    """{rank: cause} of dead ranks among ``pending``; ranks mpiexec took down after the first
    death are described as such. Waits (up to ``wait`` s) for the exit record of at least one
    dead rank: it travels through the MPI launcher's output, after the death itself is known."""
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
    for r in dead:
        if dead[r] == "process ended" and causes and r not in causes:
            dead[r] = f"ended by the MPI launcher after rank {causes[0]} {records[causes[0]]['description']}"
    return dead


def _record(ar, rank: int) -> RankRecord:
    """The engine's record, or a failure record if the engine itself failed."""
    try:
        return ar.get(0)
    except Exception as exc:  # noqa: BLE001 - e.g. EngineError: the engine died
        return RankRecord(rank=rank, ok=False, error=ErrorInfo(type(exc).__name__, str(exc), str(exc)))
