"""%%mpijax driven through a real IPython shell and a real 2-rank MPI engine cluster."""

import contextlib
import io
import os
import re
import time
from unittest import mock

import numpy as np
import psutil
import pytest
from IPython.core.error import UsageError
from support.shell import ipython_shell

from mpinb import MPICluster
from mpinb.errors import CellFailed
from mpinb.view.compare_words import comparison_detail
from mpinb.view.hint_words import hint_words

SEED = """
import jax, jax.numpy as jnp, numpy as np
from mpi4py import MPI
from mpinb import mpi
rank, size = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()

def transpose(block):
    n, cols = block.shape
    pieces = block.reshape(n, size, cols // size).transpose(1, 0, 2)
    return mpi.alltoall(pieces).reshape(size * n, cols // size).T

A = np.arange(4 * size * 6 * size, dtype=np.float32).reshape(4 * size, 6 * size)
block = A[rank * 4:(rank + 1) * 4]
t = jax.jit(transpose)(block)
ok = bool((np.asarray(t) == A.T[rank * 6:(rank + 1) * 6]).all())
print("rank", rank, "ok", ok)
"""


@pytest.fixture(scope="module")
def ip():
    """A 2-rank cluster with the seed's names (A, block, transpose, t, size) defined on every
    rank, so that each test runs alone and in any order."""
    shell = ipython_shell()
    shell.run_line_magic("load_ext", "mpinb")
    shell.run_line_magic("mpijax", "start -n 2 --no-standby")  # tests here patch MPICluster: no standby thread beside
    with contextlib.redirect_stdout(io.StringIO()):
        shell.run_cell_magic("mpijax", "", SEED)
    assert shell.user_ns["_mpijax"].ok, shell.user_ns["_mpijax"].text()
    yield shell
    shell.run_line_magic("mpijax", "stop")


def cluster_of(ip):
    return ip.magics_manager.registry["MpiJaxMagics"].cluster


def cell(ip, line, code):
    ip.run_cell_magic("mpijax", line, code)
    return ip.user_ns["_mpijax"]


def test_seed_transpose_compare_groups_the_ranks_and_shows_no_layout_error(ip, capsys):
    res = cell(ip, "--compare --show ok", SEED)
    out = capsys.readouterr().out
    assert res.ok and res.ranks == [0, 1]
    summary = r"^2 ranks, [0-9.]+ s, \d+ layout findings?: \d+ relayout \(info\), jit == eager: t$"
    assert re.search(summary, out, re.M), out
    assert "[ranks 0-1]" in out and "rank ⟨0-1⟩ ok True" in out  # differ only by the rank's number
    assert "rank 0 ok True" in out and "rank 1 ok True" in out  # as each rank printed it, live
    assert not [w for w in res.warnings if w.kind in ("non-row-major", "unconstrained")]
    assert {w.kind for w in res.warnings} <= {"relayout"}
    assert all(c.status == "equal" for c in res.comparisons)


def test_unconstrained_custom_call_shows_warning_2(ip, capsys):
    res = cell(ip, "", "from mpinb.mpi import teaching\nu = jax.jit(lambda b: teaching.alltoall_unconstrained("
                       "b.reshape(4, size, -1).transpose(1, 0, 2)))(block)")
    assert [w.rank for w in res.warnings if w.kind == "unconstrained"] == [0, 1]
    assert "warning [unconstrained] ranks 0-1: a custom call without layout constraints" in capsys.readouterr().out


def test_python_state_makes_jit_differ_from_eager(ip, capsys):
    """A jitted function that reads Python state keeps the value seen at trace time."""
    code = ("state = {'scale': 1.0}\n"
            "g = jax.jit(lambda x: x * state['scale'])\n"
            "g(jnp.ones(3))\n"
            "state['scale'] = 2.0 + rank\n"
            "r = g(jnp.ones(3))\n")
    res = cell(ip, "--compare", code)
    out = capsys.readouterr().out
    assert res.ok
    assert "jit != eager" in res.summary()
    for rank in (0, 1):
        diff = next(c for c in res.records[rank].comparisons if c.name == "r")
        assert diff.status == "different"
        assert diff.max_abs == 1.0 + rank and diff.first_index == (0,)
    assert "compare: r: jit != eager, max abs diff 2" in out


def test_seed_bug_reproduction_jit_wrong_eager_right(ip):
    code = ("from mpinb.mpi import teaching\n"
            "def bad(b):\n"
            "    n, cols = b.shape\n"
            "    return teaching.alltoall_follow_producer(b.reshape(n, size, cols // size).transpose(1, 0, 2))"
            ".reshape(size * n, cols // size).T\n"
            "z = jax.jit(bad)(block)\n")
    res = cell(ip, "--compare", code)
    assert "jit != eager" in res.summary()
    z = [c for c in res.comparisons if c.name == "z"]
    assert len(z) == 2 and all(c.status == "different" and c.max_abs > 0 for c in z)
    assert sorted(w.rank for w in res.warnings if w.kind == "non-row-major") == [0, 1]


def test_tracebacks_read_like_ipython(ip, capsys):
    """``Cell In[N], line L`` with the notebook's count and line numbers (the %%mpijax line is
    line 1), context with an arrow, no JAX internals; identical on both ranks: shown once."""
    code = "import jax, jax.numpy as jnp\n@jax.jit\ndef f(v):\n    return v.reshape(7)\nf(jnp.ones(3))"
    with pytest.raises(CellFailed):
        ip.run_cell_magic("mpijax", "--no-hlo", code)
    out = capsys.readouterr().out
    tb = ip.user_ns["_mpijax"].records[0].error.traceback
    n = ip.execution_count
    assert tb.startswith("TypeError") and f"Cell In[{n}], line 6\n" in tb and f"Cell In[{n}], line 5, in f\n" in tb
    assert "----> 5       return v.reshape(7)" in tb and "----> 6   f(jnp.ones(3))" in tb
    assert "site-packages" not in tb and "mpinb/engine.py" not in tb, tb
    view = out[out.index("2 ranks, "):]  # after the live [error:N] lines
    assert "[ranks 0-1]" in view and view.count("cannot reshape array") == 1  # said once: the traceback ends above it


def test_traceback_names_functions_and_hides_mpinb_s_frames(ip):
    """A lambda on the cell's line is named (not the same frame twice); mpinb's own frames are
    left out like JAX's, and MPINB_TRACEBACK=full on the engines brings every frame back."""
    code = "bad = jax.jit(lambda v: mpi.alltoall(v))(jnp.ones((size + 1, 2)))"
    ip.run_cell_magic("mpijax", "--no-hlo --no-raise", code)
    n = ip.execution_count
    tb = ip.user_ns["_mpijax"].records[0].error.traceback
    assert f"Cell In[{n}], line 2\n" in tb and f"Cell In[{n}], line 2, in <lambda>\n" in tb, tb
    assert "mpinb" not in tb.replace("mpi.alltoall", ""), tb
    ip.run_cell_magic("mpijax", "--no-hlo --no-raise", "import os\nos.environ['MPINB_TRACEBACK'] = 'full'\n" + code)
    full = ip.user_ns["_mpijax"].records[0].error.traceback
    ip.run_cell_magic("mpijax", "--no-hlo", "del os.environ['MPINB_TRACEBACK']")
    assert "mpinb/mpi/collectives.py" in full and "in alltoall" in full, full


def test_an_error_jax_raised_while_transforming_shows_the_user_frames_once(ip):
    """An error in a backward pass: JAX chains "the preceding stack trace is the source of the
    JAX operation" (the forward frames, again) as its cause; the view folds that into one line
    naming the operation's line, and the traceback is said once."""
    code = ("@jax.custom_vjp\ndef h(v):\n    return v\n"
            "h.defvjp(lambda v: (v, None), lambda res, g: 1 / 0)\n"
            "def loss(v):\n    return h(v).sum()\n"
            "grads = jax.grad(loss)(jnp.ones(3))")
    ip.run_cell_magic("mpijax", "--no-hlo --no-raise", code)
    n = ip.execution_count
    tb = ip.user_ns["_mpijax"].records[0].error.traceback
    assert "preceding stack trace" not in tb and "JaxStackTraceBeforeTransformation" not in tb, tb
    assert tb.count("Traceback (most recent call last)") == 1, tb
    assert (f"(JAX raised it while transforming the operation of Cell In[{n}], line 7, in loss; "
            "MPINB_TRACEBACK=full shows JAX's trace)") in tb, tb
    assert tb.rstrip().endswith("ZeroDivisionError: division by zero"), tb


def test_a_failed_cell_ends_in_one_line_under_the_view(ip, capsys):
    """No wall of mpinb's own frames after the view: IPython shows CellFailed's one line, and the
    whole result stays in _mpijax (Run All still stops: run_cell reports the error)."""
    result = ip.run_cell("%%mpijax --no-hlo\nif rank == 1:\n    raise ValueError('bad rank 1')", store_history=True)
    out = capsys.readouterr().out
    assert isinstance(result.error_in_exec, CellFailed)
    tail = out[out.rindex("bad rank 1"):].strip().splitlines()  # after the view's last mention
    assert tail[-1] == "CellFailed: rank 1 failed (see the view above; the whole result is in _mpijax)", out
    assert "magic.py" not in out and "run_cell_magic" not in out
    assert ip.user_ns["_mpijax"].records[1].error.ename == "ValueError"


def test_traceback_names_the_cell_by_its_prompt_number(ip):
    """Run as a notebook runs it (run_cell, which counts execution_count up before the cell runs
    in IPython 9): the traceback names the cell with the prompt the notebook shows for it."""
    prompt = ip.execution_count
    ip.run_cell("%%mpijax --no-hlo --no-raise\nx = 1\nraise ValueError('bad')", store_history=True)
    assert ip.execution_count == prompt + 1
    tb = ip.user_ns["_mpijax"].records[0].error.traceback
    assert f"Cell In[{prompt}], line 3\n" in tb, tb
    ip.run_cell("%%mpijax --no-hlo --no-raise\nraise ValueError('again')", store_history=True)
    assert f"Cell In[{prompt + 1}], line 2\n" in ip.user_ns["_mpijax"].records[0].error.traceback


def test_traceback_lines_count_blank_lines_and_syntax_errors(ip):
    """IPython drops a cell's leading blank lines before running it; the line numbers still
    count them. A syntax error names the cell and line too."""
    n = ip.execution_count
    ip.run_cell_magic("mpijax", "--no-hlo --no-raise", "\n\nx = 1\nraise ValueError('bad')")
    assert f"Cell In[{n}], line 5\n" in ip.user_ns["_mpijax"].records[0].error.traceback
    ip.run_cell_magic("mpijax", "--no-hlo --no-raise", "x = 1\ny = (2\n")
    tb = ip.user_ns["_mpijax"].records[1].error.traceback
    assert f"Cell In[{n}], line 3\n    y = (2\n" in tb and tb.endswith("SyntaxError: '(' was never closed"), tb


def test_error_on_one_rank_and_rank_selection(ip, capsys):
    with pytest.raises(CellFailed, match="1 of 1 ranks did not finish the cell: rank 1: ValueError: bad rank 1"):
        ip.run_cell_magic("mpijax", "--ranks 1", "raise ValueError(f'bad rank {rank}')")
    res = ip.user_ns["_mpijax"]
    out = capsys.readouterr().out
    assert res.ranks == [1] and res.states == {1: "failed"}
    assert "error: ValueError: bad rank 1" in out and "[rank 0]" not in out


def test_show_summaries_and_result(ip):
    res = cell(ip, "--show block", "block.sum()")
    rec = res.records[0]
    assert rec.show["block"]["shape"] == (4, 12) and rec.result["kind"] == "array"


def test_timeout_reports_running_ranks(ip):
    res = cell(ip, "--timeout 1 --ranks 0 --no-hlo --no-raise", "import time; time.sleep(3)")
    assert res.timed_out and res.states == {0: "running"}
    with pytest.raises(UsageError, match=r"rank 0 still runs an earlier cell"):
        cell(ip, "--ranks 0", "1")
    assert cluster_of(ip).wait_idle(timeout=120)  # the sleep ends; the next cell may run
    assert cell(ip, "--ranks 0 --no-hlo", "2").ok


def test_usage_errors(ip):
    with pytest.raises(UsageError, match="out of range"):
        ip.run_cell_magic("mpijax", "--ranks 7", "1")
    with pytest.raises(UsageError, match="not a number of seconds"):
        ip.run_cell_magic("mpijax", "--timeout soon", "1")
    with pytest.raises(UsageError, match="already running"):
        ip.run_line_magic("mpijax", "start -n 2")
    with pytest.raises(UsageError, match="invalid choice"):
        ip.run_line_magic("mpijax", "launch")
    with pytest.raises(UsageError, match="must be 0 \\(all\\) or more"):
        ip.run_cell_magic("mpijax", "--max-lines -1", "1")


def test_restart_says_what_was_lost_and_what_came_back():
    from mpinb.view.words import restart_words

    assert restart_words(4, 9.23, 0, True) == (
        "4 MPI engines restarted in 9.2 s; the engines' variables are gone (there are no --setup cells to replay)")
    assert restart_words(2, 8.0, 2, True).endswith("the engines' variables are gone, 2 --setup cells replayed")
    assert restart_words(2, 8.0, 1, False).endswith("; 1 --setup cell not replayed (--no-replay)")


def test_status_table_words_rank_lists_as_the_view_does():
    """One rank still in a cell reads "rank 0", not a bare "0" that reads as "none"."""
    from mpinb.view.tables import StatusTable

    text = StatusTable({"engines": [0, 1, 2, 3], "blocked_ranks": [0], "pids": [11, 12]}).text()
    assert re.search(r"^ranks still in a cell +rank 0$", text, re.M)
    assert re.search(r"^engines +ranks 0-3$", text, re.M)
    assert re.search(r"^engine PIDs \(their hosts\) +11, 12$", text, re.M)
    assert re.search(r"^ranks still in a cell +none$", StatusTable({"blocked_ranks": []}).text(), re.M)


def test_status_and_hlo_view(ip, capsys):
    status = ip.run_line_magic("mpijax", "status")
    assert status["running"] and status["engines"] == [0, 1] and status["hlo_capture"]
    assert status["launcher"] == "local"
    table = status._repr_mimebundle_()
    assert "<table class='mpinb-status'>" in table["text/html"]
    assert "<th style='text-align:left'>engines</th>" in table["text/html"]
    assert re.search(r"^engines +ranks 0-1$", table["text/plain"], re.M)
    assert re.search(r"^ranks +2$", table["text/plain"], re.M)
    pids = ", ".join(map(str, status["pids"]))
    assert re.search(rf"^engine PIDs \(their hosts\) +{pids}$", table["text/plain"], re.M)  # not as ranges
    ip.run_line_magic("mpijax", "hlo transpose(block)")
    out = capsys.readouterr().out
    assert "[ranks 0-1]" in out and "[rank 0]" not in out  # the same module on both ranks: shown once
    assert out.count("ENTRY") == 1
    assert 'custom_call_target="mpinb_alltoall"' in out


def test_hlo_analysis_costs_nothing_when_nothing_compiles(ip):
    cell(ip, "", "w = t + 1")  # compiles the add once
    res = cell(ip, "", "w = t + 1")
    assert all(rec.hlo == [] for rec in res.records.values())


def test_hlo_dump_files_are_deleted_once_read(ip):
    """XLA writes about 11 files per compiled module; the engine reads the optimized HLO after
    the cell and deletes them all, so the dump directory does not grow with the session."""
    res = cell(ip, "", "dumped_fn = jax.jit(lambda x: x * 7 + 1)\ndumped = dumped_fn(jnp.ones(5))")
    assert all(rec.hlo for rec in res.records.values())  # the module was read ...
    res = cell(ip, "--show n_dump_files",
               "import os\nfrom mpinb.engine.state import STATE\nn_dump_files = sorted(os.listdir(STATE.dump))")
    for rec in res.records.values():  # ... and its files are gone
        assert rec.show["n_dump_files"]["repr"] == "[]", rec.show


def test_compare_sees_a_stale_global_in_a_function_of_an_earlier_cell(ip):
    """The classic pitfall: jit keeps the global it was traced with; eager reads the new one."""
    cell(ip, "", "scale = 2.0\ng_scaled = jax.jit(lambda x: x * scale)\ng_scaled(jnp.full(2, 4.0))")
    res = cell(ip, "--compare", "scale = 3.0\nr_scaled = g_scaled(jnp.full(2, 4.0))\nplain = np.ones(3)")
    assert "jit != eager: r_scaled on ranks 0-1" in res.summary()
    assert "plain" not in res.comparison_summary()  # NumPy arrays the cell built are not compared
    for rank in (0, 1):
        diff = next(c for c in res.records[rank].comparisons if c.name == "r_scaled")
        assert diff.status == "different" and diff.max_abs == 4.0  # 8 under jit, 12 eagerly
        assert [hint_words(h) for h in res.records[rank].hints] == [
            "g_scaled was traced when scale was 2.0; it is 3.0 now: a jitted function keeps the globals it "
            "was traced with (pass scale as an argument, or define g_scaled again)"]
    assert res.text().count("hint: g_scaled was traced when scale was 2.0") == 1  # both ranks: once
    # defined again, it is traced with the new value: equal, and no hint
    res = cell(ip, "--compare", "g_scaled = jax.jit(lambda x: x * scale)\nr_scaled = g_scaled(jnp.full(2, 4.0))")
    assert res.comparison_summary() == "jit == eager: r_scaled" and not res.records[0].hints


def test_compare_sees_trace_time_side_effects(ip):
    """A print and a counter inside a jitted function run once, when it is traced."""
    code = ("calls = 0\n"
            "@jax.jit\n"
            "def traced_once(x):\n"
            "    global calls\n"
            "    calls += 1\n"
            "    print('tracing')\n"
            "    return x + 1\n"
            "traced_once(jnp.ones(2))\n"
            "y_once = traced_once(jnp.ones(2))\n"
            "n_calls = calls\n"
            "n_static = 7\n")
    res = cell(ip, "--compare", code)
    summary = res.comparison_summary()
    assert "n_calls on ranks 0-1" in summary and "stdout on ranks 0-1" in summary, summary
    # a Python int that is equal in both passes says nothing: not listed; one that differs is
    assert [c.name for c in res.records[0].comparisons if c.name.startswith("n_")] == ["n_calls"]
    assert "y_once" not in summary  # equal: the value itself is right
    out = next(c for c in res.records[1].comparisons if c.name == "stdout")
    assert "the jitted run printed 1 line, the eager run 2" in comparison_detail(out)
    assert [hint_words(h) for h in res.records[0].hints] == [
        "traced_once assigns the global calls, which happens only when traced_once is traced, not at each "
        "call (return the value instead)",
        "traced_once calls print, which runs only when traced_once is traced (jax.debug.print prints at "
        "each call)"]


def test_compare_sees_a_changed_closure(ip):
    cell(ip, "", "def make_scaler():\n    box = {'k': 2.0}\n    return jax.jit(lambda x: x * box['k']), box\n"
                 "scaler, scaler_box = make_scaler()\nscaler(jnp.ones(2))")
    res = cell(ip, "--compare", "scaler_box['k'] = 5.0\nz_scaled = scaler(jnp.ones(2))")
    assert "jit != eager: z_scaled on ranks 0-1" in res.comparison_summary()


def test_a_failed_rank_raises_after_the_view_unless_no_raise(ip, capsys):
    """Run All stops at a cell in which a rank raised; the view is shown first."""
    with pytest.raises(CellFailed) as info:
        ip.run_cell_magic("mpijax", "", "if rank == 1:\n    raise KeyError('gone')")
    assert "[rank 1]" in capsys.readouterr().out  # the view came before the exception
    assert info.value.result.states == {0: "finished", 1: "failed"}
    assert "rank 1: KeyError: 'gone'" in str(info.value)
    res = cell(ip, "--no-raise", "if rank == 1:\n    raise KeyError('gone')")
    assert res.states[1] == "failed"
    assert cell(ip, "", "1 + 1").ok  # the cluster is usable: nothing is left running


def test_a_collective_in_a_cell_restricted_with_ranks_fails_at_once(ip):
    """Rank 1 never runs this cell: the allreduce would wait forever; it is an error instead."""
    res = cell(ip, "--ranks 0 --no-raise --timeout 60", "mpi.allreduce(jnp.ones(2), MPI.SUM)")
    assert not res.timed_out and res.states == {0: "failed"}
    assert ("mpinb.allreduce: rank 0: its communicator includes rank 1, which does not run this cell "
            "(%%mpijax --ranks)") in res.records[0].error.evalue
    res = cell(ip, "--ranks 1 --no-raise --timeout 60", "mpi.send(jnp.ones(2), 0)")
    assert "mpinb.send: rank 1: it waits for rank 0, which does not run this cell" in res.records[1].error.evalue
    assert cell(ip, "--ranks 0", "mpi.send(jnp.ones(2), MPI.PROC_NULL)\n7").ok  # nobody to wait for
    assert cell(ip, "", "int(mpi.allreduce(jnp.int32(1), MPI.SUM))").records[1].result["repr"] == "2"


def test_pull_stacks_per_rank_arrays_in_rank_order(ip, capsys):
    cell(ip, "", "pulled_here = np.arange(3) + 10 * rank")
    ip.run_line_magic("mpijax", "pull pulled_here --as both")
    assert "both = int64[2, 3] from 2 ranks" in capsys.readouterr().out
    np.testing.assert_array_equal(ip.user_ns["both"], [[0, 1, 2], [10, 11, 12]])
    with pytest.raises(UsageError, match="no variable 'not_defined_anywhere'"):
        ip.run_line_magic("mpijax", "pull not_defined_anywhere")
    with pytest.raises(UsageError, match="over the limit"):
        ip.run_line_magic("mpijax", "pull pulled_here --max-mib 0.000001")


def test_the_view_is_published_as_its_bundle(ip):
    """The magic publishes the view's text and HTML as they are (raw): IPython's formatter
    would otherwise try its other types on the view, for nothing, in every cell."""
    from mpinb.view import mimebundle

    shown = []
    with mock.patch("mpinb.magic.display", lambda obj, raw=False: shown.append((obj, raw))):
        ip.run_cell_magic("mpijax", "", "a = 1")
    ((bundle, raw),) = shown
    assert raw and bundle == mimebundle(ip.user_ns["_mpijax"]), (raw, bundle)
    assert set(bundle) == {"text/plain", "text/html"}


def test_pull_with_images_draws_the_pulled_array(ip, capsys):
    cell(ip, "", "field = np.outer(np.arange(4.0), np.ones(6)) + 100 * rank")
    shown = []
    with mock.patch("mpinb.magic.display", lambda obj, raw=False: shown.append(obj)):
        ip.run_line_magic("mpijax", "pull field --images")
    assert "field = float64[2, 4, 6] from 2 ranks" in capsys.readouterr().out
    (drawn,) = shown
    assert drawn["text/plain"] == "picture field[0, :, :]: 4x6 values, colour scale 0 to 3"
    assert "data:image/png;base64," in drawn["text/html"] and "mpinb-colourbar" in drawn["text/html"]


def test_each_rank_s_part_is_kept_even_once_ipyparallel_purged_its_caches(ip):
    """A rank's reply makes ipyparallel purge its caches of that message: a lookup by msg_id
    (client.get_result, client.metadata) then finds no output, or races into a KeyError; the
    per-rank tasks of a cell are made from the request's own futures and keep result and output."""
    from mpinb.cells.rank_task import per_rank

    cluster = cluster_of(ip)
    sent = cluster.engines_of([0, 1]).apply_async(divmod, 7, 2)
    sent.wait(60)
    sent.wait_for_output(10)
    assert cluster.client.metadata[sent.msg_ids[0]].get("engine_id") is None  # purged: a lookup finds nothing
    tasks = per_rank(sent)
    assert [t.get(10) for t in tasks] == [(3, 1), (3, 1)]
    assert [t.ready() and t.metadata.get("engine_id") for t in tasks] == [0, 1]


def test_each_rank_s_part_answers_as_ipyparallel_s_own_result_would(ip):
    """Per rank, an engine's error is raised as ipyparallel raises it (a RemoteError with the
    remote class's name), a reply not in yet is a TimeoutError, and output comes with the result."""
    from ipyparallel.error import RemoteError
    from ipyparallel.error import TimeoutError as NotYet

    from mpinb.cells.rank_task import per_rank

    cluster = cluster_of(ip)
    for task in per_rank(cluster.engines_of([0, 1]).apply_async(divmod, 7, 0)):
        with pytest.raises(RemoteError) as raised:
            task.get(60)
        assert raised.value.ename == "ZeroDivisionError"
    (sleeping,) = per_rank(cluster.engines_of([1]).apply_async(time.sleep, 1.5))
    assert not sleeping.ready() and not sleeping.wait(0.1)
    with pytest.raises(NotYet):
        sleeping.get(0)
    assert sleeping.get(60) is None and sleeping.ready()
    (printing,) = per_rank(cluster.engines_of([1]).apply_async(print, "said", flush=True))
    assert printing.get(60) is None and printing.wait_for_output(10) and printing.stdout == "said\n"


# The start's bounded waits (mpinb.cluster.start_checks), on clusters of their own. Here, not in
# test_faults.py: that file is rerun with the engines on another host and as a Slurm step, where
# this process can neither signal the engines by their PIDs nor start a second cluster beside
# the first.
def test_a_rank_that_never_answers_during_the_start_fails_it_naming_the_rank(monkeypatch):
    """An engine that registered but then answers nothing (stopped here with SIGSTOP, just before
    the ranks' check) ends the start after start_timeout with that rank named, and leaves no
    process behind: the start never waits without a bound."""
    from mpinb.errors import EngineSetupError

    stopped = []

    def stop_rank_1(self):
        self.start_timeout = 3.0  # the registration used the full timeout; the checks get 3 s
        pid = self.client[1].apply_sync(os.getpid)
        os.kill(pid, 19)  # SIGSTOP
        stopped.append(psutil.Process(pid))

    monkeypatch.setattr(MPICluster, "_protect_connection_files", stop_rank_1)
    started = time.monotonic()
    with pytest.raises(EngineSetupError, match=r"the ranks' check: rank 1 of 2 did not answer \(waited 3 s"):
        MPICluster(2, progress=False, start_timeout=120).start()
    assert time.monotonic() - started < 100  # bounded by the 3 s, not by the 120 s
    _, alive = psutil.wait_procs(stopped, timeout=30)
    assert len(stopped) == 1 and not alive  # the stopped engine was killed with the rest


def test_the_stop_button_during_the_ranks_check_leaves_nothing_running(monkeypatch):
    """A KeyboardInterrupt while the start waits for the ranks' check tears down what was
    started: no engine left, and the cluster says it is not running."""
    import mpinb.cluster.start_phases as start_phases

    engines = []

    def stopped_while_checking(cluster):
        engines.extend(psutil.Process(pid) for pid in cluster.client[:].apply_sync(os.getpid))
        raise KeyboardInterrupt

    monkeypatch.setattr(start_phases, "check_ranks", stopped_while_checking)
    started = MPICluster(2, progress=False)
    with pytest.raises(KeyboardInterrupt):
        started.start()
    _, alive = psutil.wait_procs(engines, timeout=30)
    assert len(engines) == 2 and not alive and not started.running
