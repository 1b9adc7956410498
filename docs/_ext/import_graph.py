"""How mpinb's modules import each other, read from the sources with ``ast`` (nothing is
imported or run). Imports inside functions count: a lazy import that runs back up the data's
path is a tangle all the same.

One reading for two readers: the architecture picture of the docs (``architecture.py``, rooms
and floors) and tests/test_layout.py (no circle between modules, none between rooms).
"""

from __future__ import annotations

import ast
import pathlib


def module_files(package: pathlib.Path) -> dict[str, pathlib.Path]:
    """Dotted module name -> source file, for every .py file of the package."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imported_modules(name: str, path: pathlib.Path, known: dict) -> set[str]:
    """The package's modules that one module imports anywhere in its body. ``from X import y``
    counts as importing X.y when that is a module (compiled ones included), else X."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    top = name.split(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                found.add(sub if sub in known or _names_a_submodule(source, alias.name, known) else source)
    return {m for m in found if m.split(".")[0] == top and m != name}


def _names_a_submodule(package: str, name: str, known: dict) -> bool:
    """``from package import name`` where the package's __init__ does not define name."""
    path = known.get(package)
    if path is None or path.name != "__init__.py":
        return False
    tree = ast.parse(path.read_text())
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
    return name not in defined


def module_graph(package: pathlib.Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    known = module_files(package)
    return {name: imported_modules(name, path, known) & set(known) for name, path in known.items()}


def room_of(module: str) -> str:
    """The room of a dotted module name: a subpackage or a module at the top
    (``mpinb.view.html`` -> ``view``, ``mpinb.magic`` -> ``magic``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def room_graph(package: pathlib.Path) -> dict[str, set[str]]:
    """Room -> the rooms it imports. The package's own __init__ and __main__ are left out: they
    only gather names and start the command."""
    top = package.name
    graph: dict[str, set[str]] = {}
    for name, targets in module_graph(package).items():
        if name in (top, f"{top}.__main__"):
            continue
        room = room_of(name)
        graph.setdefault(room, set()).update(room_of(m) for m in targets if m != top)
    for room in graph:
        graph[room].discard(room)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one node (or a node that imports itself),
    found with Tarjan's algorithm: every import circle of the graph."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out
