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


#: ipyparallel's ways of running something on engines; only the door may call them
ENGINE_CALLS = {"apply", "apply_async", "apply_sync", "map_async", "map_sync", "execute", "push"}
#: the one door: module and function that may call them
DOOR = ("mpinb.client.cluster", "on_engines")
#: calls that send a function to the engines, and which positional argument is that function
SENDERS = {"on_engines": 0, "ask_every_engine": 2}


def calls_in_functions(tree: ast.AST):
    """(the name of the innermost enclosing function or None, the call) for every call of a module."""

    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Call):
                yield function, child
            yield from visit(child, inner)

    yield from visit(tree, None)


def test_only_the_door_runs_anything_on_the_engines():
    """Nothing but MPICluster.on_engines calls ipyparallel's apply (or its other ways of running code)."""
    found = []
    for name, path in module_files().items():
        for function, call in calls_in_functions(ast.parse(path.read_text(), str(path))):
            if isinstance(call.func, ast.Attribute) and call.func.attr in ENGINE_CALLS and (name, function) != DOOR:
                found.append(f"{name}.{function}: .{call.func.attr}(), line {call.lineno}")
    assert found == []


def test_the_door_is_seen_calling_apply():
    """The check above can fail: it finds the door's own call."""
    path = module_files()[DOOR[0]]
    calls = calls_in_functions(ast.parse(path.read_text()))
    assert any(function == DOOR[1] and isinstance(call.func, ast.Attribute) and call.func.attr == "apply_async"
               for function, call in calls)


def imported_names(tree: ast.AST, name: str, path: pathlib.Path) -> dict[str, str]:
    """Local name -> dotted name of what ``from X import y`` brings into a module (anywhere in it)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            source = ".".join(base + ([node.module] if node.module else []))
            out.update({alias.asname or alias.name: f"{source}.{alias.name}" for alias in node.names})
    return out


def sent_functions() -> set[str]:
    """The dotted names of the functions the package hands to a sender (SENDERS); a sender that
    passes on a function it was given is followed to its callers instead."""
    sent = set()
    for name, path in module_files().items():
        tree = ast.parse(path.read_text(), str(path))
        imports = imported_names(tree, name, path)
        for function, call in calls_in_functions(tree):
            called = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
            if called not in SENDERS or (name, function) == DOOR:
                continue
            argument = call.args[SENDERS[called]]
            assert isinstance(argument, ast.Name), f"{name}.{function}: a sender given {ast.dump(argument)}"
            if argument.id in imports:
                sent.add(imports[argument.id])
            else:
                assert function in SENDERS, f"{name}.{function} sends {argument.id}, not an engine function"
    return sent


def test_the_entry_points_are_exactly_the_functions_sent():
    from mpinb.engine.entry_points import ENTRY_POINTS

    listed = {f"{fn.__module__}.{fn.__qualname__}" for fn in ENTRY_POINTS}
    assert len(listed) == len(ENTRY_POINTS)
    assert sent_functions() == listed
