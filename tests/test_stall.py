"""Where a running cell is, read from a stack (mpinb.engine.stall), on stacks made here: cells
compiled under the engines' cell file names, a function of an earlier cell, a jitted call."""

import linecache
import sys

import jax
import jax.numpy as jnp

from mpinb.engine import hlo_capture, stall
from mpinb.engine.state import STATE
from mpinb.wire.cells import cell_filename


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

    hlo_capture.MODULE_COLLECTIVES[hlo_capture.module_key("jit_stepper")] = ["all-reduce over 2 devices"]
    ns = {"sys": sys, "step": jax.jit(stepper), "jnp": jnp}
    run_as_cell(903, "In[9]", "here = sys._getframe(); r = step(jnp.ones(2))\n", ns)
    where = stall.where(ns["here"])
    assert where == {"cell": "In[9]", "line": 1, "call": "stepper", "collectives": ["all-reduce over 2 devices"]}


def test_module_names_match_as_xla_spells_them():
    key = hlo_capture.module_key
    assert key("jit_<lambda>") == key("module_0004.jit__lambda") == key("jit__lambda") == "jit_lambda"


def test_no_cell_on_the_stack_is_nowhere():
    assert stall.where(sys._getframe()) is None
