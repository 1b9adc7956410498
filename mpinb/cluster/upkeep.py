"""The files of this user's clusters kept true: before ``list``, ``attach`` and ``start`` use
them, each file is judged against what runs, and acted on.

- A file from an earlier boot (mpinb.cluster.identity) names no process of this boot: its cluster
  ended with the machine. Its files go; nothing is killed (its PIDs are other processes now), but
  a Slurm job it names is cancelled (a job outlives a reboot of the login node, and without its
  controller it serves nobody).
- A cluster of this host with no process left (none of its launcher and controller runs, and no
  watchdog watches it: its watchdog died with them, with the user's processes, the OOM killer)
  is gone: its files go.
- A Slurm cluster whose job the scheduler no longer has is gone: what is left of it here (its
  controller) is ended and its files go. When Slurm does not answer, its processes here decide.
- A cluster that ended outside its notebook while its holder runs keeps its file, which says
  how it ended (mpinb.cluster.outside_end), until the holder has read it; it is not listed.
- A cluster that still runs and that no watchdog watches (its watchdog was killed) gets a new
  watchdog, which ends it at once if its holder is gone too and it is not kept alive, or after
  its ``keep_alive`` otherwise: the cluster's life is then what it would have been with the first
  watchdog. Ending such a cluster here instead would take away a running kernel's cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import identity, registry

#: what the upkeep found of a file (the ``verdict`` of ``Kept``)
RUNNING, EARLIER_BOOT, NO_PROCESS, JOB_ENDED = "running", "earlier boot", "no process left", "job ended"
#: a cluster that ended outside its notebook, whose file keeps the facts for its holder, which still runs
#: (mpinb.cluster.watchdog): kept until the holder has read them
ENDED_OUTSIDE = "ended outside"


@dataclass
class Kept:
    """One file as the upkeep found it: its record, the verdict, and whether a new watchdog was
    started for it."""

    record: dict
    verdict: str
    new_watchdog: bool = False


def verdict(record: dict) -> str:
    """What runs of a cluster its file names: RUNNING, EARLIER_BOOT, NO_PROCESS or JOB_ENDED."""
    from .watchdog import watched

    if not identity.this_boot(record):
        return EARLIER_BOOT
    if record.get("ended") and registry.alive(record.get("holder")):
        return ENDED_OUTSIDE
    job = record.get("slurm_job_name")
    if job:
        from ..launch.launchers import slurm_job_runs

        if slurm_job_runs(job) is False:
            return JOB_ENDED
    if any(identity.running(entry) for entry in record.get("processes", [])) or watched(record["id"]):
        return RUNNING
    return NO_PROCESS


def survey() -> list[Kept]:
    """Judge every file of this user's clusters here and act on it (see the module), oldest first."""
    from .lifetime import start_watchdog
    from .watchdog import end_cluster, watched

    found = []
    for record in registry.clusters():
        judged = Kept(record, verdict(record))
        if judged.verdict == ENDED_OUTSIDE:
            pass  # its processes were ended; its holder reads the facts and removes it
        elif judged.verdict != RUNNING:
            end_cluster(record)  # kills only what still runs of it in this boot
        elif not watched(record["id"]):
            start_watchdog(record["id"])
            judged.new_watchdog = True
        found.append(judged)
    return found


def keep_watched(cluster_id: str | None) -> list[dict]:
    """Give a running cluster a new watchdog if its watchdog died (killed, say): what was mended,
    as facts for a cell's notes (empty: nothing)."""
    from .lifetime import start_watchdog
    from .watchdog import watched

    if not cluster_id or registry.read(cluster_id) is None or watched(cluster_id):
        return []
    start_watchdog(cluster_id, settle=5.0)  # watching before the next cell looks
    return [{"cause": "watchdog_replaced"}]


def running(standbys: bool = False) -> list[dict]:
    """The records of the clusters that run, after the upkeep (a kernel's standbys left out:
    they are its own, not to be listed or attached, unless ``standbys``)."""
    return [kept.record for kept in survey()
            if kept.verdict == RUNNING and (standbys or not kept.record.get("standby"))]
