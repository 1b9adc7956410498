"""The notebook's side of a cluster: its lifecycle, the engines' health, running a cell on its
ranks and the result. Its errors carry facts; importing it gives them their words
(mpinb.view.error_words), so that ``str(error)`` is a sentence wherever a cluster is used."""

from ..view import error_words as _error_words  # noqa: F401 - gives mpinb.errors its voice
