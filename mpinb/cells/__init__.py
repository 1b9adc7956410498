"""Running cells on a started cluster, on the notebook's side: a cell's run on its ranks (each
rank's task, the status while it runs, the deadlock proof, the grace after a failure), the
engines' health, freeing ranks where they wait, pulling a variable of every rank, and the
result. It takes the cluster as given and imports nothing of mpinb.cluster.

Its errors carry facts; importing it gives them their words (mpinb.view.error_words)."""

from ..view import error_words as _error_words  # noqa: F401 - gives mpinb.errors its voice
