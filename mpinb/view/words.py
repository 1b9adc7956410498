"""How the view says things, in words: sizes, where a rank waits, a rank's live state, the
result's summary line, the ranks' states, a layout finding, trimmed output. Pure: no IPython.
"""

from __future__ import annotations

import signal

from ..analysis import hlo
from ..analysis.hlo_text import human_bytes
from ..wire.status import finishing_queued_work, in_jitted_collective
from . import links
from .compare_words import comparisons_summary
from .hlo_words import REFERENCES, collective_words, finding_brief, finding_plain
from .rank_words import label


def describe_inflight(info: dict | None, where: dict | None = None) -> str:
    """'blocked in allreduce (call 57, 16 B, waiting 12.3 s) at Cell In[7], line 5', 'blocked in
    MPI_Recv (8 B, peer 1, waiting 3.0 s) at ...' (mpi4py's own call), 'waits in
    jit(stepper) (all-reduce over 2 devices) at Cell In[7], line 5', 'finishing the work its
    jitted calls queued after Cell In[7] returned', or where a rank outside any collective is
    (mpinb.engine.stall says where)."""
    at = f" {describe_where(where)}" if where else ""
    if info:
        peer = f", peer {info['peer']}" if info.get("peer", -1) >= 0 else ""
        waiting = f"waiting {info['seconds'] + info.get('age', 0.0):.1f} s"
        if info.get("function"):  # an MPI call of the program's own (mpi4py's), not an mpinb op
            return f"blocked in {info['function']} ({human_bytes(info['bytes'])}{peer}, {waiting}){at}"
        return f"blocked in {info['op']} (call {info['call']}, {human_bytes(info['bytes'])}{peer}, {waiting}){at}"
    if where and where.get("call"):
        held = ", ".join(collective_words(*c) for c in where.get("collectives") or []) or "no collective known"
        return f"waits in jit({where['call']}) ({held}){at}"
    if finishing_queued_work(where):
        return f"finishing the work its jitted calls queued{at}"
    if where:
        return f"not inside an mpinb collective, running{at}"
    return "not inside an mpinb collective (Python code, or an MPI call mpinb does not watch)"


def describe_where(where: dict) -> str:
    """'at Cell In[7], line 5' and, when the user's innermost frame is elsewhere, ', in stepper
    (Cell In[3], line 4)'; 'after Cell In[7] returned' while the work it queued runs."""
    if finishing_queued_work(where):
        return f"after Cell {where['cell']} returned"
    text = f"at Cell {where['cell']}, line {where['line']}"
    if where.get("function"):
        place = f"Cell {where.get('file')}" if where.get("file_is_cell") else f"File {where.get('file')}"
        text += f", in {where['function']} ({place}, line {where.get('file_line')})"
    return text


def exit_words(returncode: int | None) -> str:
    """How a process ended: 'killed by signal 11 (SIGSEGV)', 'exited with code 3', 'process ended'
    (unknown: no exit record came back)."""
    if returncode is None:
        return "process ended"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by signal {-returncode} ({name})"
    return f"exited with code {returncode}"


def death_words(death: dict) -> str:
    """How a rank died (mpinb.cells.health.dead_ranks): its exit, or, when the MPI launcher ended
    it after another rank's death, 'ended by the MPI launcher after rank 1 exited with code 3'."""
    if death.get("after") is not None:
        return f"ended by the MPI launcher after rank {death['after']} {exit_words(death['after_returncode'])}"
    return exit_words(death.get("returncode"))


def lost_job_words(lost: dict) -> str:
    """Why the MPI job is gone: 'rank 1 killed by signal 9 (SIGKILL)'."""
    return f"rank {lost['rank']} {death_words(lost)}"


def skipped_by(result, rank: int) -> str:
    """'; rank 1 finished the cell without calling it' when ``rank`` waits in a collective (an
    mpinb one, or a jitted call holding collectives) that the finished ranks never joined."""
    waits = result.inflight.get(rank) or in_jitted_collective(result.where.get(rank))
    finished = sorted(r for r, s in result.states.items() if s == "finished")
    if not waits or not finished:
        return ""
    return f"; {label(finished, sep=', ')} finished the cell without calling it"


def live_words(state: str, seconds: float, inflight: dict | None, error_name: str | None,
               where: dict | None = None) -> str:
    """A rank's state while its cell runs, as its live header says it: 'running 5 s, blocked
    in allreduce (call 2, 12 B, waiting 4.9 s) at Cell In[7], line 2', 'running 5 s, waits in
    jit(step) (all-reduce over 2 devices) at Cell In[7], line 3', 'running 5 s at Cell In[7],
    line 1', 'running 5 s, finishing the work its jitted calls queued after Cell In[7] returned',
    'finished in 0.01 s', 'failed (ValueError)'."""
    if state == "running":
        if inflight or in_jitted_collective(where) or finishing_queued_work(where):
            return f"running {seconds:.0f} s, {describe_inflight(inflight, where)}"
        return f"running {seconds:.0f} s {describe_where(where)}" if where else f"running {seconds:.0f} s"
    if state == "failed":
        return f"failed ({error_name})" if error_name else "failed"
    return f"{state} in {seconds:.2f} s"

#: the name of the last cell's result in the notebook, as every word about it says
RESULT_NAME = "_mpijax"


def trim(text: str, max_lines: int | None, stream: str = "stdout") -> str:
    """At most ``max_lines`` lines: the head and the tail, with how many are hidden said twice:
    at the top (seen without scrolling the box) and where they were cut."""
    lines = text.rstrip("\n").splitlines()
    if not max_lines or len(lines) <= max_lines:
        return text
    head = max(1, (max_lines + 1) // 2)
    tail = max_lines - head
    hidden = len(lines) - head - tail
    top = (f"({hidden:,} of {len(lines):,} lines hidden below; all of them: {RESULT_NAME}.{stream}[rank], "
           "or --max-lines 0)")
    cut = f"... {hidden:,} line{'s' if hidden != 1 else ''} hidden"
    return "\n".join([top, *lines[:head], cut, *(lines[-tail:] if tail else [])])


def trimmed_ranks(result, max_lines: int | None) -> list[int]:
    """The ranks whose output the view shows trimmed to ``max_lines`` lines a stream."""
    if not max_lines:
        return []
    return [r for r in result.ranks if any(len(streams.get(r, "").rstrip("\n").splitlines()) > max_lines
                                           for streams in (result.stdout, result.stderr))]

def state_line(result) -> str:
    """'finished: ranks 0-3 (0.010-0.012 s); failed: rank 1': the states, grouped."""
    parts = []
    for state in ("finished", "failed", "running", "dead", "restarted"):
        ranks = [r for r in result.ranks if result.states.get(r) == state]
        if not ranks:
            continue
        times = [result.records[r].elapsed for r in ranks if result.records.get(r)]
        span = ""
        if times:
            lo, hi = min(times), max(times)
            span = f" ({lo:.3f} s)" if f"{lo:.3f}" == f"{hi:.3f}" else f" ({lo:.3f}-{hi:.3f} s)"
        parts.append(f"{state}: {label(ranks)}{span}")
    return "; ".join(parts)

def restarted_words(inflight: dict | None, where: dict | None = None) -> str:
    """What became of a rank whose engine was restarted in the cell: 'restarted (its engine, and
    the cell's work there), it was blocked in send (call 5, 15.3 MiB, peer 1, waiting 1.1 s) at
    Cell In[4], line 6' (never 'running': the cell ended there)."""
    said = "restarted (its engine, and the cell's work there)"
    if inflight:
        return f"{said}; it was {describe_inflight(inflight, where)}"
    return f"{said}; it was {describe_where(where)}" if where else said


def freed_words_of(where: dict | None) -> str:
    """What became of a rank freed where it waited after a proven deadlock: 'freed where it
    waited, at Cell In[7], line 3 (its cell failed there)'."""
    return f"freed where it waited, {describe_where(where)} (its cell failed there)" if where else (
        "freed where it waited (its cell failed there)")


def finding_text(w, ranks, link: bool = True, brief: bool | None = None, count: int = 1) -> str:
    """One layout finding in plain words, with the ranks it was found on; a small info finding
    in one line (``brief``, by default for those: ``w.small``), ``count`` times."""
    who = "across ranks" if ranks == [None] else label(r for r in ranks if r is not None)
    brief = w.small if brief is None else brief
    times = f" ({count} copies)" if count > 1 else ""
    text = finding_brief(w) + times if brief else finding_plain(w)
    if link and not brief:
        text += " " + links.words(REFERENCES[w.kind])
    return f"{w.severity} [{w.kind}] {who}: {text}"


def comparison_summary(result) -> str:
    """What --compare found, across ranks ('' without --compare)."""
    if not result.compare:
        return ""
    if any(rec and rec.eager_error for rec in result.records.values()):
        return "eager run failed"
    per_rank = {r: rec.comparisons for r, rec in result.records.items() if rec}
    return comparisons_summary(per_rank) or "nothing to compare"


def summary_line(result, max_lines: int | None = None) -> str:
    """'4 ranks, 0.21 s, 1 failed (rank 1), 1 layout finding: 1 relayout (info), jit == eager: t',
    and, when the view trims output to ``max_lines``, which ranks'."""
    n = len(result.ranks)
    restart = getattr(result, "restart_seconds", None)
    took = f"{result.elapsed:.2f} s"
    if restart is not None:
        took += f" ({restart:.1f} s of it restarting the engines)"
    parts = [f"{n} rank{'s' if n != 1 else ''}", took]
    by_state = {state: [r for r, s in result.states.items() if s == state]
                for state in ("failed", "running", "dead", "restarted")}

    if by_state["failed"]:
        parts.append(f"{len(by_state['failed'])} failed ({label(by_state['failed'])})")
    deadlocked = result.deadlock.ranks if result.deadlock is not None else []
    if deadlocked:
        parts.append(f"deadlock ({label(deadlocked)})")
    running = [r for r in by_state["running"] if r not in deadlocked]
    if running:
        parts.append(f"{len(running)} still running ({label(running)})")
    if by_state["dead"]:
        how = "; ".join(f"rank {r} {death_words(result.dead[r])}" for r in by_state["dead"])
        parts.append(f"{len(by_state['dead'])} dead ({how})")
    if by_state["restarted"]:
        parts.append(f"{len(by_state['restarted'])} restarted ({label(by_state['restarted'])})")
    if result.timed_out:
        parts.append("timed out")
    if result.interrupted:
        parts.append("interrupted")
    parts.append(findings_count(result.warnings))
    comp = comparison_summary(result)
    if comp:
        parts.append(comp)
    trimmed = trimmed_ranks(result, max_lines)
    if trimmed:
        parts.append(f"output of {label(trimmed)} trimmed to {max_lines} lines (all: {RESULT_NAME}.stdout[rank])")
    return ", ".join(parts)


def findings_count(warnings) -> str:
    """'2 layout findings: 1 divergent (error), 1 relayout (info)' (errors first)."""
    findings = [w for w, _ in hlo.distinct(warnings)]
    kinds = sorted({w.kind for w in findings}, key=lambda k: (hlo.SEVERITIES.index(hlo.KINDS[k]), k))
    detail = ", ".join(f"{sum(w.kind == k for w in findings)} {k} ({hlo.KINDS[k]})" for k in kinds)
    return f"{len(findings)} layout finding{'s' if len(findings) != 1 else ''}" + (f": {detail}" if detail else "")


def restart_words(n: int, seconds: float, setup_cells: int, replayed: bool,
                  cells: list[tuple[str, float]] | None = None) -> str:
    """What ``%mpijax restart`` did, in words: what was lost and what came back, and, with
    ``cells`` (each replayed cell's first line and seconds), which cells and how long each took."""
    said = f"{n} MPI engines restarted in {seconds:.1f} s; the engines' variables are gone"
    count = f"{setup_cells} --setup cell{'s' if setup_cells != 1 else ''}"
    if not setup_cells:
        return said + " (there are no --setup cells to replay)"
    if not replayed:
        return said + f"; {count} not replayed (--no-replay)"
    if not cells:
        return said + f", {count} replayed"
    which = "; ".join(f"{line if len(line) <= 40 else line[:39] + chr(0x2026)} {took:.1f} s" for line, took in cells)
    return said + f", {count} replayed in {sum(took for _, took in cells):.1f} s ({which})"


def freed_words(freed: list[int], dropped: dict[int, tuple[list[dict], int]]) -> str:
    """How the ranks of a deadlock were freed in place (mpinb.cells.freeing: each rank's error
    says how), the engines' variables kept, and the messages dropped afterwards."""
    said = (f"{label(freed)} {'were' if len(freed) > 1 else 'was'} freed where {'they' if len(freed) > 1 else 'it'} "
            "waited; the engines keep their variables")
    return said + ("; " + dropped_words(dropped) if dropped else "")


def dropped_words(dropped: dict[int, tuple[list[dict], int]]) -> str:
    """The messages left unreceived that the ranks dropped once freed (mpinb.engine.rank_release),
    one part per rank: its first message, and how many more."""
    parts = []
    for r in sorted(dropped):
        messages, more = dropped[r]
        more += max(0, len(messages) - 1)
        if messages:
            first = messages[0]
            source = f"rank {first['source']}" if first["source"] is not None else "an unknown rank"
            part = f"rank {r} dropped a message of {first['bytes']} B from {source} (tag {first['tag']})"
        else:
            part = f"rank {r} dropped messages"
        parts.append(part + (f" and {more} more" if more and messages else f" ({more})" if more else ""))
    return "messages left unreceived were dropped, so that a later receive cannot take them: " + ", ".join(parts)


def way_out(running, inflight: dict, where: dict, replayed: int) -> list[str]:
    """What to do about ranks still running a cell, in the same words wherever it is said (the
    cell's report, a next cell refused): ranks blocked inside MPI or a jitted collective cannot
    be interrupted and need a restart; nor can the work a rank's jitted calls queued, which it
    finishes after the cell's code returned (mpinb.engine.settle); the others can be interrupted."""
    blocked = [r for r in running if inflight.get(r)]
    in_jax = [r for r in running if not inflight.get(r) and in_jitted_collective(where.get(r))]
    queued = [r for r in running if not inflight.get(r) and finishing_queued_work(where.get(r))]
    if not (blocked or in_jax or queued):
        return ["the ranks still running can be interrupted (stop button) or restarted"] if running else []
    after = (f" (your {replayed} --setup cell{'s are' if replayed > 1 else ' is'} replayed; the engines' other "
             "variables are lost)" if replayed else " (the engines' variables are lost)")
    inside = [(blocked, "MPI"), (in_jax, "a jitted collective")]
    out = [f"{label(ranks)} {'are' if len(ranks) > 1 else 'is'} blocked inside {what} and cannot be interrupted: "
           f"run %mpijax restart{after}" for ranks, what in inside if ranks]
    if queued:
        out.append(f"{label(queued)} {'are' if len(queued) > 1 else 'is'} finishing work that jitted calls queued, "
                   f"which cannot be interrupted: wait for it, or run %mpijax restart{after}")
    return out


def busy_words(busy: list[int], inflight: dict, where: dict, replayed: int) -> str:
    """Why a new cell cannot run yet: which ranks still run an earlier one, where, and what to do."""
    said = "; ".join(f"rank {r} {describe_inflight(inflight.get(r), where.get(r))}" for r in busy)
    verb = "still runs" if len(busy) == 1 else "still run"
    advice = "; ".join(way_out(busy, inflight, where, replayed))
    return f"{label(busy, sep=', ')} {verb} an earlier cell ({said}): {advice}"
