"""How a cluster ended outside its notebook, read from what runs on the notebook's host, where
its controller, its MPI launcher and its ipyparallel cluster file are:

- ``stopped_outside``: it was stopped. ipyparallel's own stop (the STOP button of JupyterLab's
  IPython Parallel panel, ``ipcluster stop``, ``ipp.Cluster.from_file(...).stop_cluster()``)
  asks its controller to end (which then exits with status 0) and its engines, then removes its
  cluster file;
- ``controller_ended``: its controller ended otherwise (killed: nothing reaches the engines then);
- ``job_ended``: its MPI launcher ended, so the MPI job is gone (its engines were killed, or the
  launcher itself).

The holder (mpinb.cluster.mpi_cluster, before a cell and while one runs) and the watchdog
(mpinb.cluster.watchdog, for a holder that runs no cell) both ask; whichever acts ends what is
left of the cluster. The holder started the controller, so it knows its exit status; the watchdog
does not, and waits until ipyparallel's stop, which takes a few seconds, has removed the cluster
file, then writes the facts into the cluster's file (``ended``) for the holder to say. The facts
are words for no one here: mpinb.view.outside_end_words says them.
"""

from __future__ import annotations

import os
import signal

from . import identity, registry

#: the causes
STOPPED_OUTSIDE, CONTROLLER_ENDED, JOB_ENDED = "stopped_outside", "controller_ended", "job_ended"
#: how a controller that was asked to end exits: by itself (ipyparallel's stop), or by the signals that ask
ASKED = (0, -signal.SIGINT, -signal.SIGTERM)


def how_it_ended(record: dict | None, job: bool = True, controller_exit: int | None = None) -> dict | None:
    """The facts ``{"cause": ...}`` of how the cluster of ``record`` (its registry file) ended
    outside its notebook; None while it runs. ``controller_exit``: the controller's exit status
    where it is known (to the process that started it). ``job=False``: the MPI launcher's end is
    left out (a cell under way reports the ranks' deaths itself, with how each died)."""
    if not record:
        return None
    controller = record.get("controller")
    controller_ended = bool(controller) and not identity.running(controller)
    if controller_ended and controller_exit is not None:
        if controller_exit in ASKED:
            return {"cause": STOPPED_OUTSIDE}
        return {"cause": CONTROLLER_ENDED, "returncode": int(controller_exit)}
    if record.get("ended"):
        return record["ended"]
    cluster_file = record.get("ipp_cluster_file")
    if cluster_file and not os.path.exists(cluster_file):
        return {"cause": STOPPED_OUTSIDE}
    if controller_ended:
        return {"cause": CONTROLLER_ENDED}
    launchers = record.get("launchers") or []
    if job and launchers and not any(identity.running(entry) for entry in launchers):
        return {"cause": JOB_ENDED}
    return None


def of_cluster(cluster, job: bool = True) -> dict | None:
    """How a running MPICluster of this process ended outside its notebook (None while it runs):
    what its file and its processes say, its controller's exit status (this process started
    it), and, with ``job``, an engine that the controller no longer knows (a batch job's ranks,
    which no launcher here shows); the job's end carries the ranks' deaths, as the MPI
    launcher reported them."""
    from ..cells import health

    if not cluster.running or cluster.record is None:
        return None
    record = registry.read(cluster.cluster_id) or cluster.record
    ended = how_it_ended(record, job, health.controller_exit(cluster))
    if ended is None and job and len(health.registered(cluster)) < cluster.n:
        ended = {"cause": JOB_ENDED}
    if ended is not None and ended["cause"] == JOB_ENDED:
        ended = dict(ended, deaths=cluster.exit_records())
    return ended
