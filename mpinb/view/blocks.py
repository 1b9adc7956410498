"""The picture of which rank holds which block of a JAX array spread over several devices (what
``jax.debug.visualize_array_sharding`` draws on one process), as text lines that the text and HTML
views both show: a grid of row bands by column bands for 1-D and 2-D arrays, a list
of blocks for more dimensions. Drawn from the ``blocks`` of a value's summary
(mpinb.wire.values.blocks_of), which every rank knows whole.
"""

from __future__ import annotations

from ..wire.values import block_text
from .rank_words import label

#: at most this many row bands, column bands, or listed blocks are drawn
MAX_BANDS = 16


def holders(blocks: list) -> dict[tuple, list[int]]:
    """{bounds: [process, ...]} from [(process, bounds)]."""
    out: dict[tuple, list[int]] = {}
    for process, bounds in blocks:
        out.setdefault(tuple(map(tuple, bounds)), []).append(process)
    return out


def picture(name: str, summary: dict) -> list[str]:
    """``name``'s blocks, e.g. for rows spread over two ranks::

        y: f32[8,4] in 2 blocks over ranks 0-1
                   cols 0:4
          rows 0:4  rank 0
          rows 4:8  rank 1
    """
    blocks, shape = summary.get("blocks"), tuple(summary.get("shape", ()))
    if not blocks or not shape:
        return []
    array = f"{name}: {summary.get('dtype', '')}[{','.join(map(str, shape))}]"
    if isinstance(blocks, int):  # more devices than mpinb.wire.values.MAX_BLOCKS
        return [f"{array} on {blocks} devices (too many blocks to draw)"]
    held = holders(blocks)
    head = f"{array} in {len(held)} block{'s' * (len(held) != 1)} over {label(p for p, _ in blocks)}"
    if len(shape) <= 2 and len({b[0] for b in held}) <= MAX_BANDS and len({b[-1] for b in held}) <= MAX_BANDS:
        return [head, *_grid(held, shape)]
    width = max(len(block_text(b, shape)) for b in held)
    lines = [f"  {block_text(b, shape):<{width}}  {label(ps)}" for b, ps in sorted(held.items())]
    more = len(lines) - MAX_BANDS
    return [head, *lines[:MAX_BANDS], *([f"  ... {more} more blocks"] if more > 0 else [])]


def _grid(held: dict, shape: tuple) -> list[str]:
    """Row bands (the first axis; one band for a 1-D array) by column bands, each cell the
    ranks holding that block."""
    rows = sorted({b[0] for b in held}) if len(shape) == 2 else [None]
    cols = sorted({b[-1] for b in held})
    row_names = [f"rows {a}:{b}" for a, b in rows] if rows != [None] else [""]
    col_names = [f"cols {a}:{b}" if len(shape) == 2 else f"[{a}:{b}]" for a, b in cols]
    keys = [[(c,) if r is None else (r, c) for c in cols] for r in rows]
    cells = [[label(held[k]) if k in held else "-" for k in row] for row in keys]
    widths = [max(len(col_names[j]), *(len(row[j]) for row in cells)) for j in range(len(cols))]
    left = max(len(n) for n in row_names)
    lines = ["  " + " " * left + "  " + "  ".join(n.ljust(w) for n, w in zip(col_names, widths, strict=True))]
    for name, row in zip(row_names, cells, strict=True):
        lines.append("  " + name.ljust(left) + "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    return [line.rstrip() for line in lines]
