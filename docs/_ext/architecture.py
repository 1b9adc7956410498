"""The architecture as a picture, drawn at build time from the package's own imports.

Each room is a subpackage of ``mpinb`` or a module at its top; an arrow from one room to another
says that some module of the first imports one of the second (imports inside functions
included). Rooms stand on floors: a room is drawn above every room it imports, so arrows point
down; an import that closes a circle cannot point down and is drawn red. Nothing is imported or
run: the sources are read with ``ast``. The SVG is written to ``_generated/architecture.svg`` in
the source folder (the contributing page shows it).
"""

from __future__ import annotations

import html
import pathlib

from import_graph import room_graph

OUT = pathlib.Path("_generated") / "architecture.svg"
BOX_W, BOX_H, GAP_X, GAP_Y, MARGIN = 118, 30, 16, 56, 12


def floors(graph: dict) -> dict:
    """Room -> floor: 0 for a room that imports none; else one above the highest it imports,
    walking the imports depth first and leaving out an edge that closes a circle."""
    floor: dict = {}
    on_path: set = set()

    def walk(room):
        if room in floor:
            return floor[room]
        on_path.add(room)
        below = [walk(r) for r in sorted(graph.get(room, ())) if r not in on_path]
        on_path.discard(room)
        floor[room] = 1 + max(below) if below else 0
        return floor[room]

    for room in sorted(graph):
        walk(room)
    return floor


def svg(graph: dict, subpackages: set) -> str:
    """The picture: floors from the top down, arrows from a room to those it imports; a
    subpackage is labelled ``name/``, a module ``name.py``."""
    floor = floors(graph)
    top = max(floor.values())
    rows = [sorted(r for r in graph if floor[r] == f) for f in range(top, -1, -1)]
    width = max(len(r) for r in rows) * (BOX_W + GAP_X) + 2 * MARGIN
    height = len(rows) * (BOX_H + GAP_Y) + 2 * MARGIN
    where = {}
    for i, row in enumerate(rows):
        left = (width - len(row) * (BOX_W + GAP_X) + GAP_X) / 2
        for j, room in enumerate(row):
            where[room] = (left + j * (BOX_W + GAP_X), MARGIN + i * (BOX_H + GAP_Y))
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{height:.0f}' "
             f"viewBox='0 0 {width:.0f} {height:.0f}' font-family='sans-serif' font-size='12'>",
             "<title>mpinb's rooms and their imports</title>",
             "<defs><marker id='head' markerWidth='8' markerHeight='6' refX='8' refY='3' orient='auto'>"
             "<path d='M0,0 L8,3 L0,6 z' fill='#555'/></marker>"
             "<marker id='up' markerWidth='8' markerHeight='6' refX='8' refY='3' orient='auto'>"
             "<path d='M0,0 L8,3 L0,6 z' fill='#c62828'/></marker></defs>"]
    for room in sorted(graph):
        x1, y1 = where[room]
        for target in sorted(graph[room]):
            x2, y2 = where[target]
            down = floor[target] < floor[room]
            start = (x1 + BOX_W / 2, y1 + BOX_H if down else y1)
            end = (x2 + BOX_W / 2, y2 if down else y2 + BOX_H)
            colour, head = ("#888", "head") if down else ("#c62828", "up")
            parts.append(f"<line x1='{start[0]:.1f}' y1='{start[1]:.1f}' x2='{end[0]:.1f}' y2='{end[1]:.1f}' "
                         f"stroke='{colour}' stroke-width='1' marker-end='url(#{head})'/>")
    for room, (x, y) in sorted(where.items()):
        label = f"{room}/" if room in subpackages else f"{room}.py"
        parts.append(f"<rect x='{x:.1f}' y='{y:.1f}' width='{BOX_W}' height='{BOX_H}' rx='5' "
                     "fill='#e8f0fe' stroke='#3c6fb6'/>"
                     f"<text x='{x + BOX_W / 2:.1f}' y='{y + BOX_H / 2 + 4:.1f}' text-anchor='middle'>"
                     f"{html.escape(label)}</text>")
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def draw(srcdir: pathlib.Path) -> pathlib.Path:
    """The picture of the package beside the docs folder, written; returns its path."""
    package = srcdir.parent / "mpinb"
    subpackages = {p.parent.name for p in package.glob("*/__init__.py")}
    out = srcdir / OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(svg(room_graph(package), subpackages))
    return out


def _builder_inited(app) -> None:
    draw(pathlib.Path(app.srcdir))


def setup(app):
    app.connect("builder-inited", _builder_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
