"""A module function sent to the engines by its name rather than by its code.

ipyparallel cans a plain function it is asked to apply as its code object, and rebuilds it on
every engine, with every request: for ``execute_cell`` that is 2.6 KB per engine per cell, about
20 us to pack in the notebook and as much to rebuild on each engine. Any other object it
pickles; a ``ByName`` pickles as the function's module and name (pickle's own reference to a
module function), which the engine looks up in its own copy of that module: the engines must
have the same mpinb installed (as they must anyway)."""

from __future__ import annotations

import sys


class ByName:
    """Call ``fn`` (a function of an importable module, found there under its own name) by
    reference; TypeError for anything else (a lambda, a nested function, one of ``__main__``),
    which only its code could carry to the engines."""

    __slots__ = ("__name__", "fn")

    def __init__(self, fn):
        module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
        if module in (None, "__main__") or getattr(sys.modules.get(module), name or "", None) is not fn:
            raise TypeError(f"ByName: {fn!r} is not a function of an importable module under its own name")
        self.fn = fn
        self.__name__ = fn.__name__  # what ipyparallel names the request after

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __reduce__(self):
        return ByName, (self.fn,)

    def __repr__(self) -> str:
        return f"ByName({self.fn.__module__}.{self.fn.__qualname__})"
