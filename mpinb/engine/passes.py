"""``--compare`` on the engine: the cell run once eagerly (``jax.disable_jit()``, in the real
namespace, its bindings rolled back), then jitted; what JAX computed, the cell's value and what
it printed compared between the two runs (mpinb.analysis.compare), and the differences of 2-D
values sampled for pictures.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import sys

import numpy as np

from ..analysis import compare as cmp
from ..wire import values
from .code import error_info, execute_code


def flatten(tree):
    import jax

    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [(jax.tree_util.keystr(path), leaf) for path, leaf in leaves]


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
