"""Jit against eager comparison of values. Pure NumPy: no JAX import, no IPython.

``compare(jitted, eager)`` classifies one pair of arrays as ``equal`` (bitwise, NaNs in the
same places), ``close`` (within the dtype's tolerance) or ``different`` (with the largest
absolute and relative difference and the first differing index); pytrees are compared leaf by
leaf through ``flatten`` (a JAX-aware flattener is passed in by the engine); ``tally`` gathers
them across ranks. The facts only: mpinb.view.compare_words says them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping

import numpy as np

#: (rtol, atol) per dtype name: about 10 units in the last place of the format
TOLERANCES = {
    "float16": (1e-2, 1e-3),
    "bfloat16": (5e-2, 1e-2),
    "float32": (1e-5, 1e-6),
    "float64": (1e-12, 1e-14),
    "complex64": (1e-5, 1e-6),
    "complex128": (1e-12, 1e-14),
}


@dataclasses.dataclass(frozen=True)
class Comparison:
    name: str
    status: str                # equal | close | different | missing
    max_abs: float = 0.0
    max_rel: float = 0.0
    first_index: tuple | None = None
    cause: str = ""            # why, when not numbers: values | shape | dtype | structure | not_assigned |
    #                            line_count | printed_text ("": the numbers above)
    jitted: object = None      # the cause's fact on the jitted side (a repr, shape, dtype, paths, lines)
    eager: object = None       # the same fact on the eager side
    quiet: bool = False        # named in the summary only when it differs (Python ints, stdout)
    printed: bool = False      # what the cell printed, not a value: never a "jit != eager" verdict


def _as_numpy(x):
    try:
        return np.asarray(x)
    except Exception:  # noqa: BLE001 - not array-like: compared by equality below
        return None


def compare(name: str, jitted, eager) -> Comparison:
    a, b = _as_numpy(jitted), _as_numpy(eager)
    if a is None or b is None or a.dtype == object or b.dtype == object:
        same = jitted == eager
        try:
            same = bool(same)
        except Exception:  # noqa: BLE001
            same = False
        if same:
            return Comparison(name, "equal")
        return Comparison(name, "different", cause="values", jitted=repr(jitted), eager=repr(eager))
    if a.shape != b.shape:
        return Comparison(name, "different", cause="shape", jitted=a.shape, eager=b.shape)
    if a.dtype != b.dtype:
        return Comparison(name, "different", cause="dtype", jitted=str(a.dtype), eager=str(b.dtype))
    if a.size == 0:
        return Comparison(name, "equal")
    kind = a.dtype.kind
    if kind in "fc" or a.dtype.name == "bfloat16":
        af = a.astype(np.complex128 if kind == "c" else np.float64)
        bf = b.astype(np.complex128 if kind == "c" else np.float64)
        both_nan = np.isnan(af) & np.isnan(bf)
        same = (af == bf) | both_nan
        if same.all():
            return Comparison(name, "equal")
        diff = np.where(both_nan, 0, np.abs(af - bf))
        diff = np.where(np.isnan(diff), np.inf, diff)
        scale = np.maximum(np.abs(af), np.abs(bf))
        rel = np.where(scale > 0, diff / np.where(scale > 0, scale, 1), 0)
        rtol, atol = TOLERANCES.get(a.dtype.name, (1e-5, 1e-6))
        max_abs, max_rel = float(diff.max()), float(rel.max())
        first = tuple(int(i) for i in np.unravel_index(int(np.argmax(~same)), a.shape)) if a.ndim else ()
        if np.all(diff <= atol + rtol * scale):
            return Comparison(name, "close", max_abs, max_rel, first)
        return Comparison(name, "different", max_abs, max_rel, first)
    same = a == b
    if same.all():
        return Comparison(name, "equal")
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64)) if kind in "iub" else np.zeros(a.shape)
    first = tuple(int(i) for i in np.unravel_index(int(np.argmax(~same)), a.shape)) if a.ndim else ()
    if kind in "iub":
        scale = np.maximum(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    else:
        scale = np.ones(a.shape)
    rel = np.where(scale > 0, diff / np.where(scale > 0, scale, 1), 0)
    return Comparison(name, "different", float(diff.max()), float(rel.max()), first)


def compare_trees(name: str, jitted, eager, flatten: Callable) -> list[Comparison]:
    """Compare two pytrees leaf by leaf; ``flatten(tree) -> [(path string, leaf), ...]``."""
    ja, ea = flatten(jitted), flatten(eager)
    jpaths, epaths = [p for p, _ in ja], [p for p, _ in ea]
    if jpaths != epaths:
        return [Comparison(name, "different", cause="structure", jitted=jpaths, eager=epaths)]
    return [compare(f"{name}{path}", x, y) for (path, x), (_, y) in zip(ja, ea, strict=True)]


def compare_namespaces(names: Iterable[str], jitted: Mapping, eager: Mapping, flatten: Callable,
                       is_array_like: Callable) -> list[Comparison]:
    """Compare the variables ``names`` (those holding arrays or pytrees of arrays)."""
    out = []
    for name in names:
        if name not in jitted:
            continue
        if name not in eager:
            out.append(Comparison(name, "missing", cause="not_assigned"))
            continue
        if not is_array_like(jitted[name]):
            continue
        out.extend(compare_trees(name, jitted[name], eager[name], flatten))
    return out


def variable(name: str) -> str:
    """The variable a comparison is about: 'b' for "b['x'][0]"."""
    return re.split(r"[\[.]", name, maxsplit=1)[0]


@dataclasses.dataclass
class Tally:
    """What was compared, across ranks, by variable."""

    differ: dict[str, list[int]]    # variable -> the ranks where jit != eager (or eager did not assign it)
    printed: dict[str, list[int]]   # printed text -> the ranks where the two runs printed differently
    same: list[str]                 # the variables equal (or close) everywhere they were compared
    close: bool                     # some were close, not equal


def tally(per_rank: Mapping[int, list[Comparison]]) -> Tally:
    """What was compared and where it differs, across ranks; printed text that differs is kept
    apart, never a verdict on the values (timings, or what jitted code prints when traced)."""
    out = Tally({}, {}, [], False)
    for rank, comps in sorted(per_rank.items()):
        for c in comps:
            var = variable(c.name)
            if c.status in ("different", "missing"):
                (out.printed if c.printed else out.differ).setdefault(var, []).append(rank)
            elif var not in out.same and not c.quiet:
                out.same.append(var)
            out.close = out.close or c.status == "close"
    return out
