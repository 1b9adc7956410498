"""``--compare`` on the engine: the cell run once eagerly (``jax.disable_jit()``, in the real
namespace, its bindings rolled back), then jitted; what JAX computed, the cell's value and what
it printed compared between the two runs (mpinb.analysis.compare), and the differences of 2-D
values sampled for pictures.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import dataclasses
import io
import sys
import types

import numpy as np

from ..analysis import compare as cmp
from ..wire import values
from .code import error_info, execute_code
from .stall import resolve


def flatten(tree):
    """[(path, leaf)] of a pytree; a jax.Array spread over several processes (which no process
    can read whole) becomes this rank's shards, each named by the block it holds: ``[0:4, :]``."""
    import jax

    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    out = []
    for path, leaf in leaves:
        key = jax.tree_util.keystr(path)
        if isinstance(leaf, jax.Array) and values.is_spread(leaf):
            shape = tuple(leaf.shape)
            blocks = {values.block_bounds(s.index, shape): s.data for s in leaf.addressable_shards}
            if len(blocks) == 1 and values.block_text(next(iter(blocks)), shape) == "[...]":
                out.append((key, next(iter(blocks.values()))))  # replicated: this rank holds it all
            else:
                out.extend((key + values.block_text(b, shape), data) for b, data in sorted(blocks.items()))
        else:
            out.append((key, leaf))
    return out


MULTIHOST = "jax.experimental.multihost_utils"


def multi_process_hints(code: str, ns: dict, differing: set[str]) -> list[dict]:
    """On a multi-process runtime (``jax.distributed``), a hint ("multihost": the ``names`` of the
    differing variables and the ``helper``) for the differing variables
    computed from what one of JAX's multi-process helpers (``jax.experimental.multihost_utils``)
    returned: under ``jax.disable_jit`` they may see only this process's data, so such values
    can differ between the passes by nature. (Never starts JAX's backend.)"""
    import jax

    if not getattr(jax.distributed, "is_initialized", lambda: False)() or jax.process_count() == 1:
        return []
    helpers = {name for name, fn in called_functions(code, ns).items()
               if isinstance(fn, types.FunctionType) and fn.__module__ == MULTIHOST}
    out = []
    for helper in sorted(helpers):
        names = sorted(computed_from(code, helper) & differing)
        if names:
            out.append({"cause": "multihost", "names": names, "helper": helper})
    return out


def _bindings(tree) -> list[tuple[list, object]]:
    """(target nodes, value expression) of every binding in a cell: assignments (also annotated,
    augmented and ``:=``), ``for`` targets (from the iterable), ``with ... as`` (from the context)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            out.append((node.targets, node.value))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
            out.append(([node.target], node.value))
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            out.append(([node.target], node.iter))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            out.extend(([item.optional_vars], item.context_expr) for item in node.items if item.optional_vars)
    return out


def computed_from(code: str, call: str) -> set[str]:
    """The names the cell binds from an expression that calls ``call`` (a dotted name as
    written) or reads a name so bound anywhere in the cell (loops included)."""
    bindings = _bindings(ast.parse(code))
    tainted: set[str] = set()
    while True:
        before = len(tainted)
        for targets, value in bindings:
            inner = list(ast.walk(value))
            if (any(isinstance(n, ast.Call) and ast.unparse(n.func) == call for n in inner)
                    or any(isinstance(n, ast.Name) and n.id in tainted for n in inner)):
                tainted |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if len(tainted) == before:
            return tainted


def called_functions(code: str, ns: dict) -> dict[str, object]:
    """{dotted name as written: object} of what the cell's code calls by a name or an attribute
    chain of ``ns`` (``f(...)``, ``multihost_utils.process_allgather(...)``), looked up without
    running any code (mpinb.engine.stall.resolve)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}
    scopes = (ns, vars(builtins))
    return {ast.unparse(node.func): target for node in ast.walk(tree) if isinstance(node, ast.Call)
            for target in [resolve(node.func, scopes)] if target is not None}


def is_array_tree(value) -> bool:
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
    return is_array_tree(value) and any(isinstance(x, jax.Array) for x in jax.tree_util.tree_leaves(value))


class Tee(io.TextIOBase):
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
    (Objects mutated in place stay mutated: docs/reference/magic.md says so.)"""
    for name in [k for k in ns if k not in snapshot]:
        del ns[name]
    for name, value in snapshot.items():
        if ns.get(name, snapshot) is not value:
            ns[name] = value


def eager_pass(code: str, ns: dict, filename: str, header: str = ""):
    """Run the cell under jax.disable_jit() in the real namespace, so that functions defined in
    earlier cells read the cell's new globals (as eager execution would), then roll the bindings
    back for the jitted pass. Returns (the namespace as the eager pass left it, its value, what it
    printed, its error or None). The stop button's KeyboardInterrupt propagates (after the
    rollback): a stopped cell has no jitted pass."""
    import jax

    snapshot = dict(ns)
    out = io.StringIO()
    value, error = None, None
    try:
        with jax.disable_jit(), contextlib.redirect_stdout(out):
            value = execute_code(code, ns, filename, header)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - reported, the jitted run still happens
        error = error_info(exc)
    finally:
        after = dict(ns)
        _rollback(ns, snapshot)
    return after, value, out.getvalue(), error


def compare_passes(names, ns, value, eager_ns, eager_value, stdout, eager_stdout) -> list:
    """What the two passes left, compared. Names bound to Python ints (rank, sizes, flags) are
    compared only to catch counters bumped at trace time: kept when they differ, dropped when equal."""
    comps = [dataclasses.replace(c, quiet=isinstance(ns.get(c.name), int))
             for c in cmp.compare_namespaces(names, ns, eager_ns, flatten, _jax_computed)]
    comps = [c for c in comps if not (c.quiet and c.status == "equal")]
    if value is not None and _jax_computed(value):
        comps.extend(cmp.compare_trees("Out", value, eager_value, flatten))
    if stdout != eager_stdout:
        lines, eager_lines = len(stdout.splitlines()), len(eager_stdout.splitlines())
        cause = "line_count" if lines != eager_lines else "printed_text"
        comps.append(cmp.Comparison("stdout", "different", cause=cause, jitted=lines, eager=eager_lines,
                                    quiet=True, printed=True))
    return comps


def diff_images(comparisons, ns, eager_ns) -> dict:
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
