"""mpinb.wire.by_name and the one door to the engines (MPICluster.on_engines): what is sent crosses by
name, not as its code, and only what mpinb.engine.entry_points lists is sent."""

import types

import pytest
from ipyparallel.serialize import pack_apply_message, unpack_apply_message

from mpinb.cells import cell_run
from mpinb.cluster.mpi_cluster import MPICluster
from mpinb.engine.code import namespace
from mpinb.engine.execute import execute_cell
from mpinb.engine.self_account import report
from mpinb.engine.shards import local_parts
from mpinb.options.cell_options import CellOptions
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


class Engines:
    """ipyparallel's client and views as the door sees them: each apply recorded, not sent."""

    def __init__(self, ids):
        self.ids, self.applied = list(ids), []
        self.client = self

    def __getitem__(self, targets):
        return View(self, targets)


class View:
    def __init__(self, engines, targets):
        self.engines, self.targets, self.client = engines, targets, engines

    def apply_async(self, fn, *args):
        self.engines.applied.append((self.targets, fn, args))
        return "sent"


def door(ids=(0, 1)) -> tuple[MPICluster, Engines]:
    cluster, engines = MPICluster(n=len(ids)), Engines(ids)
    cluster.client, cluster.every_engine = engines, engines[list(ids)]
    return cluster, engines


def test_the_door_sends_an_entry_point_by_name_to_the_ranks_asked():
    cluster, engines = door()
    assert cluster.on_engines(execute_cell, "a = 1", ranks=[1, 0]) == "sent"
    cluster.on_engines(local_parts, "x", 8)
    cluster.on_engines(report, ranks=1)
    assert [(targets, fn.fn, args) for targets, fn, args in engines.applied] == [
        ([0, 1], execute_cell, ("a = 1",)), ([0, 1], local_parts, ("x", 8)), (1, report, ())]
    assert all(isinstance(fn, ByName) for _, fn, _ in engines.applied)


def test_the_door_refuses_a_function_not_listed():
    cluster, engines = door()
    for fn in (divmod, print, lambda: 1, namespace):
        with pytest.raises(TypeError, match="not one of the functions run on engines"):
            cluster.on_engines(fn)
    assert engines.applied == []


def test_the_cell_request_goes_through_the_door():
    """What CellRun.submit hands to the door for every cell."""
    cluster, engines = door()
    cluster.hlo = False
    run = cell_run.CellRun.__new__(cell_run.CellRun)
    run.cluster, run.targets, run.code, run.options = cluster, [0, 1], "a = 1", CellOptions()
    with pytest.raises(AttributeError, match="_children"):  # the request is all this test looks at
        run.submit()
    ((targets, fn, args),) = engines.applied
    assert targets == [0, 1] and fn.fn is execute_cell and args[0] == "a = 1"
