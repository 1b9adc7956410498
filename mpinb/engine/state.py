"""What an engine knows about itself between cells (engine side): one ``EngineState`` per
engine process, ``STATE``, set up by mpinb.engine.startup and read by the cell's execution.
"""

from __future__ import annotations

import dataclasses
import threading


@dataclasses.dataclass
class EngineState:
    """What an engine knows about itself between cells (one per engine process: ``STATE``)."""

    rank: int | None = None
    size: int | None = None
    dump: str | None = None          # this rank's HLO dump directory
    hlo_ok: bool = False             # HLO capture works (JAX was not imported before setup)
    cells: int = 0                   # %%mpijax cells run so far
    running: int | None = None       # the number of the cell running now
    settling: str | None = None      # the label of the cell whose queued JAX work is awaited (settle.py)
    status_dir: str | None = None    # where faulthandler writes (on this engine's host)
    fault_file: object = None
    status_thread: threading.Thread | None = None
    # {cell file name: its notebook label, e.g. "In[5]"}: how tracebacks and HLO name cells
    cell_labels: dict[str, str] = dataclasses.field(default_factory=dict)


STATE = EngineState()
