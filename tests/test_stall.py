"""Where a running cell is, read from a stack (mpinb.engine.stall), on stacks made here: cells
compiled under the engines' cell file names, a function of an earlier cell, a jitted call."""

import linecache
import sys
import time

import jax
import jax.numpy as jnp
import pytest

from mpinb.engine import hlo_capture, settle, stall
from mpinb.engine.state import STATE
from mpinb.wire.cell_names import cell_filename


def run_as_cell(number: int, label: str, code: str, ns: dict) -> None:
    filename = cell_filename(number)
    STATE.cell_labels[filename] = label
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    exec(compile(code, filename, "exec"), ns)  # noqa: S102 - the test's own code


def test_the_running_cell_and_a_function_of_an_earlier_cell():
    ns = {"sys": sys}
    run_as_cell(901, "In[3]", "def inner():\n    x = 1\n    return sys._getframe()\n", ns)
    run_as_cell(902, "In[7]", "y = 0\nframe = inner()\n", ns)
    where = stall.where(ns["frame"])
    assert where["cell"] == "In[7]" and where["line"] == 2  # the running cell, not In[3]
    assert (where["function"], where["file"], where["file_is_cell"], where["file_line"]) == ("inner", "In[3]", True, 3)
    assert "call" not in where


def test_a_jitted_call_on_the_line_is_named_with_the_collectives_of_its_module():
    def stepper(v):
        return v + 1

    hlo_capture.MODULE_COLLECTIVES[hlo_capture.module_key("jit_stepper")] = [("all-reduce", 2)]
    ns = {"sys": sys, "step": jax.jit(stepper), "jnp": jnp}
    run_as_cell(903, "In[9]", "here = sys._getframe(); r = step(jnp.ones(2))\n", ns)
    where = stall.where(ns["here"])
    assert where == {"cell": "In[9]", "line": 1, "call": "stepper", "collectives": [("all-reduce", 2)]}


def test_module_names_match_as_xla_spells_them():
    key = hlo_capture.module_key
    assert key("jit_<lambda>") == key("module_0004.jit__lambda") == key("jit__lambda") == "jit_lambda"


def test_no_cell_on_the_stack_is_nowhere():
    assert stall.where(sys._getframe()) is None


def test_a_cell_whose_queued_work_is_awaited_is_its_cell_without_a_line():
    """After the cell's code returned, while the work its jitted calls queued still runs
    (mpinb.engine.settle), the status thread says so instead of "nowhere"."""
    STATE.settling = "In[8]"
    try:
        assert stall.where_now() == {"cell": "In[8]", "settling": True}
    finally:
        STATE.settling = None
    assert stall.where_now() is None  # no cell runs on this thread


def test_the_end_of_a_cell_waits_for_the_work_it_queued():
    """XLA's CPU client runs a process's computations in the order they were dispatched: the
    fence dispatched last (mpinb.engine.settle) is done only once a long computation queued
    before it has run, and JAX had returned from that computation before XLA ran it. The
    computation's result may say it is ready a moment after the fence does (in XLA's CPU client
    both wait on the computation's end, and the fence's wait can be woken first; seen once with a
    busy core). It must say so within a quarter of the computation's own time: without the
    fence's order, all of that time would still be ahead of it."""
    slow = jax.jit(lambda x: jax.lax.fori_loop(0, 2000, lambda i, a: jnp.tanh(a @ a), x))
    x = jnp.full((300, 300), 1e-3, jnp.float32)
    slow(x).block_until_ready()  # compiled, as the fence is below
    started = time.perf_counter()
    slow(x).block_until_ready()
    alone = time.perf_counter() - started
    settle.dispatched_work("In[4]")
    y = slow(x)
    assert not y.is_ready()  # queued: the cell's code could return now
    settle.dispatched_work("In[4]")
    fenced = time.perf_counter()
    y.block_until_ready()
    assert time.perf_counter() - fenced < alone / 4 and STATE.settling is None


def test_the_stop_button_ends_the_wait_only_once_the_queued_work_has_run(monkeypatch):
    """A KeyboardInterrupt (the stop button) while the cell's queued work still runs is held:
    the rank stays visible as running (it may wait in a collective that can be freed there)
    and the interrupt is raised once that work is done."""
    slow = jax.jit(lambda x: jax.lax.fori_loop(0, 600, lambda i, a: jnp.tanh(a @ a), x))
    x = jnp.full((300, 300), 1e-3, jnp.float32)
    slow(x).block_until_ready()
    settle.dispatched_work("In[5]")
    real_wait, pressed = settle._wait, []

    def stop_once(dones, until=None):
        if not pressed:
            pressed.append(STATE.settling)
            raise KeyboardInterrupt  # as SIGINT raises it in the wait's sleep
        return real_wait(dones, until)

    monkeypatch.setattr(settle, "_wait", stop_once)
    y = slow(x)
    with pytest.raises(KeyboardInterrupt):
        settle.dispatched_work("In[5]")
    assert pressed == ["In[5]"] and y.is_ready() and STATE.settling is None
