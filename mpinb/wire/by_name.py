"""A module function sent to the engines by its name rather than by its code.

ipyparallel cans a plain function it is asked to apply as its code object, and rebuilds it on
every engine, with every request: for ``execute_cell`` that is 2.6 KB per engine per cell, about
20 us to pack in the notebook and as much to rebuild on each engine. Any other object it
pickles; a ``ByName`` pickles as the function's module and name (pickle's own reference to a
module function), which the engine looks up in the module it has already imported."""

from __future__ import annotations


class ByName:
    """Call ``fn`` (a module-level function, importable on the engines) by reference."""

    __slots__ = ("__name__", "fn")

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = fn.__name__  # what ipyparallel names the request after

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __reduce__(self):
        return ByName, (self.fn,)

    def __repr__(self) -> str:
        return f"ByName({self.fn.__module__}.{self.fn.__qualname__})"
