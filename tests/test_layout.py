"""The arrangement of the package, read from its source (pure: nothing is run).

What the contributing page of the docs promises a newcomer: no import circle between
mpinb's modules (imports inside functions included: a lazy import that goes back up the data's
path is still a tangle), no module over about 450 lines, no function over about 60 lines of code.
"""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "mpinb"
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60  # code lines, the docstring not counted


def module_files() -> dict[str, pathlib.Path]:
    """Dotted module name -> source file, for every .py file of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imported_modules(name: str, path: pathlib.Path, known: dict) -> set[str]:
    """The mpinb modules a module imports anywhere in its body (top level and inside functions).
    ``from X import y`` counts as importing X.y when that is a module, else X."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
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
                if sub in known or _names_a_submodule(source, alias.name, known):
                    found.add(sub)  # a module (mpinb._ffi, compiled, imports nothing of ours)
                else:
                    found.add(source)
    return {m for m in found if m.startswith("mpinb") and m != name}


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


def import_graph() -> dict[str, set[str]]:
    known = module_files()
    return {name: imported_modules(name, path, known) & set(known) for name, path in known.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: Tarjan's components of more than one module (or a module importing itself)."""
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


def test_the_circle_finder_finds_a_circle():
    """The check below can fail: a made-up graph with a circle through three modules."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_lazy_and_relative_imports():
    graph = import_graph()
    assert "mpinb.client.cluster" in graph["mpinb"]  # inside mpinb.__getattr__
    assert "mpinb.engine.code" in graph["mpinb.engine.execute"]  # from .code import ...
    assert "mpinb.mpi_ops" in graph["mpinb.mpi.primitives"]


def test_no_import_circle_between_mpinb_modules():
    graph = import_graph()
    circles = strongly_connected(graph)
    detail = ["; ".join(f"{m} -> {sorted(graph[m] & set(c))}" for m in c) for c in circles]
    assert circles == [], detail


def test_no_module_is_over_about_450_lines():
    sizes = {name: len(path.read_text().splitlines()) for name, path in module_files().items()}
    assert len(sizes) > 20
    assert {n: s for n, s in sizes.items() if s > MAX_MODULE_LINES} == {}


def code_lines(func: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the def to the end, less the docstring's."""
    lines = func.end_lineno - func.lineno + 1
    body = func.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        lines -= body[0].end_lineno - body[0].lineno + 1
    return lines


def test_no_function_is_over_about_60_lines():
    long = {}
    for name, path in module_files().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and code_lines(node) > MAX_FUNCTION_LINES:
                long[f"{name}.{node.name}"] = code_lines(node)
    assert long == {}
