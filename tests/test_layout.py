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
    assert "mpinb.client.cluster" in graph["mpinb"]  # inside mpinb.__getattr__
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
    assert {"cell_options", "engine", "mpi", "view", "wire"} <= set(graph)
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
