"""The optimized HLO of what a rank compiles (engine side). XLA dumps each compiled module into
this rank's directory (``--xla_dump_to``, set by mpinb.engine.startup before JAX initialises,
about 11 files per module); after each cell the engine reads the optimized text of the new
modules and deletes every dump file and folder, so the directory does not grow. ``%mpijax hlo f(x)``
compiles afresh (:func:`compiled_hlo`) and needs no file.
"""

from __future__ import annotations

import ast
import contextlib
import os
import shutil

from ..wire import cells
from . import stall
from .code import namespace
from .state import STATE

HLO_SUFFIX = ".cpu_after_optimizations.txt"
MAX_HLO_CHARS = 2_000_000


def new_hlo_modules() -> list[tuple[str, str]]:
    """(module name, optimized HLO text) of the modules compiled since the last call; the dump
    files are deleted once read."""
    dump = STATE.dump
    if not dump or not os.path.isdir(dump):
        return []
    out = []
    with os.scandir(dump) as it:
        entries = sorted(it, key=lambda entry: entry.name)
    for entry in entries:
        if entry.name.endswith(HLO_SUFFIX) and entry.is_file():
            with contextlib.suppress(OSError), open(entry.path) as fh:
                out.append((entry.name[: -len(HLO_SUFFIX)], fh.read(MAX_HLO_CHARS)))
        if entry.is_dir(follow_symlinks=False):  # XLA's per-module folder (module.mlir, options)
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
    stall.remember_modules(out)
    return out


def forget_hlo_modules() -> None:
    """Drop what was compiled until now (outside %%mpijax cells, or before setup)."""
    new_hlo_modules()


def name_cells(hlo_text: str) -> str:
    """Source locations in compiled HLO name cells as the notebook does (``Cell In[5]``)."""
    return cells.name_cells(hlo_text, STATE.cell_labels)


def compiled_hlo(expr: str) -> list[tuple[str, str]]:
    """Optimized HLO of a jitted call written as an expression, e.g. ``f(x)`` where f is jitted.

    The expression is evaluated in the engine namespace with its callee lowered and compiled
    instead of run: ``f(x)`` becomes ``f.lower(x).compile().as_text()``.
    """
    ns = namespace()
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
    return [(f"jit_{name}", name_cells(compiled.as_text()))]
