"""Where the cell is while it runs (engine side), read from the main thread's stack by the
engine's status thread, for any blocking call: a JAX collective, an mpi4py call, a sleep.

:func:`where_now` says: the line of the running cell (``In[7]``, line 5), the innermost frame of
the user's own code (function and line: a cell, or a file outside Python, JAX, mpinb and the
site-packages), and, when that line calls a jitted function, its name and the collectives its
compiled module holds (XLA's own, or mpinb's), as mpinb.engine.hlo_capture read them.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import linecache
import os
import sys
import sysconfig
import threading

from ..wire.cell_names import is_cell_file
from .hlo_capture import collectives_of
from .state import STATE


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    """Python's, the site-packages' and mpinb's directories (computed once: read every 0.2 s)."""
    paths = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    packages = [os.path.dirname(getattr(sys.modules.get(name), "__file__", "") or "") for name in ("mpinb",)]
    return tuple(p + os.sep for p in (*paths, *packages) if p)


def is_user_frame(filename: str) -> bool:
    """A cell's code or a file of the user's (not Python's, a package's, JAX's or mpinb's)."""
    if is_cell_file(filename):
        return True
    if filename.startswith("<"):
        return False
    return not os.path.abspath(filename).startswith(_library_dirs())


def where_now() -> dict | None:
    """Where the main thread is (see the module's docstring); None when it runs no cell code.
    While the cell's code has returned and its queued JAX work is awaited (mpinb.engine.settle):
    the cell and ``settling``, no line."""
    if STATE.settling is not None:
        return {"cell": STATE.settling, "settling": True}
    frame = sys._current_frames().get(threading.main_thread().ident)
    return where(frame) if frame is not None else None


def where(frame) -> dict | None:
    """Where the stack whose innermost frame is ``frame`` is: the running cell's line (its
    outermost cell frame: a function of an earlier cell may run inside it), the innermost frame
    of the user's code, a jitted call on that frame's line."""
    cell = user = None
    innermost = frame
    while frame is not None:
        filename = frame.f_code.co_filename
        if user is None and is_user_frame(filename):
            user = frame
        if is_cell_file(filename):
            cell = frame
        frame = frame.f_back
    if cell is None:
        return None
    out = {"cell": STATE.cell_labels.get(cell.f_code.co_filename, cell.f_code.co_filename),
           "line": cell.f_lineno}
    if user is not None and user is not cell:
        filename = user.f_code.co_filename
        out["function"] = user.f_code.co_name
        out["file"] = STATE.cell_labels.get(filename, filename)
        out["file_is_cell"] = is_cell_file(filename)
        out["file_line"] = user.f_lineno
    if user is innermost or (user is not None and _only_library_below(innermost, user)):
        jitted = jitted_call(user)
        if jitted:
            out["call"] = jitted
            out["collectives"] = collectives_of(jitted)
    return out


def _only_library_below(innermost, user) -> bool:
    """Whether every frame inside ``user`` belongs to libraries (JAX dispatching the call)."""
    frame = innermost
    while frame is not None and frame is not user:
        if is_user_frame(frame.f_code.co_filename):
            return False
        frame = frame.f_back
    return frame is user


def jitted_call(frame) -> str | None:
    """The name of a jitted function called on the frame's current line, if any ('stepper')."""
    text = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    try:
        tree = ast.parse(text.rstrip(":"), mode="exec")
    except SyntaxError:
        return None
    scopes = (frame.f_locals, frame.f_globals, vars(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            target = resolve(node.func, scopes)
            if target is not None and hasattr(target, "lower") and hasattr(target, "__wrapped__"):
                return getattr(target, "__name__", None) or "jitted function"
    return None


def resolve(node, scopes):
    """The object a name or attribute chain refers to, looked up without running any code
    (no properties, no __getattr__); None if unknown."""
    if isinstance(node, ast.Name):
        return next((scope[node.id] for scope in scopes if node.id in scope), None)
    if isinstance(node, ast.Attribute):
        base = resolve(node.value, scopes)
        if base is not None:
            return inspect.getattr_static(base, node.attr, None)
    return None
