"""What mpinb keeps per cell is bounded (a long session's memory stays flat): ipyparallel's
records of earlier cells' messages are forgotten in the notebook (mpinb.cluster.settled_messages),
and an engine forgets the source and label of old cells that define nothing that can run again
(mpinb.engine.cell_sources)."""

from __future__ import annotations

import linecache
import types

from mpinb.cluster.settled_messages import SettledMessages
from mpinb.engine import cell_sources
from mpinb.engine.state import STATE


def fake_client():
    return types.SimpleNamespace(history=[], results={}, metadata={}, _futures={}, _output_futures={},
                                 outstanding=set())


def send(client, view, msg_id, outstanding=False):
    client.history.append(msg_id)
    view.history.append(msg_id)
    for table in (client.results, client.metadata, client._futures, client._output_futures):
        table[msg_id] = object()
    if outstanding:
        client.outstanding.add(msg_id)


def test_the_messages_of_cells_before_the_last_are_forgotten_but_never_outstanding_ones():
    client, view, settled = fake_client(), types.SimpleNamespace(history=[]), SettledMessages(keep=1)
    for cell in range(50):
        mark = settled.begin(client)
        send(client, view, f"{cell}-a")
        send(client, view, f"{cell}-b", outstanding=cell == 3)
        settled.end(client, [view], mark)
    assert client.history == view.history == ["3-b", "49-a", "49-b"]
    for table in (client.results, client.metadata, client._futures, client._output_futures):
        assert sorted(table) == ["3-b", "49-a", "49-b"]


def test_an_engine_forgets_old_plain_cells_and_keeps_those_that_define_code():
    STATE.cell_labels.clear()
    cell_sources._plain.clear()
    keep = cell_sources.KEEP_PLAIN
    defining = {5: "def f(x):\n    return x\n", 7: "g = lambda v: v\n", 9: "class A:\n    pass\n"}
    for cell in range(3 * keep):
        name = f"<test-cell-{cell}>"
        source = defining.get(cell, f"y = {cell} + 1\nprint(y)\n")
        cell_sources.remember(name, f"In[{cell}]", source)
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    try:
        kept = {int(n[len("<test-cell-"):-1]) for n in STATE.cell_labels}
        assert kept == set(defining) | set(range(2 * keep, 3 * keep))
        assert {n for n in linecache.cache if n.startswith("<test-cell-")} == set(STATE.cell_labels)
    finally:
        for name in [n for n in linecache.cache if n.startswith("<test-cell-")]:
            del linecache.cache[name]
        STATE.cell_labels.clear()
        cell_sources._plain.clear()


def test_what_defines_code():
    assert cell_sources.defines_code("def f():\n    pass")
    assert cell_sources.defines_code("h = jax.jit(lambda x: x)")
    assert cell_sources.defines_code("it = (i for i in range(3))")
    assert cell_sources.defines_code("%timeit 1")  # IPython syntax: kept, to be safe
    assert not cell_sources.defines_code("x = jnp.ones(3)\nprint([i for i in range(3)])")
