"""How a cell's code is named on the engines, so that tracebacks and compiled HLO can name it
as the notebook does: the code of the engine's N-th cell is compiled under the file name
``<mpijax-cell-N>``, and the notebook's label for it (``In[5]``) replaces that name where
people read it (``Cell In[5], line 4``). Pure.
"""

from __future__ import annotations

import re

_FILE = re.compile(r"<mpijax-cell-(\d+)>")


def cell_filename(number: int) -> str:
    """The file name the engine's ``number``-th cell is compiled under."""
    return f"<mpijax-cell-{number}>"


def is_cell_file(filename: str) -> bool:
    """Whether ``filename`` names a cell's code (not a module's file)."""
    return _FILE.fullmatch(filename) is not None


def name_cells(text: str, labels: dict[str, str]) -> str:
    """``text`` (compiled HLO: metadata and file tables) with each quoted cell file name that
    ``labels`` knows replaced by ``Cell <label>``."""
    def label(m: re.Match) -> str:
        known = labels.get(m.group(1))
        return f'"Cell {known}"' if known and known != m.group(1) else m.group(0)

    return re.sub(r'"(<mpijax-cell-\d+>)"', label, text)
