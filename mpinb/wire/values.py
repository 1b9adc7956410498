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


def block_bounds(index: tuple, shape: tuple) -> tuple:
    """((start, stop), ...) of the block ``index`` (a tuple of slices, as JAX gives a shard's
    index) of an array of ``shape``."""
    return tuple(part.indices(size)[:2] if isinstance(part, slice) else (part, part + 1)
                 for part, size in zip(index, shape, strict=False))


def block_text(bounds: tuple, shape: tuple) -> str:
    """``[0:4, :]`` for a block's bounds in an array of ``shape``; ``[...]`` for all of it."""
    parts = [":" if (start, stop) == (0, size) else f"{start}:{stop}"
             for (start, stop), size in zip(bounds, shape, strict=False)]
    return "[...]" if all(p == ":" for p in parts) else f"[{', '.join(parts)}]"


#: at most this many devices' blocks travel for the picture of a sharded array
MAX_BLOCKS = 256


def blocks_of(value) -> list | int | None:
    """[(process, bounds)] of a JAX array spread over several devices: which process holds which
    block (each pair once); the number of devices if over MAX_BLOCKS; None for a value on one
    device or not a JAX array."""
    sharding = getattr(value, "sharding", None)
    devices = len(getattr(sharding, "device_set", ()))
    if devices < 2:
        return None
    if devices > MAX_BLOCKS:
        return devices
    shape = tuple(value.shape)
    return sorted({(device.process_index, block_bounds(index, shape))
                   for device, index in sharding.devices_indices_map(shape).items()})


def is_spread(value) -> bool:
    """A JAX array this process does not hold whole (sharded across processes)."""
    return hasattr(value, "addressable_shards") and not getattr(value, "is_fully_addressable", True)


def _local_data(value):
    """The values this process can read: all of an ordinary array, or of a JAX array replicated
    on this process; of one spread over several processes, this process's blocks (flattened,
    each block once; empty when it holds none)."""
    if not is_spread(value):
        return np.asarray(value)
    shape = tuple(value.shape)
    mine = {block_bounds(s.index, shape): s.data for s in value.addressable_shards}
    if len(mine) == 1 and block_text(next(iter(mine)), shape) == "[...]":
        return np.asarray(next(iter(mine.values())))  # replicated: this rank holds it all
    if not mine:
        return np.empty((0,), np.dtype(value.dtype))
    return np.concatenate([np.asarray(mine[k]).reshape(-1) for k in sorted(mine)])


def summarize(value, *, image: bool = False) -> dict:
    if _array_like(value):
        try:
            a = _local_data(value)
        except Exception as exc:  # noqa: BLE001 - e.g. a tracer leaked into the namespace
            return {"kind": "object", "repr": f"<{type(value).__name__}: {exc}>"}
        out = {"kind": "array", "shape": tuple(value.shape), "dtype": str(a.dtype)}
        blocks = blocks_of(value)
        if blocks is not None:
            out["blocks"] = blocks
            if a.shape != tuple(value.shape):  # min, max, mean and preview: this rank's blocks only
                out["local"] = True
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
        if image and a.ndim == 2 and a.size and numeric and "local" not in out:
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
    if summary.get("local") and summary.get("preview") == "[]":
        return f"{parts[0]}  no block on this rank"
    if summary.get("local"):
        parts.append("this rank's blocks:")
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
