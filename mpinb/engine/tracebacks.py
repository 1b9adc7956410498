"""Tracebacks as IPython shows them, for errors raised on the ranks::

    ValueError                                Traceback (most recent call last)
    Cell In[5], line 4
          2 x = jnp.ones(3)
          3 y = step(x)
    ----> 4 raise ValueError("bad")

    ValueError: bad

A frame of a notebook cell is named by the notebook's execution count (``Cell In[5]``) with
line numbers counted from the cell's first line (the ``%%mpijax`` line is line 1), and, inside a
function, by the function as IPython names it (``Cell In[5], line 4, in <lambda>``). Frames of
JAX's and mpinb's internals are left out, as ``jax_traceback_filtering`` leaves JAX's out, and so
are frames that ask to be hidden (``__tracebackhide__``). ``MPINB_TRACEBACK=full`` in the engines'
environment (``os.environ`` in a cell works: it is read when an error is formatted) keeps every
frame. Pure: no IPython.
"""

from __future__ import annotations

import linecache
import os
import sys

from .. import environment

CONTEXT = 2  # lines before and after the failing line
HIDDEN_PACKAGES = ("jax", "jaxlib", "mpinb")
FULL_ENV = environment.TRACEBACK.name  # "full": keep every frame
_CHAIN_SKIP = ("UnfilteredStackTrace",)  # JAX attaches the unfiltered trace as the cause
#: the cause JAX attaches to an error raised while it transformed an operation (a backward pass,
#: a lowering): the operation's own stack, said again. Folded into one line naming the user's
#: frame, unless MPINB_TRACEBACK=full.
_SOURCE_OF_OPERATION = "JaxStackTraceBeforeTransformation"


def _package_dirs() -> tuple[str, ...]:
    dirs = []
    for name in HIDDEN_PACKAGES:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path:
            dirs.append(os.path.dirname(path) + os.sep)
    return tuple(dirs)


def _full() -> bool:
    return os.environ.get(FULL_ENV, "").lower() == "full"


def hidden(frame, extra_files: tuple[str, ...] = ()) -> bool:
    """A frame the reader does not need: JAX's and mpinb's internals, __tracebackhide__."""
    if _full():
        return False
    filename = frame.f_code.co_filename
    if filename in extra_files or filename.startswith(_package_dirs()):
        return True
    return bool(frame.f_locals.get("__tracebackhide__") or frame.f_globals.get("__tracebackhide__"))


def _context(filename: str, lineno: int) -> list[str]:
    lines = []
    for n in range(max(1, lineno - CONTEXT), lineno + CONTEXT + 1):
        text = linecache.getline(filename, n)
        if not text:
            if n > lineno:
                break
            continue
        arrow = "----> " if n == lineno else "      "
        lines.append(f"{arrow}{n:<3} {text.rstrip()}")
    return lines


def format_frames(tb, labels: dict[str, str], extra_hidden: tuple[str, ...] = ()) -> list[str]:
    out = []
    while tb is not None:
        frame, lineno = tb.tb_frame, tb.tb_lineno
        if not hidden(frame, extra_hidden):
            filename = frame.f_code.co_filename
            label = labels.get(filename)
            if label:
                where = "" if frame.f_code.co_name == "<module>" else f", in {frame.f_code.co_name}"
                out.append(f"Cell {label}, line {lineno}{where}")
            else:
                out.append(f"File {filename}:{lineno}, in {frame.f_code.co_name}")
            out += _context(filename, lineno)
            out.append("")
        tb = tb.tb_next
    return out


def _operation_line(source, labels: dict[str, str], extra_hidden: tuple[str, ...]) -> str | None:
    """'JAX raised it while transforming the operation of Cell In[5], line 3, in loss': the
    innermost of the user's frames in JAX's stack of the operation; None without one."""
    where, tb = None, source.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        label = labels.get(frame.f_code.co_filename)
        if label and not hidden(frame, extra_hidden):
            name = "" if frame.f_code.co_name == "<module>" else f", in {frame.f_code.co_name}"
            where = f"Cell {label}, line {tb.tb_lineno}{name}"
        tb = tb.tb_next
    if where is None:
        return None
    return f"(JAX raised it while transforming the operation of {where}; {FULL_ENV}=full shows JAX's trace)"


def format_exception(exc: BaseException, labels: dict[str, str], tb=None,
                     extra_hidden: tuple[str, ...] = ()) -> str:
    """The whole report: chained causes first (as Python prints them), then the exception."""
    parts = []
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    folded = None
    if cause is not None and type(cause).__name__ == _SOURCE_OF_OPERATION and not _full():
        folded = _operation_line(cause, labels, extra_hidden)
        cause = cause.__cause__ or (None if cause.__suppress_context__ else cause.__context__)
    if cause is not None and type(cause).__name__ not in _CHAIN_SKIP:
        parts.append(format_exception(cause, labels, extra_hidden=extra_hidden))
        parts.append("The above exception was the direct cause of the following exception:\n"
                     if exc.__cause__ is not None else
                     "During handling of the above exception, another exception occurred:\n")
    name = type(exc).__name__
    lines = [f"{name:<42}Traceback (most recent call last)"]
    if folded:
        lines.append(folded)
    lines += format_frames(tb if tb is not None else exc.__traceback__, labels, extra_hidden)
    if isinstance(exc, SyntaxError) and exc.filename:  # where in the source, as IPython shows it
        label = labels.get(exc.filename)
        lines.append(f"Cell {label}, line {exc.lineno}" if label else f"File {exc.filename}:{exc.lineno}")
        if exc.text:
            lines.append(f"    {exc.text.rstrip()}")
            if exc.offset:
                lines.append("    " + " " * (max(exc.offset, 1) - 1 - (len(exc.text) - len(exc.text.lstrip()))) + "^")
        lines.append(f"{name}: {exc.msg}")
        parts.append("\n".join(lines))
        return "\n".join(parts)
    message = str(exc)
    lines.append(f"{name}: {message}" if message else name)
    parts.append("\n".join(lines))
    return "\n".join(parts)
