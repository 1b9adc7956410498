"""``--compare`` on the engine: the cell run once eagerly (``jax.disable_jit()``, in the real
namespace, its bindings rolled back), then jitted; what JAX computed, the cell's value and what
it printed compared between the two runs (mpinb.analysis.compare), and the differences of 2-D
values sampled for pictures.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import inspect
import io
import sys

import numpy as np

from ..analysis import compare as cmp
from ..wire import values
from .code import error_info, execute_code


def flatten(tree):
    """[(path, leaf)] of a pytree; a jax.Array spread over several processes (which no process
    can read whole) becomes this rank's shards, each named by the block it holds: ``[0:4, :]``."""
    import jax

    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    out = []
    for path, leaf in leaves:
        key = jax.tree_util.keystr(path)
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            blocks = {block_label(s.index, leaf.shape): s.data for s in leaf.addressable_shards}
            out.extend((key + label, data) for label, data in sorted(blocks.items()))
        else:
            out.append((key, leaf))
    return out


def block_label(index: tuple, shape: tuple) -> str:
    """``[0:4, :]`` for the block ``index`` (slices) of an array of ``shape``; ``[...]`` for all of it."""
    return values.block_text(values.block_bounds(index, shape), shape)


def multi_process_hints(code: str, ns: dict, differing: set[str]) -> list[str]:
    """On a multi-process runtime, a hint for the differing variables computed from what one of
    JAX's multi-process helpers (``jax.experimental.multihost_utils``) returned: under
    ``jax.disable_jit`` they may see only this process's data, so such values can differ
    between the passes by nature."""
    import jax

    if jax.process_count() == 1:
        return []
    helpers = {name for name, fn in called_functions(code, ns).items()
               if getattr(fn, "__module__", "") == "jax.experimental.multihost_utils"}
    out = []
    for helper in sorted(helpers):
        names = sorted(computed_from(code, helper) & differing)
        if names:
            out.append(f"{', '.join(names)} {'was' if len(names) == 1 else 'were'} computed from {helper}, which "
                       "under jax.disable_jit (the eager pass) may see only this process's data: that "
                       "difference is JAX's eager mode, not jit (the sharded values themselves are "
                       "compared block by block)")
    return out


def computed_from(code: str, call: str) -> set[str]:
    """The names the cell assigns from an expression that calls ``call`` (a dotted name as
    written) or reads a name so assigned before, in statement order."""
    tainted: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            inner = list(ast.walk(node.value))
            calls = any(isinstance(n, ast.Call) and ast.unparse(n.func) == call for n in inner)
            if calls or any(isinstance(n, ast.Name) and n.id in tainted for n in inner):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                tainted |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return tainted


def called_functions(code: str, ns: dict) -> dict[str, object]:
    """{dotted name as written: object} of what the cell's code calls by a name or an attribute
    chain of ``ns`` (``f(...)``, ``multihost_utils.process_allgather(...)``)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            with contextlib.suppress(Exception):
                name = ast.unparse(node.func)
                parts = name.split(".")
                if parts[0] in ns and all(p.isidentifier() for p in parts):
                    value = ns[parts[0]]
                    for attr in parts[1:]:
                        value = inspect.getattr_static(value, attr)
                    found[name] = value
    return found


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
    (Objects mutated in place stay mutated: the README says so.)"""
    for name in [k for k in ns if k not in snapshot]:
        del ns[name]
    for name, value in snapshot.items():
        if ns.get(name, snapshot) is not value:
            ns[name] = value


def eager_pass(code: str, ns: dict, filename: str, header: str = ""):
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
            value = execute_code(code, ns, filename, header)
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
        if lines != eager_lines:
            detail = (f"the jitted run printed {lines} line{'s' * (lines != 1)}, the eager run {eager_lines} "
                      "(Python code inside a jitted function runs only when it is traced)")
        else:
            detail = (f"the two runs printed different text ({lines} line{'s' * (lines != 1)} each; timings, "
                      "or values computed differently)")
        comps.append(cmp.Comparison("stdout", "different", quiet=True, detail=detail))
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
