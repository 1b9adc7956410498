"""Compact, picklable summaries of values for the per-rank view (pure NumPy).

Arrays are described by shape, dtype, min/max/mean and a short preview instead of being sent
whole from the engines; 2-D arrays can also travel as a small image (at most IMAGE_SIDE values
per side, nearest-neighbour sampled), which the notebook colours on one scale shared by all
ranks (``mpinb.view.images``).
"""

from __future__ import annotations

import numpy as np

PREVIEW = 6
IMAGE_SIDE = 160


def _array_like(value) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, type)


def summarize(value, *, image: bool = False) -> dict:
    if _array_like(value):
        try:
            a = np.asarray(value)
        except Exception as exc:  # noqa: BLE001 - e.g. a tracer leaked into the namespace
            return {"kind": "object", "repr": f"<{type(value).__name__}: {exc}>"}
        out = {"kind": "array", "shape": tuple(a.shape), "dtype": str(a.dtype)}
        numeric = a.dtype.kind in "biufc" or a.dtype.name == "bfloat16"
        if a.size and numeric:
            f = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
            mag = np.abs(f) if a.dtype.kind == "c" else f
            finite = np.isfinite(mag)
            out["nan"] = int(np.isnan(mag).sum())
            if finite.any():
                vals = mag[finite]
                out.update(min=float(vals.min()), max=float(vals.max()), mean=float(vals.mean()))
                if a.dtype.kind == "c":
                    out["abs"] = True
        flat = a.reshape(-1)
        out["preview"] = np.array2string(flat[:PREVIEW], precision=4, separator=", ", threshold=PREVIEW + 1)
        out["truncated"] = bool(flat.size > PREVIEW)
        if image and a.ndim == 2 and a.size and numeric:
            out["image"] = sample(a)
        return out
    text = repr(value)
    out = {"kind": "object", "repr": text if len(text) <= 400 else text[:400] + "..."}
    if type(value) in (bool, int, float) or isinstance(value, np.bool_):
        out["value"] = value.item() if isinstance(value, np.generic) else value  # for programs, not people
    return out


def describe(summary: dict) -> str:
    """One-line text of a summary, e.g. ``f32[4,8] min 0 max 31 mean 15.5 [0, 1, 2, ...]``."""
    if summary.get("kind") != "array":
        return summary.get("repr", "")
    shape = ",".join(map(str, summary["shape"]))
    parts = [f"{summary['dtype']}[{shape}]"]
    if "min" in summary:
        tag = "|x| " if summary.get("abs") else ""
        parts.append(f"{tag}min {summary['min']:.6g} max {summary['max']:.6g} mean {summary['mean']:.6g}")
    if summary.get("nan"):
        parts.append(f"{summary['nan']} NaN")
    prev = summary.get("preview", "")
    if summary.get("truncated") and prev.endswith("]"):
        prev = prev[:-1] + ", ...]"
    parts.append(prev)
    return "  ".join(parts)


def sample(a, side: int = IMAGE_SIDE) -> np.ndarray:
    """A 2-D array nearest-neighbour sampled to at most ``side`` x ``side`` float32 values
    (magnitudes for complex arrays): what travels to the notebook to be drawn."""
    a = np.asarray(a)
    a = np.abs(a) if a.dtype.kind == "c" else a.astype(np.float64)
    rows = np.linspace(0, a.shape[0] - 1, min(side, a.shape[0])).astype(int)
    cols = np.linspace(0, a.shape[1] - 1, min(side, a.shape[1])).astype(int)
    return a[np.ix_(rows, cols)].astype(np.float32)
