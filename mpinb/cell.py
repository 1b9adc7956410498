"""Running one cell on the ranks of a cluster and collecting one result (client side).

The plain-Python API behind ``%%mpijax``::

    result = run_cell(cluster, code, ranks="0-1", compare=True, show=["y"], timeout=30)
    result.ok, result.warnings, result.records[0]["comparisons"]
    display(result)   # per-rank view: widgets in a notebook, text elsewhere
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

from . import compare as cmp
from . import hlo as hlo_mod


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


@dataclasses.dataclass
class CellResult:
    code: str
    ranks: list[int]
    records: dict[int, dict | None]
    stdout: dict[int, str]
    stderr: dict[int, str]
    states: dict[int, str]          # finished | failed | running
    elapsed: float
    warnings: list = dataclasses.field(default_factory=list)
    timed_out: bool = False
    compare: bool = False
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s == "finished" for s in self.states.values())

    @property
    def comparisons(self) -> list:
        out = []
        for rec in self.records.values():
            if rec:
                out.extend(rec.get("comparisons", []))
        return out

    def comparison_summary(self) -> str:
        if not self.compare:
            return ""
        if any(rec and rec.get("eager_error") for rec in self.records.values()):
            return "eager run failed"
        return cmp.summary(self.comparisons) or "nothing to compare"

    def summary(self) -> str:
        n = len(self.ranks)
        parts = [f"{n} rank{'s' if n != 1 else ''}", f"{self.elapsed:.2f} s"]
        failed = [r for r, s in self.states.items() if s == "failed"]
        running = [r for r, s in self.states.items() if s == "running"]
        if failed:
            parts.append(f"{len(failed)} failed ({', '.join(map(str, failed))})")
        if running:
            parts.append(f"{len(running)} still running ({', '.join(map(str, running))})")
        if self.timed_out:
            parts.append("timed out")
        w = len(self.warnings)
        kinds = sorted({x.kind for x in self.warnings})
        detail = f" ({', '.join(f'{sum(x.kind == k for x in self.warnings)} {k}' for k in kinds)})" if w else ""
        parts.append(f"{w} layout warning{'s' if w != 1 else ''}{detail}")
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
             stream: Callable[[int, str, str], None] | None = None, poll: float = 0.05) -> CellResult:
    """Run ``code`` on the chosen ranks of a running :class:`~mpinb.cluster.MPICluster`.

    compare: also run the cell under ``jax.disable_jit()`` in a scratch copy of each rank's
        namespace first, and compare every array the cell assigned (and its result).
        Caveat: the cell runs twice, so side effects (appending to a list, writing files,
        incrementing counters) happen twice, and the scratch copy is shallow.
    hlo: capture and analyse the optimized HLO of the modules compiled during the cell.
    timeout: seconds to wait; on expiry the result lists the ranks still running.
    show: names of variables to summarise per rank.
    stream: callback(rank, "stdout"|"stderr", text) receiving output while the cell runs.
    """
    from . import engine

    if not cluster.running:
        raise RuntimeError("no cluster running: start one with %mpijax start -n N (or MPICluster(n).start())")
    if timeout is not None and timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    targets = parse_ranks(ranks, len(cluster.client.ids))
    t0 = time.perf_counter()
    kwargs = dict(compare=compare, show=tuple(show), hlo=hlo and cluster.hlo, images=images)
    pending = {r: cluster.client[r].apply_async(engine.run_cell, code, **kwargs) for r in targets}
    seen = {(r, s): 0 for r in targets for s in ("stdout", "stderr")}

    def pump():
        if stream is None:
            return
        for r, ar in pending.items():
            for s in ("stdout", "stderr"):
                text = getattr(ar, s) or ""
                if len(text) > seen[(r, s)]:
                    stream(r, s, text[seen[(r, s)]:])
                    seen[(r, s)] = len(text)

    timed_out = False
    while not all(ar.ready() for ar in pending.values()):
        if timeout is not None and time.perf_counter() - t0 > timeout:
            timed_out = True
            break
        next(iter(ar for ar in pending.values() if not ar.ready())).wait(poll)
        pump()
    pump()
    elapsed = time.perf_counter() - t0

    records, states, stdout, stderr, notes = {}, {}, {}, {}, []
    for r, ar in pending.items():
        stdout[r] = ar.stdout or ""
        stderr[r] = ar.stderr or ""
        if not ar.ready():
            records[r], states[r] = None, "running"
            continue
        try:
            rec = ar.get(0)
        except Exception as exc:  # noqa: BLE001 - the engine itself failed (not the cell)
            records[r] = {"rank": r, "ok": False, "error": {"ename": type(exc).__name__, "evalue": str(exc),
                                                             "traceback": str(exc)}}
            states[r] = "failed"
            continue
        records[r] = rec
        states[r] = "finished" if rec.get("ok") else "failed"
    per_rank_hlo = {r: rec.get("hlo", []) for r, rec in records.items() if rec}
    warnings = hlo_mod.analyze(per_rank_hlo) if any(per_rank_hlo.values()) else []
    if hlo and cluster.hlo and not all(rec.get("hlo_capture", True) for rec in records.values() if rec):
        notes.append("HLO capture is off on some ranks (JAX was imported before mpinb set XLA_FLAGS)")
    return CellResult(code, targets, records, stdout, stderr, states, elapsed, warnings, timed_out,
                      compare, notes)
