"""Every exception mpinb raises on purpose, under one base (as ipyparallel's ``error.py``).

    MpinbError
    ├── ClusterError          the cluster could not be started, reached or used
    │   ├── ClusterNotRunning no cluster was started, or it was stopped
    │   ├── ClusterBusy       ranks still run (or are blocked in MPI inside) an earlier cell
    │   ├── ClusterLost       the MPI job ended, or the cluster ended outside the notebook: restart
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
tells errors apart by their class (and ``cause``), never by their message.

An error carries facts, not sentences: ``PullError(cause="shapes_differ", name="x",
shapes=[(2,), (3,)])`` keeps each keyword as an attribute (and all of them in ``.facts``), and
code branches on its class and ``cause``. The words a user reads are written in
mpinb.view.error_words, which hands its wording function to :func:`give_voice` when it is
imported; ``MPICluster``'s module, attach and a cell's run import it, so ``str(error)`` reads
as a sentence from the magic and from plain Python alike. This module imports nothing of the
view (nor of the analysis): without a voice, or where its words do not fit the facts,
``str(error)`` lists the facts and never raises. An error raised with a text
(``EngineSetupError("...")`` from an engine, which has no voice) keeps that text.
"""

from __future__ import annotations

import typing

#: the wording of errors with facts (mpinb.view.error_words.error_words): error, brief -> text
_voice: typing.Callable[[MpinbError, bool], str | None] | None = None


def give_voice(voice: typing.Callable[[MpinbError, bool], str | None]) -> None:
    """Word every error with facts through ``voice(error, brief)`` (a text, or None where it
    has no words for that error); ``brief`` asks for the one line shown under a cell's view."""
    global _voice
    _voice = voice


def _spoken(error: MpinbError, brief: bool) -> str | None:
    """The voice's words for ``error``; None without a voice, or where its words do not fit these
    facts (``str`` never raises: the facts are listed instead)."""
    if _voice is None:
        return None
    try:
        return _voice(error, brief)
    except Exception:  # noqa: BLE001 - a wording that does not fit: the facts as they are
        return None


def fact_listing(error: MpinbError) -> str:
    """The facts as they are, for an error no voice words: "shapes_differ: name='x', shapes=[(2,), (3,)]"."""
    facts = dict(error.facts)
    cause = facts.pop("cause", "")
    listed = ", ".join(f"{name}={value!r}" for name, value in facts.items())
    return f"{cause}: {listed}" if cause and listed else cause or listed


class MpinbError(RuntimeError):
    """Base of mpinb's own exceptions: the facts given as keywords are its attributes."""

    def __init__(self, *args, **facts):
        super().__init__(*args)
        self.facts = facts
        self.__dict__.update(facts)

    def __str__(self) -> str:
        if not self.facts:
            return super().__str__()
        return _spoken(self, False) or fact_listing(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})" if self.facts else super().__repr__()


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
    """The MPI job ended (a rank died), or the cluster ended outside this notebook (``cause``
    "ended_outside": stopped by ipyparallel, its controller or its job killed); only a restart helps."""


class ControllerError(ClusterError):
    """The controller could not serve the cluster: a port it picked was taken by another process
    before it listened on it, or it ended (its output quoted), three controllers in a row; or it
    did not open its ports within start_timeout: mpinb.cluster.controller."""


class LauncherError(ClusterError):
    """A launcher cannot be used as asked (not installed, bad option)."""


class EngineSetupError(ClusterError):
    """An engine raised while the start checked or set it up (its own words), or did not answer
    within start_timeout (the ranks that did not are named): mpinb.cluster.start_checks."""


class CellFailed(MpinbError):
    """Raised by ``%%mpijax`` after the view is shown when a rank failed, died or did not finish
    (``--no-raise`` turns it off). ``.result`` is the cell's result (mpinb.cells.result)."""

    def __init__(self, result=None):
        super().__init__(result=result)

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback (as for ipyparallel's CompositeError): one
        line under the view, which already shows each rank's error with its traceback."""
        return [f"{type(self).__name__}: {_spoken(self, True) or self}"]


class QueuedCallFreed(MpinbError):
    """An mpinb call that the cell's jitted work queued for XLA was freed where it waited (a
    proven deadlock or the stop button) after the cell's code had returned: nothing raised its
    error, which the arrays it was to produce hold (mpinb.engine.settle)."""


class PullError(MpinbError):
    """``%mpijax pull`` / ``MPICluster.pull``: no such variable, not an array, or too large."""


class MPIVariantError(MpinbError, ImportError):
    """No compiled variant of mpinb's libraries (mpinb/variant/abitable.py) fits the MPI that mpi4py loads:
    ``found`` (what is there), ``expected`` (what would fit) and ``fix`` (what to do) as text."""

    def __init__(self, message: str, *, found: str = "", expected: str = "", fix: str = ""):
        super().__init__(message)
        self.found, self.expected, self.fix = found, expected, fix


class JaxVersionWarning(UserWarning):
    """The installed JAX is newer than the newest series mpinb was tested with (it may work)."""

