"""What each jitted function of a rank's namespace was traced with, for ``--compare``'s hints
(engine side).

A jitted function keeps the globals it was traced with: change ``scale`` after ``f`` ran once
and ``f`` still multiplies by the old ``scale``, while the eager pass reads the new one. After
every cell the engine notes, for each jitted function whose trace cache changed, the globals
its Python code reads (:func:`note_traces`); when ``--compare`` finds a difference,
:func:`hints` says which function the cell called still holds a global that changed since, and
which called function has a Python side effect (a global it assigns, a ``print``) that ran only
when it was traced.

No JAX import: a jitted function is recognised by what it offers (``__wrapped__`` and its
trace cache's ``_cache_size``).
"""

from __future__ import annotations

import ast
import contextlib
import dis
import types

#: {id of a jitted function: (the function, its trace cache size, {global: fingerprint})}
TRACED: dict[int, tuple[object, int, dict[str, tuple]]] = {}
#: arrays up to this many bytes are fingerprinted by content, larger ones by identity
CONTENT_BYTES = 1 << 16


def is_jitted(value) -> bool:
    return callable(getattr(value, "_cache_size", None)) and isinstance(getattr(value, "__wrapped__", None),
                                                                         types.FunctionType)


def _code_objects(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def globals_read(fn: types.FunctionType) -> dict[str, object]:
    """{name: value} of the module-level names ``fn``'s code (nested functions included) reads
    or calls, modules left out."""
    names = {n for code in _code_objects(fn.__code__) for n in code.co_names}
    return {n: fn.__globals__[n] for n in sorted(names)
            if n in fn.__globals__ and not isinstance(fn.__globals__[n], types.ModuleType)}


def globals_assigned(fn: types.FunctionType) -> set[str]:
    """The names ``fn`` assigns with ``global`` (its nested functions included)."""
    return {ins.argval for code in _code_objects(fn.__code__) for ins in dis.get_instructions(code)
            if ins.opname in ("STORE_GLOBAL", "DELETE_GLOBAL")}


def fingerprint(value) -> tuple:
    """What is compared to tell that a global changed: Python scalars and strings by value,
    small arrays by content, everything else (large arrays, functions, objects) by identity."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return ("value", value)
    small = getattr(value, "nbytes", CONTENT_BYTES + 1) <= CONTENT_BYTES
    if hasattr(value, "shape") and hasattr(value, "dtype") and small:
        import numpy as np

        with contextlib.suppress(Exception):  # not readable here (a global array of other processes)
            host = np.asarray(value)
            return ("array", host.shape, str(host.dtype), host.tobytes())
    return ("object", id(value))


def shown(value) -> dict:
    """A global's value as a hint shows it (mpinb.view.hint_words): a scalar or a short string
    by its ``repr``, an array by its ``dtype`` and ``shape``, anything else by its ``type``."""
    if value is None or isinstance(value, (bool, int, float, complex)):
        return {"repr": repr(value)}
    if isinstance(value, str) and len(value) <= 40:
        return {"repr": repr(value)}
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return {"dtype": str(value.dtype), "shape": list(value.shape)}
    return {"type": type(value).__name__}


def note_traces(ns: dict) -> None:
    """After a cell: for each jitted function in ``ns`` traced anew (its cache grew or was
    cleared), note the globals it read as they are now; forget functions gone from ``ns``."""
    alive = set()
    for value in list(ns.values()):
        if not is_jitted(value):
            continue
        alive.add(id(value))
        try:
            size = value._cache_size()
        except Exception:  # noqa: BLE001, S112 - a wrapper that looks jitted but is not
            continue
        known = TRACED.get(id(value))
        if known is None or known[0] is not value or known[1] != size:
            snapshot = {n: fingerprint(v) for n, v in globals_read(value.__wrapped__).items()}
            TRACED[id(value)] = (value, size, snapshot)
    for key in [k for k in TRACED if k not in alive]:
        del TRACED[key]


def called(code: str, ns: dict) -> dict[str, object]:
    """{name: jitted function} the cell's code names, directly or through a plain Python
    function it calls (one level)."""
    try:
        names = {node.id for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Name)}
    except SyntaxError:
        return {}
    found = {}
    for name in sorted(names):
        value = ns.get(name)
        if is_jitted(value):
            found[name] = value
        elif isinstance(value, types.FunctionType):
            for inner, inner_value in globals_read(value).items():
                if is_jitted(inner_value):
                    found[inner] = inner_value
    return found


def stale_globals(fn) -> list[dict]:
    """{"global", "was" (its repr when traced; None where it was no scalar), "now" (``shown``)}
    of the globals ``fn`` read that changed since it was last traced (nothing if it was never
    seen traced, or was traced again since)."""
    known = TRACED.get(id(fn))
    if known is None or known[0] is not fn or known[1] != fn._cache_size():
        return []
    now = globals_read(fn.__wrapped__)
    out = []
    for name, before in known[2].items():
        if name in now and fingerprint(now[name]) != before:
            was = repr(before[1]) if before[0] == "value" else None
            out.append({"global": name, "was": was, "now": shown(now[name])})
    return out


def hints(code: str, ns: dict, differing: set[str], stdout_differs: bool) -> list[dict]:
    """One hint per likely cause of the jit/eager differences ``--compare`` found, as facts
    (mpinb.view.hint_words says them): a ``function`` the cell called keeps a global it was
    traced with ("stale_global"), or has a side effect that ran only at trace time: a global it
    assigns among ``differing`` ("assigns_global"), a print when ``stdout_differs`` ("prints")."""
    out = []
    for name, fn in called(code, ns).items():
        out += [{"cause": "stale_global", "function": name, **stale} for stale in stale_globals(fn)]
        wrapped = fn.__wrapped__
        out += [{"cause": "assigns_global", "function": name, "global": glob}
                for glob in sorted(globals_assigned(wrapped) & differing)]
        if stdout_differs and "print" in {n for c in _code_objects(wrapped.__code__) for n in c.co_names}:
            out.append({"cause": "prints", "function": name})
    return out
