"""2-D values drawn for the per-rank view: every rank's picture of one variable on one colour
scale (so that equal values look equal), a colour bar with the scale's ends, nearest-neighbour
enlargement to at least MIN_SIDE pixels on the long side, and the difference jit - eager where
``--compare`` found them different. PNGs written with NumPy and zlib. Pure: no IPython.
"""

from __future__ import annotations

import base64
import functools
import html
import struct
import zlib

import numpy as np

MIN_SIDE = 160  # pixels on the long side, at least
#: viridis at five points, interpolated between them
_ANCHORS = np.array([[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]], float)


def colours(scaled: np.ndarray) -> np.ndarray:
    """Values in [0, 1] (NaN allowed: grey) -> uint8 RGB."""
    x = np.clip(np.nan_to_num(scaled, nan=0.0), 0, 1) * (len(_ANCHORS) - 1)
    lo = np.minimum(x.astype(int), len(_ANCHORS) - 2)
    t = (x - lo)[..., None]
    rgb = _ANCHORS[lo] * (1 - t) + _ANCHORS[lo + 1] * t
    rgb[np.isnan(scaled)] = (128, 128, 128)
    return rgb.astype(np.uint8)


def enlarge(pixels: np.ndarray, min_side: int = MIN_SIDE) -> np.ndarray:
    """Nearest-neighbour: each value becomes a k x k block, k the smallest making the long side
    at least ``min_side`` pixels."""
    k = max(1, -(-min_side // max(pixels.shape[:2])))
    return pixels.repeat(k, axis=0).repeat(k, axis=1)


def png(rgb: np.ndarray) -> bytes:
    """An 8-bit RGB PNG of an (h, w, 3) uint8 array."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[i].tobytes() for i in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def picture(values: np.ndarray, lo: float, hi: float) -> bytes:
    """``values`` coloured on the scale [lo, hi], enlarged."""
    scaled = np.zeros(values.shape) if not hi > lo else (values.astype(np.float64) - lo) / (hi - lo)
    scaled[np.isnan(values)] = np.nan
    return png(enlarge(colours(scaled)))


def scale(arrays) -> tuple[float, float]:
    """One (lo, hi) for all the arrays: the finite extremes over every rank."""
    finite = [a[np.isfinite(a)] for a in arrays]
    finite = [f for f in finite if f.size]
    if not finite:
        return 0.0, 1.0
    return float(min(f.min() for f in finite)), float(max(f.max() for f in finite))


def _img(data: bytes, alt: str) -> str:
    encoded = base64.b64encode(data).decode()
    return f"<img alt='{html.escape(alt)}' style='image-rendering:pixelated' src='data:image/png;base64,{encoded}'>"


@functools.cache
def _bar_png() -> bytes:
    """The colour bar's gradient (the same for every scale: only its end labels differ)."""
    return png(colours(np.tile(np.linspace(0, 1, MIN_SIDE), (10, 1))))


def colour_bar(lo: float, hi: float) -> str:
    bar = _bar_png()
    return (f"<div class='mpinb-colourbar' style='font-size:10px'>{lo:.4g} {_img(bar, 'colour bar')} {hi:.4g}"
            "</div>")


DIFF = ": jit - eager"  # label suffix of a difference picture


def pictures(result) -> dict[tuple[str, bool], dict[int, np.ndarray]]:
    """{(label, is a difference): {rank: values}} of every 2-D value the ranks sent (Out,
    --show names, and 'x: jit - eager' for values --compare found different)."""
    out: dict[tuple[str, bool], dict[int, np.ndarray]] = {}
    for rank, rec in result.records.items():
        if rec is None:
            continue
        items = ([("Out", rec.result)] if rec.result else []) + list(rec.show.items())
        for name, summary in items:
            if summary and summary.get("image") is not None:
                out.setdefault((name, False), {})[rank] = summary["image"]
        for name, diff in rec.diff_images.items():
            out.setdefault((name + DIFF, True), {})[rank] = diff
    return out


def named_images(result) -> dict[str, dict[int, np.ndarray]]:
    """{label: {rank: values}}: :func:`pictures` by label."""
    return {label: per_rank for (label, _), per_rank in pictures(result).items()}


def scales(result) -> dict[str, tuple[float, float]]:
    """The shared colour scale of each image label (differences: symmetric around 0)."""
    out = {}
    for (name, is_diff), per_rank in pictures(result).items():
        lo, hi = scale(per_rank.values())
        if is_diff:
            lo, hi = -max(abs(lo), abs(hi)), max(abs(lo), abs(hi))
        out[name] = (lo, hi)
    return out


def lines(result, rank: int, shared: dict[str, tuple[float, float]] | None = None) -> list[str]:
    """One text line per picture of a rank (what the text view says instead)."""
    shared = scales(result) if shared is None else shared
    out = []
    for name, per_rank in named_images(result).items():
        if rank in per_rank:
            rows, cols = per_rank[rank].shape[:2]
            lo, hi = shared[name]
            out.append(f"picture {name}: {rows}x{cols} values, colour scale {lo:.4g} to {hi:.4g} (shared by all ranks)")
    return out


def key(result, rank: int) -> tuple:
    """What tells two ranks' pictures apart (their names and values): ranks with equal keys
    show equal pictures, and the grouped view shows them once."""
    return tuple((name, zlib.crc32(np.ascontiguousarray(per_rank[rank]).tobytes()))
                 for name, per_rank in named_images(result).items() if rank in per_rank)


def tags(result, rank: int, shared: dict[str, tuple[float, float]] | None = None) -> str:
    """The HTML of one rank's pictures, each with its (shared) colour bar."""
    shared = scales(result) if shared is None else shared
    parts = []
    for name, per_rank in named_images(result).items():
        if rank in per_rank:
            lo, hi = shared[name]
            parts.append(f"<div class='mpinb-image' data-name='{html.escape(name)}'>{html.escape(name)}<br>"
                         f"{_img(picture(per_rank[rank], lo, hi), name)}{colour_bar(lo, hi)}</div>")
    return "".join(parts)


def pulled(name: str, array: np.ndarray) -> dict[str, str]:
    """A pulled array drawn: ``{"text/html": picture + colour bar, "text/plain": the same in
    words}``. A 1-D array is drawn as one row; of more dimensions, the first 2-D slice (said so)."""
    from ..wire.values import sample

    a = np.asarray(array)
    if a.ndim == 0 or a.size == 0 or not (a.dtype.kind in "biufc" or a.dtype.name == "bfloat16"):
        words = f"{name}: nothing to draw ({a.dtype}{list(a.shape)})"
        return {"text/plain": words, "text/html": f"<div>{html.escape(words)}</div>"}
    first = (0,) * max(0, a.ndim - 2)
    what = f"{name}[{', '.join(map(str, first))}, :, :]" if first else name
    plane = a.reshape(1, -1) if a.ndim == 1 else a[first]
    values = sample(plane)
    lo, hi = scale([values])
    magnitude = "|x| " if a.dtype.kind == "c" else ""
    words = (f"picture {what}: {values.shape[0]}x{values.shape[1]} values, {magnitude}colour scale "
             f"{lo:.4g} to {hi:.4g}")
    if values.shape != plane.shape:
        words += f" (sampled from {plane.shape[0]}x{plane.shape[1]})"
    body = (f"<div class='mpinb-pulled'><div>{html.escape(words)}</div>{_img(picture(values, lo, hi), what)}"
            f"{colour_bar(lo, hi)}</div>")
    return {"text/plain": words, "text/html": body}
