"""Every exception mpinb raises on purpose, under one base (as ipyparallel's ``error.py``).

    MpinbError
    ├── ClusterError          the cluster could not be started, reached or used
    │   ├── ClusterNotRunning no cluster was started, or it was stopped
    │   ├── ClusterBusy       ranks still run (or are blocked in MPI inside) an earlier cell
    │   ├── ClusterLost       the MPI job ended (a rank died): only a restart helps
    │   ├── ClusterHeld       attach: another live kernel holds the cluster (force takes it over)
    │   ├── LauncherError     a launcher cannot be used as asked (not installed, bad option)
    │   ├── PreflightError    the ranks differ (versions, MPI library) from each other or the notebook
    │   └── EngineSetupError  an engine raised, or did not answer in time, while the start checked or set it up
    ├── CellFailed            a rank failed, died or did not finish a %%mpijax cell
    ├── QueuedCallFreed       a call a cell queued for XLA was freed where it waited (engine side)
    ├── PullError             %mpijax pull: no such variable, not an array, too large
    └── MPIVariantError       (also an ImportError) no compiled variant of mpinb fits the MPI mpi4py loads

    JaxVersionWarning         JAX is newer than the newest series mpinb was tested with

Bad arguments are ``ValueError``/``TypeError`` as usual in Python (and as in mpi4jax). Code
tells errors apart by their class, never by their message.
"""

from __future__ import annotations

import typing


class MpinbError(RuntimeError):
    """Base of mpinb's own exceptions."""


class ClusterError(MpinbError):
    """The cluster could not be started, reached or used."""


class ClusterNotRunning(ClusterError):
    """No cluster was started, or it was stopped."""


class ClusterBusy(ClusterError):
    """Ranks are still running (or blocked in MPI inside) an earlier cell."""


class ClusterHeld(ClusterError):
    """``attach``: another live kernel (or script) holds the cluster; ``force=True`` takes it over."""


class PreflightError(ClusterError):
    """The ranks cannot run together: their Python, mpinb, JAX, jaxlib or mpi4py versions, MPI
    library or mpinb's compiled library differ between them or from the notebook."""


class ClusterLost(ClusterError):
    """The MPI job ended (a rank died); only a restart helps."""


class ControllerError(ClusterError):
    """The controller could not serve the cluster: a port it picked was taken by another process
    before it listened on it, or it ended (its output quoted), three controllers in a row; or it
    did not open its ports within start_timeout: mpinb.client.controller."""


class LauncherError(ClusterError):
    """A launcher cannot be used as asked (not installed, bad option)."""


class EngineSetupError(ClusterError):
    """An engine raised while the start checked or set it up (its own words), or did not answer
    within start_timeout (the ranks that did not are named): mpinb.client.start_checks."""


class CellFailed(MpinbError):
    """Raised by ``%%mpijax`` after the view is shown when a rank failed, died or did not finish
    (``--no-raise`` turns it off). ``.result`` is the cell's result (mpinb.client.result)."""

    #: how each state that fails a cell is said
    WORDS: typing.ClassVar[dict[str, str]] = {"failed": "failed", "dead": "died", "running": "still running",
                                              "restarted": "restarted"}

    def __init__(self, result):
        self.result = result
        problems = []
        for rank, state in sorted(result.states.items()):
            rec = result.records.get(rank)
            if state == "failed" and rec.error:
                problems.append(f"rank {rank}: {rec.error}")
            elif state == "dead":
                problems.append(f"rank {rank} {result.dead.get(rank, 'died')}")
            elif state == "running":
                problems.append(f"rank {rank} still running")
            elif state == "restarted":
                problems.append(f"rank {rank} restarted")
        super().__init__(f"{len(problems)} of {len(result.ranks)} ranks did not finish the cell: "
                         + "; ".join(problems))

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback (as for ipyparallel's CompositeError): one
        line under the view, which already shows each rank's error with its traceback."""
        from .analysis.grouping import label

        by_state: dict[str, list[int]] = {}
        for rank, state in sorted(self.result.states.items()):
            if state in self.WORDS:
                by_state.setdefault(state, []).append(rank)
        what = ", ".join(f"{label(ranks)} {self.WORDS[state]}" for state, ranks in by_state.items())
        from .view.words import RESULT_NAME

        return [f"CellFailed: {what} (see the view above; the whole result is in {RESULT_NAME})"]


class QueuedCallFreed(MpinbError):
    """An mpinb call that the cell's jitted work queued for XLA was freed where it waited (a
    proven deadlock or the stop button) after the cell's code had returned: nothing raised its
    error, which the arrays it was to produce hold (mpinb.engine.settle)."""


class PullError(MpinbError):
    """``%mpijax pull`` / ``MPICluster.pull``: no such variable, not an array, or too large."""


class MPIVariantError(MpinbError, ImportError):
    """No compiled variant of mpinb's libraries (mpinb/abitable.py) fits the MPI that mpi4py loads:
    ``found`` (what is there), ``expected`` (what would fit) and ``fix`` (what to do) as text."""

    def __init__(self, message: str, *, found: str = "", expected: str = "", fix: str = ""):
        super().__init__(message)
        self.found, self.expected, self.fix = found, expected, fix


class JaxVersionWarning(UserWarning):
    """The installed JAX is newer than the newest series mpinb was tested with (it may work)."""

