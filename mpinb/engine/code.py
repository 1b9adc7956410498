"""Executing code in the engine's interactive namespace (engine side), shared by the cell's passes
(mpinb.engine.execute, mpinb.engine.passes) and ``%mpijax hlo`` (mpinb.engine.hlo_capture):
the namespace (IPython's user namespace on an ipyparallel engine), running a cell's code as
IPython would (transforms, the value of a final expression, the notebook's line numbers), and an
error as the notebook shows it.
"""

from __future__ import annotations

import ast
import linecache
import sys

from ..wire.records import ErrorInfo
from .state import STATE
from .tracebacks import format_exception


def _shell():
    try:
        from IPython import get_ipython

        return get_ipython()
    except ImportError:
        return None


def namespace() -> dict:
    shell = _shell()
    if shell is not None:
        return shell.user_ns
    return sys.modules["__main__"].__dict__


def execute_code(code: str, ns: dict, filename: str, header: str = ""):
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


def error_info(exc: BaseException) -> ErrorInfo:
    """The error as the notebook shows it: IPython-style traceback (mpinb.engine.tracebacks)."""
    text = format_exception(exc, STATE.cell_labels)
    return ErrorInfo(ename=type(exc).__name__, evalue=str(exc), traceback=text)
