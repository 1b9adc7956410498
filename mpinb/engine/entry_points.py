"""Everything the notebook side runs on an engine: the one list.

:meth:`mpinb.cluster.mpi_cluster.MPICluster.on_engines` is the only door through which a function
reaches the engines, and it sends only the functions listed here (each by its name,
mpinb.wire.by_name: the engines run their own copy). To run something new on the engines,
write it in the engine's module where it belongs and add it here.

The notebook imports this module when it first sends something: the engine modules it names
load no JAX at import.
"""

from __future__ import annotations

from .execute import execute_cell
from .hlo_capture import compiled_hlo
from .rank_release import at_rest, drop_left, join
from .self_account import report
from .shards import local_parts
from .startup import setup

#: every function the notebook side runs on an engine
ENTRY_POINTS = (
    report,         # the start's check: each rank's account of itself
    setup,          # the engine's setup, once at start
    execute_cell,   # a cell
    at_rest,        # freeing ranks: whether the idle ranks may join an exchange
    join,           # freeing ranks: the idle ranks join the exchange the others wait in
    drop_left,      # freeing ranks: the messages left unreceived are dropped
    local_parts,    # MPICluster.pull: what a rank holds of a variable
    compiled_hlo,   # %mpijax hlo: the compiled HLO of a jitted call
)
