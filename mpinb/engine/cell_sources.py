"""The cells an engine remembers (engine side): each cell's source (in ``linecache``, for
tracebacks) and its notebook label (``STATE.cell_labels``, for tracebacks, stall reports and HLO).

A cell whose code defines something that can run again later (a function, a lambda, a class, a
generator) is remembered for the engine's life: a traceback or a stall in a later cell may pass
through it. Any other cell's code runs once, within its cell; it is remembered while it is among
the last ``KEEP_PLAIN`` such cells and then forgotten, so that a long session's memory stays flat.
"""

from __future__ import annotations

import ast
import collections
import linecache

from .state import STATE

#: plain cells (defining nothing) whose source and label are kept
KEEP_PLAIN = 20

_DEFINING = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.GeneratorExp)
_plain: collections.deque[str] = collections.deque()


def defines_code(source: str) -> bool:
    """Whether ``source`` defines code that can outlive its run (see the module); a source that
    does not parse (IPython syntax) is taken to."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return True
    return any(isinstance(node, _DEFINING) for node in ast.walk(tree))


def remember(filename: str, label: str, source: str) -> None:
    """Note a cell about to run under ``filename``; forget the plain cells beyond the last
    ``KEEP_PLAIN``."""
    STATE.cell_labels[filename] = label
    if defines_code(source):
        return
    _plain.append(filename)
    while len(_plain) > KEEP_PLAIN:
        old = _plain.popleft()
        STATE.cell_labels.pop(old, None)
        linecache.cache.pop(old, None)
