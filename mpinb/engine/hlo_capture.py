"""The optimized HLO of what a rank compiles (engine side). XLA dumps each compiled module into
this rank's directory (``--xla_dump_to``, set by mpinb.engine.startup before JAX initialises,
about 11 files per module); after each cell the engine reads the optimized text of the new
modules (not mpinb's own fence, mpinb.engine.settle) and deletes every dump file and folder,
so the directory does not grow. ``%mpijax hlo f(x)`` compiles afresh (:func:`compiled_hlo`)
and needs no file.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import shutil
import stat
import time

from ..analysis import hlo
from ..analysis.hlo_text import parse_module
from ..wire import cell_names
from .code import namespace
from .settle import FENCE_MODULE
from .state import STATE

HLO_SUFFIX = ".cpu_after_optimizations.txt"
MAX_HLO_CHARS = 2_000_000
#: collectives of the modules compiled so far, as (name, group size), by module_key of their names
MODULE_COLLECTIVES: dict[str, list[tuple[str, int | None]]] = {}
#: [the modification time (ns) of the dump folder when it was last found empty, or None]
_quiet: list[int | None] = [None]
#: a folder's modification time is coarse: the kernel's coarse clock (ticks of 10 ms, which can
#: stall longer in a paused VM), whole seconds on some filesystems, a file server's clock on
#: NFS. A folder found empty this long after its last change keeps its time until written to.
QUIET_AFTER_NS = 5_000_000_000


def new_hlo_modules() -> list[tuple[str, str]]:
    """(module name, optimized HLO text) of the modules compiled since the last call; the dump
    files are deleted once read. A folder found empty is not read again while its modification
    time stays the same (``_quiet``): most cells compile nothing."""
    dump = STATE.dump
    if not dump:
        return []
    before = time.time_ns()
    try:
        status = os.stat(dump)
    except OSError:
        return []
    if not stat.S_ISDIR(status.st_mode):
        return []
    modified = status.st_mtime_ns
    if _quiet[0] == modified:
        return []
    _quiet[0] = None
    out = []
    with os.scandir(dump) as it:
        entries = sorted(it, key=lambda entry: entry.name)
    if not entries and before - modified > QUIET_AFTER_NS:
        _quiet[0] = modified  # whatever is written from now on moves the time past this one
    for entry in entries:
        if entry.name.endswith(HLO_SUFFIX) and entry.is_file() and FENCE_MODULE not in entry.name:
            with contextlib.suppress(OSError), open(entry.path) as fh:
                out.append((entry.name[: -len(HLO_SUFFIX)], fh.read(MAX_HLO_CHARS)))
        if entry.is_dir(follow_symlinks=False):  # XLA's per-module folder (module.mlir, options)
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
    for name, text in out:
        MODULE_COLLECTIVES[module_key(name)] = hlo.module_collectives(parse_module(text))
    return out


def module_key(name: str) -> str:
    """A module's name without its dump prefix, as XLA spells it in file names and as the
    function's name gives it ('jit_<lambda>' and 'module_0004.jit__lambda' alike)."""
    return re.sub(r"[^A-Za-z0-9]+", "_", hlo.base_name(name)).strip("_")


def collectives_of(function: str) -> list[tuple[str, int | None]]:
    """The collectives of jitted ``function``'s module: compiled in an earlier cell, or in the
    running one (its dump file, read without deleting it: the cell's end reads and deletes it)."""
    key = module_key(f"jit_{function}")
    if key in MODULE_COLLECTIVES or not STATE.dump or not os.path.isdir(STATE.dump):
        return MODULE_COLLECTIVES.get(key, [])
    for entry in sorted(os.listdir(STATE.dump), reverse=True):
        if entry.endswith(HLO_SUFFIX) and module_key(entry[: -len(HLO_SUFFIX)]) == key:
            with contextlib.suppress(OSError), open(os.path.join(STATE.dump, entry)) as fh:
                return hlo.module_collectives(parse_module(fh.read(MAX_HLO_CHARS)))
            return []
    return []


def forget_hlo_modules() -> None:
    """Drop what was compiled until now (outside %%mpijax cells, or before setup)."""
    new_hlo_modules()


def name_cells(hlo_text: str) -> str:
    """Source locations in compiled HLO name cells as the notebook does (``Cell In[5]``)."""
    return cell_names.name_cells(hlo_text, STATE.cell_labels)


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
