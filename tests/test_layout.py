"""The arrangement of the package, read from its source (pure: nothing is run).

What the contributing page of the docs promises a newcomer: no import circle between
mpinb's modules (imports inside functions included: a lazy import that goes back up the data's
path is still a tangle), no module over about 450 lines, no function over about 60 lines of code.
"""

from __future__ import annotations

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "mpinb"
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60  # code lines, the docstring not counted
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import import_graph  # noqa: E402 - docs/_ext is not a package; the architecture picture reads the same graph


def module_files() -> dict[str, pathlib.Path]:
    return import_graph.module_files(PACKAGE)


def test_the_circle_finder_finds_a_circle():
    """The check below can fail: a made-up graph with a circle through three modules."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_graph.circles(graph) == [["a", "b", "c"]]
    assert import_graph.circles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_lazy_and_relative_imports():
    graph = import_graph.module_graph(PACKAGE)
    assert "mpinb.cluster.mpi_cluster" in graph["mpinb"]  # inside mpinb.__getattr__
    assert "mpinb.engine.code" in graph["mpinb.engine.execute"]  # from .code import ...
    assert "mpinb.mpi_ops" in graph["mpinb.mpi.primitives"]


def test_no_import_circle_between_mpinb_modules():
    graph = import_graph.module_graph(PACKAGE)
    circles = import_graph.circles(graph)
    detail = ["; ".join(f"{m} -> {sorted(graph[m] & set(c))}" for m in c) for c in circles]
    assert circles == [], detail


def test_no_import_runs_back_up_between_rooms():
    """Rooms (a subpackage, or a module at the top) stand on floors only if no two of them import
    each other, directly or round a circle: an arrow back up a floor is such a circle."""
    graph = import_graph.room_graph(PACKAGE)
    assert {"options", "variant", "engine", "mpi", "view", "wire"} <= set(graph)
    circles = import_graph.circles(graph)
    detail = ["; ".join(f"{r} -> {sorted(graph[r] & set(c))}" for r in c) for c in circles]
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
DOOR = ("mpinb.cluster.mpi_cluster", "on_engines")
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
