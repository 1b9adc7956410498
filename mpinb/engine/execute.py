"""Running one ``%%mpijax`` cell on this engine (engine side): the code executed in the engine's
interactive namespace under the cell's file name (mpinb.wire.cell_names), with ``--compare``'s eager
pass first (mpinb.engine.passes), ending once the work it queued for XLA has run
(mpinb.engine.settle); the record returned (mpinb.wire.records): value and
``--show`` summaries, error with an IPython-style traceback (mpinb.engine.tracebacks), elapsed
time, the optimized HLO compiled during the cell (mpinb.engine.hlo_capture), the collectives
it called (what the library kept of them: ext/ran.pxi) and their timeline, ``--compare``'s
comparisons and hints (mpinb.engine.traces). stdout/stderr are not captured: ipyparallel
streams them to the notebook while the cell runs.
"""

from __future__ import annotations

import contextlib
import sys
import time

from ..errors import QueuedCallFreed
from ..options.cell_options import CellOptions
from ..wire import values
from ..wire.cell_names import cell_filename
from ..wire.records import RankRecord
from . import cell_sources, hlo_capture, passes, rank_release, settle, traces
from .code import error_info, execute_code, namespace
from .state import STATE


def execute_cell(code: str, options: CellOptions, participants: tuple[int, ...] | None = None) -> RankRecord:
    """Run one cell here and describe what happened (see the module docstring). ``options``:
    the cell's options as the magic or the Python API gave them (this side reads compare, show,
    hlo, images, label, header). ``participants``: the ranks that run this cell when not all do;
    a collective that needs another rank then fails at once instead of waiting forever."""
    from mpinb.mpi import library

    STATE.cells += 1
    STATE.running = cell_no = STATE.cells
    lib = library.load()
    lib.set_participants(participants)
    calls_before, wall0, mpi0 = lib.counters()["calls"], time.time(), lib.wtime()
    lib.ran_begin()  # what this cell calls is compared across ranks (mpinb.analysis.divergence)
    rank_release.begin_cell()  # only a wake from now on frees this cell's receives
    try:
        filename = cell_filename(cell_no)
        cell_sources.remember(filename, options.label or filename, code)
        record = _run(code, filename, options)
        traces.note_traces(namespace())
        record.ran = lib.ran()
        events, record.timeline_dropped = lib.timeline(calls_before)
        record.timeline = [(e["op"], wall0 + e["t0"] - mpi0, wall0 + e["t1"] - mpi0, e["bytes"], e["peer"])
                           for e in events]
        return record
    finally:
        lib.set_participants(None)
        STATE.running = None


def _run(code: str, filename: str, options: CellOptions) -> RankRecord:
    """The cell's passes (eager with --compare, then jitted) and what they left: the record."""
    ns = namespace()
    before = {k: id(v) for k, v in ns.items()}
    record = RankRecord(rank=STATE.rank, ok=True, hlo_capture=STATE.hlo_ok)
    if options.hlo:
        hlo_capture.forget_hlo_modules()  # modules compiled outside %%mpijax cells
    eager = None
    label = STATE.cell_labels[filename]
    if options.compare:
        freed = rank_release.freed()
        try:
            eager = passes.eager_pass(code, ns, filename, options.header)
        except KeyboardInterrupt as exc:  # the stop button: no jitted pass
            record.ok, record.error = False, error_info(exc)
            _queued_work_done(record, label)
            return record
        record.eager_error = eager[3]
        settled = _queued_work_done(record, label)
        if not settled or rank_release.freed() != freed:  # stopped, or freed where it waited: the
            if record.ok:  # jitted pass would wait again
                record.ok, record.error = False, eager[3]
            return record
    t0 = time.perf_counter()
    value = None
    tee = passes.Tee(sys.stdout) if options.compare else None
    try:
        with contextlib.redirect_stdout(tee) if tee else contextlib.nullcontext():
            value = execute_code(code, ns, filename, options.header)
    except BaseException as exc:  # noqa: BLE001 - reported to the client per rank
        record.ok = False
        record.error = error_info(exc)
    _queued_work_done(record, label)  # also after an error: what it queued still runs its collectives
    record.elapsed = time.perf_counter() - t0
    _summaries(record, ns, value, options)
    if options.compare and record.ok and record.eager_error is None:
        assigned = [k for k, v in ns.items() if not k.startswith("_") and (k not in before or before[k] != id(v))]
        _compare(record, code, ns, value, assigned, tee.copy.getvalue(), eager, options.images)
    if options.hlo:
        record.hlo = [(name, hlo_capture.name_cells(text)) for name, text in hlo_capture.new_hlo_modules()]
    return record


def _queued_work_done(record: RankRecord, label: str) -> bool:
    """Wait until the work the pass queued for XLA has run (mpinb.engine.settle); False, the
    record failed (if it was not already), when the stop button came meanwhile or a call of that
    work was freed where it waited (nothing raised its error: the arrays hold it)."""
    freed = rank_release.freed()
    try:
        settle.dispatched_work(label)
    except BaseException as exc:  # noqa: BLE001 - the stop button, raised once the work has run
        error = error_info(exc)
    else:
        if rank_release.freed() == freed:
            return True
        error = error_info(QueuedCallFreed(
            "a call that this cell's jitted work queued was freed where it waited, after the cell's code "
            "returned (a proven deadlock or the stop button); the arrays it was to produce hold its error"))
    if record.ok:
        record.ok, record.error = False, error
    return False


def _summaries(record: RankRecord, ns: dict, value, options: CellOptions) -> None:
    """The cell's value and the --show names, summarised for the view."""
    if value is not None:
        record.result = _summary(value, options.images)
    for name in options.show:
        record.show[name] = (_summary(ns[name], options.images) if name in ns
                             else {"kind": "object", "repr": "<not defined>"})


def _compare(record: RankRecord, code: str, ns: dict, value, assigned: list[str], stdout: str, eager,
             images: bool) -> None:
    """--compare: the jitted pass against the eager one, hints on why they differ, pictures."""
    eager_ns, eager_value, eager_stdout, _ = eager
    record.comparisons = passes.compare_passes(assigned, ns, value, eager_ns, eager_value, stdout, eager_stdout)
    differing = {passes.cmp.variable(c.name) for c in record.comparisons if c.status == "different"}
    if differing:
        record.hints = (traces.hints(code, ns, differing, stdout_differs="stdout" in differing)
                        + passes.multi_process_hints(code, ns, differing))
    if images:
        record.diff_images = passes.diff_images(record.comparisons, ns, eager_ns)


def _summary(value, images: bool):
    if passes.is_array_tree(value) and not hasattr(value, "shape"):
        leaves = passes.flatten(value)
        return {"kind": "tree", "leaves": [(p, values.summarize(x, image=images)) for p, x in leaves[:16]],
                "more": max(0, len(leaves) - 16)}
    return values.summarize(value, image=images)
