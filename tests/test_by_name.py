"""mpinb.wire.by_name: the cell's function crosses to the engines by name, not as its code."""

import types

import pytest
from ipyparallel.serialize import pack_apply_message, unpack_apply_message

from mpinb.cell_options import CellOptions
from mpinb.client import cell_run
from mpinb.engine.execute import execute_cell
from mpinb.wire.by_name import ByName


def test_a_function_goes_by_name_and_arrives_as_itself():
    """ipyparallel sends a plain function's code with every request; ByName sends the module
    and name, and the engine calls the very function with the arguments."""
    plain = pack_apply_message(execute_cell, ("a = 1",), {})
    named = pack_apply_message(ByName(execute_cell), ("a = 1",), {})
    assert len(named[0]) < 200 and len(plain[0]) > 1000, (len(named[0]), len(plain[0]))
    fn, args, _ = unpack_apply_message(named, {})
    assert fn.fn is execute_cell and fn.__name__ == "execute_cell" and args == ("a = 1",)
    assert ByName(divmod)(7, 2) == (3, 1)


def test_what_only_its_code_could_carry_is_refused():
    def nested():
        return 1

    main_fn = types.FunctionType(nested.__code__, {"__name__": "__main__"}, "in_main")
    for fn in (lambda: 1, nested, main_fn):
        with pytest.raises(TypeError, match="not a function of an importable module"):
            ByName(fn)


def test_the_cell_request_carries_its_function_by_name():
    """What CellRun.submit hands to ipyparallel's apply for every cell."""
    applied = []

    class View:
        def apply_async(self, fn, *args):
            applied.append((fn, args))
            raise RuntimeError("stop here")  # the request is all this test looks at

    class Cluster:
        n, hlo = 2, False

        def rank_view(self, targets):
            return View()

    run = cell_run.CellRun.__new__(cell_run.CellRun)
    run.cluster, run.targets, run.code, run.options = Cluster(), [0, 1], "a = 1", CellOptions()
    with pytest.raises(RuntimeError, match="stop here"):
        run.submit()
    ((fn, args),) = applied
    assert isinstance(fn, ByName) and fn.fn is execute_cell and args[0] == "a = 1"
