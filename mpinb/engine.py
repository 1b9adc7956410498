"""What runs inside each MPI engine (one ipyparallel engine per MPI rank).

``setup`` prepares an engine: per-rank HLO dump directory (set before JAX initialises), JAX and
the collective library imported. ``run_cell`` executes one ``%%mpijax`` cell in the engine's
interactive namespace and returns a picklable record: result and ``--show`` summaries, error
with traceback, elapsed time, the optimized HLO of every module compiled during the cell and,
with ``compare``, the jit-vs-eager comparison. stdout/stderr are not captured: ipyparallel
streams them to the client while the cell runs.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import faulthandler
import io
import linecache
import os
import socket
import sys
import threading
import time

import numpy as np

from . import compare as cmp
from . import traces, values
from .records import ErrorInfo, RankRecord
from .status import fault_path, status_message

STATE: dict = {}
HLO_SUFFIX = ".cpu_after_optimizations.txt"
MAX_HLO_CHARS = 2_000_000
STATUS_PERIOD = 0.2


def _publish_status() -> None:
    """Send {"inflight": the MPI call this rank waits in, or None} to the notebook over the
    engine's IOPub connection, as data of the cell that runs now (no shared filesystem)."""
    from ipyparallel.datapub import publish_data

    from mpinb import mpi

    publish_data(status_message(mpi.inflight(), STATE.get("running")))


def _status_loop() -> None:
    """Publish, while a cell runs, which MPI call this rank is blocked in (read by the client
    when a rank fails, a timeout expires or the user interrupts). A thread: the main thread may
    be blocked inside MPI, which releases the GIL."""
    was_running = False
    while True:
        running = STATE.get("running") is not None
        if running or was_running:
            with contextlib.suppress(Exception):  # status is best effort: never kill the engine
                _publish_status()
        was_running = running
        time.sleep(STATUS_PERIOD)


def setup(dump_root: str | None, status_dir: str | None = None, checked: bool = True) -> dict:
    """Prepare this engine. Must run before JAX is imported for HLO capture to work.

    checked: turn on the collective library's checked mode (ranks agree on every collective
    before running it), the default for interactive use."""
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    size = MPI.COMM_WORLD.Get_size()
    jax_was_loaded = "jax" in sys.modules
    dump = None
    if dump_root:
        dump = os.path.join(dump_root, f"rank{rank}")
        os.makedirs(dump, exist_ok=True)
        flags = os.environ.get("XLA_FLAGS", "")
        if "--xla_dump_to" not in flags:
            os.environ["XLA_FLAGS"] = f"{flags} --xla_dump_to={dump} --xla_dump_hlo_as_text".strip()
    import jax

    import mpinb.mpi  # registers the collective library

    mpinb.mpi.set_checked(checked)
    mpinb.mpi.default_comm()  # clone COMM_WORLD now, on every rank, not inside some later cell
    unlinked = _unlink_mpi_shared_memory()
    STATE.update(rank=rank, size=size, dump=dump, seen=_hlo_files(dump), cells=0,
                 hlo_ok=bool(dump) and not jax_was_loaded, status_dir=status_dir, running=None)
    if status_dir:
        os.makedirs(status_dir, exist_ok=True)
        STATE["fault_file"] = open(fault_path(status_dir, rank), "w")  # noqa: SIM115 - lives with the engine
        faulthandler.enable(STATE["fault_file"], all_threads=False)
        if not STATE.get("status_thread"):
            STATE["status_thread"] = threading.Thread(target=_status_loop, name="mpinb-status", daemon=True)
            STATE["status_thread"].start()
    return {
        "rank": rank,
        "size": size,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "jax": jax.__version__,
        "hlo_capture": STATE["hlo_ok"],
        "checked": checked,
        "shm_unlinked": unlinked,
    }


MPI_SHM_PREFIX = "/dev/shm/mpich_shm_"  # noqa: S108 - MPICH's name, read from /proc/self/maps


def _unlink_mpi_shared_memory() -> list[str]:
    """Unlink the name of the shared-memory segment MPICH made for this job, once every rank
    has it mapped (after a barrier): the memory stays until the last rank ends, however it
    ends, and no name is left in /dev/shm for a killed job (3 MB each) that a later job could
    attach to. Segments made later (shared-memory windows) keep their names."""
    from mpi4py import MPI

    MPI.COMM_WORLD.Barrier()
    names = set()
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                at = line.find(MPI_SHM_PREFIX)
                if at >= 0:
                    names.add(line[at:].split()[0])
    except OSError:
        return []
    for name in sorted(names):
        with contextlib.suppress(OSError):  # another rank of this host was first
            os.unlink(name)
    MPI.COMM_WORLD.Barrier()
    return sorted(os.path.basename(n) for n in names)


def _hlo_files(dump: str | None) -> set[str]:
    if not dump or not os.path.isdir(dump):
        return set()
    with os.scandir(dump) as it:
        return {e.name for e in it if e.name.endswith(HLO_SUFFIX)}


def new_hlo_modules() -> list[tuple[str, str]]:
    """(module name, optimized HLO text) of the modules compiled since the last call."""
    dump = STATE.get("dump")
    now = _hlo_files(dump)
    fresh = sorted(now - STATE.get("seen", set()))
    STATE["seen"] = now
    out = []
    for name in fresh:
        try:
            with open(os.path.join(dump, name)) as fh:
                text = fh.read(MAX_HLO_CHARS)
        except OSError:
            continue
        out.append((name[: -len(HLO_SUFFIX)], text))
    return out


def _shell():
    try:
        from IPython import get_ipython

        return get_ipython()
    except ImportError:
        return None


def _namespace() -> dict:
    shell = _shell()
    if shell is not None:
        return shell.user_ns
    return sys.modules["__main__"].__dict__


#: {cell filename: its notebook label, e.g. "In[5]"}: how tracebacks name the cells' frames
CELL_LABELS: dict[str, str] = {}


def _execute(code: str, ns: dict, filename: str, header: str = ""):
    """exec a cell; the value of a final expression statement is returned (like IPython).
    ``header``: the lines above the code in the notebook's cell (the ``%%mpijax`` line), so that
    line numbers and context in tracebacks are those the notebook shows."""
    shell = _shell()
    if shell is not None and hasattr(shell, "transform_cell"):
        # IPython's transforms drop leading blank lines: put them back, line numbers count them
        blank = len(code) - len(code.lstrip("\n"))
        code = "\n" * blank + shell.transform_cell(code).lstrip("\n")
    head = header.splitlines(True)
    linecache.cache[filename] = (len(header) + len(code), None, head + code.splitlines(True), filename)
    try:
        tree = ast.parse(code, filename)
    except SyntaxError as exc:  # line numbers of the notebook's cell, as for other errors
        if exc.lineno is not None:
            exc.lineno += len(head)
            if getattr(exc, "end_lineno", None) is not None:
                exc.end_lineno += len(head)
        raise exc.with_traceback(None) from None
    if head:
        ast.increment_lineno(tree, len(head))
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, filename, "exec"), ns)  # noqa: S102 - running the user's cell is the point
    if last is not None:
        return eval(compile(last, filename, "eval"), ns)  # noqa: S307
    return None


def _name_cells(hlo_text: str) -> str:
    """Source locations in compiled HLO name cells as the notebook does (``Cell In[5]``)."""
    if "<mpijax-cell-" not in hlo_text:
        return hlo_text
    for filename, label in CELL_LABELS.items():
        if label != filename:
            hlo_text = hlo_text.replace(f'"{filename}"', f'"Cell {label}"')  # metadata and file tables
    return hlo_text


def _error(exc: BaseException) -> ErrorInfo:
    """The error as the notebook shows it: IPython-style traceback (mpinb.tracebacks)."""
    from .tracebacks import format_exception

    text = format_exception(exc, CELL_LABELS)
    return ErrorInfo(ename=type(exc).__name__, evalue=str(exc), traceback=text)


def _flatten(tree):
    import jax

    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [(jax.tree_util.keystr(path), leaf) for path, leaf in leaves]


def _is_array_tree(value) -> bool:
    import jax

    if isinstance(value, (type, type(sys))) or (callable(value) and not hasattr(value, "shape")):
        return False
    try:
        leaves = jax.tree_util.tree_leaves(value)
    except Exception:  # noqa: BLE001
        return False
    return bool(leaves) and all(hasattr(x, "shape") and hasattr(x, "dtype") for x in leaves)


def _jax_computed(value) -> bool:
    """Worth comparing jit against eager: a pytree of arrays with at least one JAX array (not
    NumPy arrays the cell merely built), or a Python int (a counter a jitted function bumped at
    trace time). Floats are left out: timings differ between the two passes by nature."""
    import jax

    if isinstance(value, int):
        return True
    return _is_array_tree(value) and any(isinstance(x, jax.Array) for x in jax.tree_util.tree_leaves(value))


class _Tee(io.TextIOBase):
    """Write to ``stream`` (the engine's stdout, streamed to the notebook) and keep a copy."""

    def __init__(self, stream):
        self.stream, self.copy = stream, io.StringIO()

    def write(self, text):
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()


def _rollback(ns: dict, snapshot: dict) -> None:
    """Undo the bindings a cell made in ``ns``: new names go, rebound names get their old value.
    (Objects mutated in place stay mutated: the README says so.)"""
    for name in [k for k in ns if k not in snapshot]:
        del ns[name]
    for name, value in snapshot.items():
        if ns.get(name, snapshot) is not value:
            ns[name] = value


def _eager_pass(code: str, ns: dict, filename: str, header: str = ""):
    """Run the cell under jax.disable_jit() in the real namespace, so that functions defined in
    earlier cells read the cell's new globals (as eager execution would), then roll the bindings
    back for the jitted pass. Returns (the namespace as the eager pass left it, its value, what it
    printed, its error or None)."""
    import jax

    snapshot = dict(ns)
    out = io.StringIO()
    value, error = None, None
    try:
        with jax.disable_jit(), contextlib.redirect_stdout(out):
            value = _execute(code, ns, filename, header)
    except BaseException as exc:  # noqa: BLE001 - reported, the jitted run still happens
        error = _error(exc)
    finally:
        after = dict(ns)
        _rollback(ns, snapshot)
    return after, value, out.getvalue(), error


def _compare_passes(names, ns, value, eager_ns, eager_value, stdout, eager_stdout) -> list:
    comps = [dataclasses.replace(c, quiet=isinstance(ns.get(c.name), int))
             for c in cmp.compare_namespaces(names, ns, eager_ns, _flatten, _jax_computed)]
    if value is not None and _jax_computed(value):
        comps.extend(cmp.compare_trees("Out", value, eager_value, _flatten))
    if stdout != eager_stdout:
        lines, eager_lines = len(stdout.splitlines()), len(eager_stdout.splitlines())
        if lines != eager_lines:
            detail = (f"the jitted run printed {lines} line{'s' * (lines != 1)}, the eager run {eager_lines} "
                      "(Python code inside a jitted function runs only when it is traced)")
        else:
            detail = (f"the two runs printed different text ({lines} line{'s' * (lines != 1)} each; timings, "
                      "or values computed differently)")
        comps.append(cmp.Comparison("stdout", "different", quiet=True, detail=detail))
    return comps


def _diff_images(comparisons, ns, eager_ns) -> dict:
    """jit - eager of the 2-D values found different, sampled for the view."""
    out = {}
    for c in comparisons:
        if c.status != "different" or c.name not in ns or c.name not in (eager_ns or {}):
            continue
        try:
            a, b = np.asarray(ns[c.name]), np.asarray(eager_ns[c.name])
        except Exception:  # noqa: BLE001, S112 - not an array: nothing to draw
            continue
        if a.ndim == 2 and a.shape == b.shape and a.dtype.kind in "biufc":
            out[c.name] = values.sample(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64) - b)
    return out


def run_cell(code: str, *, compare: bool = False, show: tuple[str, ...] = (), hlo: bool = True,
             images: bool = False, participants: tuple[int, ...] | None = None,
             label: str | None = None, header: str = "") -> RankRecord:
    """Run one cell here and describe what happened (see module docstring). ``participants``:
    the ranks that run this cell when not all do; a collective that needs another rank then
    fails at once instead of waiting forever. ``label``: how tracebacks name the cell
    (``In[5]``, the notebook's execution count); ``header``: the cell's lines above the code."""
    from mpinb.mpi import library

    STATE["cells"] = STATE.get("cells", 0) + 1
    cell_no = STATE["cells"]
    STATE["running"] = cell_no
    lib = library.load()
    lib.set_participants(participants)
    calls_before, wall0, mpi0 = lib.counters()["calls"], time.time(), lib.wtime()
    try:
        CELL_LABELS[f"<mpijax-cell-{cell_no}>"] = label or f"<mpijax-cell-{cell_no}>"
        record = _run_cell(cell_no, code, compare=compare, show=show, hlo=hlo, images=images, header=header)
        traces.note_traces(_namespace())
        events, record.timeline_dropped = lib.timeline(calls_before)
        record.timeline = [(e["op"], wall0 + e["t0"] - mpi0, wall0 + e["t1"] - mpi0, e["bytes"], e["peer"])
                           for e in events]
        return record
    finally:
        library.load().set_participants(None)
        STATE["running"] = None


def _run_cell(cell_no, code, *, compare, show, hlo, images, header) -> RankRecord:
    filename = f"<mpijax-cell-{cell_no}>"
    ns = _namespace()
    before = {k: id(v) for k, v in ns.items()}
    record = RankRecord(rank=STATE.get("rank"), ok=True, hlo_capture=STATE.get("hlo_ok", False))
    if hlo:
        new_hlo_modules()  # forget modules compiled outside %%mpijax cells
    eager_ns, eager_value, eager_stdout = None, None, ""
    if compare:
        eager_ns, eager_value, eager_stdout, record.eager_error = _eager_pass(code, ns, filename, header)
    t0 = time.perf_counter()
    value = None
    tee = _Tee(sys.stdout) if compare else None
    try:
        with contextlib.redirect_stdout(tee) if tee else contextlib.nullcontext():
            value = _execute(code, ns, filename, header)
    except BaseException as exc:  # noqa: BLE001 - reported to the client per rank
        record.ok = False
        record.error = _error(exc)
    record.elapsed = time.perf_counter() - t0
    if value is not None:
        record.result = _summary(value, images)
    for name in show:
        record.show[name] = _summary(ns[name], images) if name in ns else {"kind": "object", "repr": "<not defined>"}
    if compare and record.ok and record.eager_error is None:
        assigned = [k for k, v in ns.items() if not k.startswith("_") and (k not in before or before[k] != id(v))]
        record.comparisons = _compare_passes(assigned, ns, value, eager_ns, eager_value,
                                                tee.copy.getvalue(), eager_stdout)
        differing = {cmp.variable(c.name) for c in record.comparisons if c.status == "different"}
        if differing:
            record.hints = traces.hints(code, ns, differing, stdout_differs="stdout" in differing)
        if images:
            record.diff_images = _diff_images(record.comparisons, ns, eager_ns)
    if hlo:
        record.hlo = [(name, _name_cells(text)) for name, text in new_hlo_modules()]
    return record


def _summary(value, images: bool):
    if _is_array_tree(value) and not hasattr(value, "shape"):
        leaves = _flatten(value)
        return {"kind": "tree", "leaves": [(p, values.summarize(x, image=images)) for p, x in leaves[:16]],
                "more": max(0, len(leaves) - 16)}
    return values.summarize(value, image=images)


def compiled_hlo(expr: str) -> list[tuple[str, str]]:
    """Optimized HLO of a jitted call written as an expression, e.g. ``f(x)`` where f is jitted.

    The expression is evaluated in the engine namespace with its callee lowered and compiled
    instead of run: ``f(x)`` becomes ``f.lower(x).compile().as_text()``.
    """
    ns = _namespace()
    tree = ast.parse(expr, "<mpijax-hlo>", mode="eval")
    if not isinstance(tree.body, ast.Call):
        raise ValueError(f"%mpijax hlo: expected a call such as f(x), got {expr!r}")
    call = tree.body
    fn = eval(compile(ast.Expression(call.func), "<mpijax-hlo>", "eval"), ns)  # noqa: S307
    args = [eval(compile(ast.Expression(a), "<mpijax-hlo>", "eval"), ns) for a in call.args]  # noqa: S307
    kwargs = {k.arg: eval(compile(ast.Expression(k.value), "<mpijax-hlo>", "eval"), ns) for k in call.keywords}  # noqa: S307
    if not hasattr(fn, "lower"):
        import jax

        fn = jax.jit(fn)
    compiled = fn.lower(*args, **kwargs).compile()
    name = getattr(fn, "__name__", "fn")
    return [(f"jit_{name}", _name_cells(compiled.as_text()))]
