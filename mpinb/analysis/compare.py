"""Jit against eager comparison of values. Pure NumPy: no JAX import, no IPython.

``compare(jitted, eager)`` classifies one pair of arrays as ``equal`` (bitwise, NaNs in the
same places), ``close`` (within the dtype's tolerance) or ``different`` (with the largest
absolute and relative difference and the first differing index); pytrees are compared leaf by
leaf through ``flatten`` (a JAX-aware flattener is passed in by the engine).
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
    detail: str = ""
    quiet: bool = False        # named in the summary only when it differs (Python ints, stdout)
    printed: bool = False      # what the cell printed, not a value: never a "jit != eager" verdict

    def __str__(self) -> str:
        if self.status in ("equal", "close"):
            extra = f" (max abs {self.max_abs:.3g})" if self.status == "close" else ""
            return f"{self.name}: jit == eager{extra}" if self.status == "equal" else f"{self.name}: jit ~ eager{extra}"
        if self.status == "missing":
            return f"{self.name}: {self.detail}"
        if self.printed:
            return f"{self.name}: printed differently: {self.detail}"
        if self.detail and not self.max_abs and self.first_index is None:  # not numbers: printed text
            return f"{self.name}: jit != eager: {self.detail}"
        where = f" first at {list(self.first_index)}" if self.first_index is not None else ""
        return (f"{self.name}: jit != eager, max abs diff {self.max_abs:.6g}, max rel diff "
                f"{self.max_rel:.6g}{where}{(' ' + self.detail) if self.detail else ''}")


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
        return Comparison(name, "equal" if same else "different", detail="" if same else f"{jitted!r} vs {eager!r}")
    if a.shape != b.shape:
        return Comparison(name, "different", detail=f"shape {a.shape} vs {b.shape}")
    if a.dtype != b.dtype:
        return Comparison(name, "different", detail=f"dtype {a.dtype} vs {b.dtype}")
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
        return [Comparison(name, "different", detail=f"structure differs: {jpaths} vs {epaths}")]
    return [compare(f"{name}{path}", x, y) for (path, x), (_, y) in zip(ja, ea, strict=True)]


def compare_namespaces(names: Iterable[str], jitted: Mapping, eager: Mapping, flatten: Callable,
                       is_array_like: Callable) -> list[Comparison]:
    """Compare the variables ``names`` (those holding arrays or pytrees of arrays)."""
    out = []
    for name in names:
        if name not in jitted:
            continue
        if name not in eager:
            out.append(Comparison(name, "missing", detail="not assigned in the eager run"))
            continue
        if not is_array_like(jitted[name]):
            continue
        out.extend(compare_trees(name, jitted[name], eager[name], flatten))
    return out


def format_ranks(ranks) -> str:
    """'rank 2', 'ranks 0-3', 'ranks 0, 2, 5-7'."""
    from .grouping import label

    return label(ranks, sep=", ")


def variable(name: str) -> str:
    """The variable a comparison is about: 'b' for "b['x'][0]"."""
    return re.split(r"[\[.]", name, maxsplit=1)[0]


def summary(per_rank: Mapping[int, list[Comparison]]) -> str:
    """What was compared and where it differs, across ranks: 'jit != eager: b on ranks 0-3' or
    'jit == eager: b, t'; printed text that differs is said apart ('printed differently: stdout
    on rank 1'), never as a verdict on the values (timings, or what jitted code prints when traced)."""
    bad: dict[str, list[int]] = {}
    printed: dict[str, list[int]] = {}
    names: list[str] = []
    close = False
    for rank, comps in sorted(per_rank.items()):
        for c in comps:
            var = variable(c.name)
            if c.status in ("different", "missing"):
                (printed if c.printed else bad).setdefault(var, []).append(rank)
            elif var not in names and not c.quiet:
                names.append(var)
            close = close or c.status == "close"
    parts = []
    if bad:
        parts.append("jit != eager: " + "; ".join(f"{v} on {format_ranks(r)}" for v, r in bad.items()))
    elif names:
        parts.append(f"jit {'~' if close else '=='} eager: {', '.join(names)}{' (within tolerance)' if close else ''}")
    if printed:
        parts.append("printed differently: " + "; ".join(f"{v} on {format_ranks(r)}" for v, r in printed.items()))
    return "; ".join(parts)
