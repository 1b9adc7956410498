"""A new kernel and the clusters of earlier ones: ``attach`` (reconnect to a cluster kept alive,
its engines' variables intact), ``listing`` (this user's clusters here, held or idle) and
``clean`` (end the clusters no kernel holds, remove their files). The magic's ``%mpijax attach``,
``list`` and ``clean`` and the command line's ``mpinb list`` and ``mpinb clean`` call these. Each
first keeps the files true (mpinb.client.upkeep): a cluster that no longer runs is not offered.
"""

from __future__ import annotations

import time

from ..errors import ClusterError, ClusterHeld
from . import registry, upkeep


def describe(record: dict, now: float | None = None) -> str:
    """One line about a cluster: id, ranks, launcher, age, and who holds it or how long it idles."""
    now = time.time() if now is None else now
    holder = record.get("holder") or {}
    idle = registry.idle_seconds(record, now)
    if idle is None:
        state = f"held by PID {holder.get('pid')} on {holder.get('host')}"
    else:
        keep = record.get("keep_alive")
        state = f"idle {idle:.0f} s" + (f" (ends after {keep:.0f} s idle)" if keep is not None else " (ending)")
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.get("started_at", now)))
    return (f"{record['id']}  {record.get('n')} ranks  {record.get('launcher')}  started {started} "
            f"({now - record.get('started_at', now):.0f} s ago)  {state}")


def listing() -> list[str]:
    """This user's clusters on this host, a line each (empty: none)."""
    return [describe(r) for r in upkeep.running()]


def _choose(cluster_id: str | None) -> dict:
    records = upkeep.running()
    known = "\n".join(describe(r) for r in records) or "(none)"
    if cluster_id is None:
        if len(records) != 1:
            raise ClusterError(f"{'no cluster' if not records else f'{len(records)} clusters'} to attach to; "
                               f"name one (%mpijax attach ID):\n{known}")
        return records[0]
    record = next((r for r in records if r["id"] == cluster_id), None)
    if record is None:
        raise ClusterError(f"no cluster {cluster_id!r} here (this user's clusters on this host):\n{known}")
    return record


def attach(cluster_class, cluster_id: str | None = None, *, force: bool = False, timeout: float = 30.0):
    """A ``cluster_class`` (MPICluster) connected to a running cluster of this user on this host
    (the only one if ``cluster_id`` is None), this process its holder from now on. A cluster held
    by another live process is refused (ClusterHeld, naming it) unless ``force``; one whose
    engines died is refused with what is left."""
    import ipyparallel as ipp

    record = _choose(cluster_id)
    holder = record.get("holder")
    if registry.alive(holder) and holder.get("pid") != registry.me()["pid"] and not force:
        raise ClusterHeld(f"cluster {record['id']} is held by PID {holder['pid']} on {holder['host']} "
                          "(another kernel); attach with force=True (%mpijax attach --force) to take it over")
    cluster = cluster_class(progress=False, **record["options"])
    cluster.cluster_id = record["id"]
    cluster._own_cluster_id = record.get("own_id", True)
    cluster.workdir = record["workdir"]
    cluster._cluster = ipp.Cluster.from_file(record["ipp_cluster_file"])
    cluster._cluster.shutdown_atexit = False
    client = cluster._cluster.connect_client_sync()
    try:
        client.wait_for_engines(cluster.n, timeout=timeout)
    except TimeoutError as exc:
        client.close()
        raise ClusterError(f"cluster {record['id']}: {len(client.ids)} of its {cluster.n} engines answer; the "
                           f"others died: end it with %mpijax clean (or mpinb clean)\n{describe(record)}") from exc
    cluster.client, cluster.view = client, client[:]
    cluster.view.block = True
    cluster.engines = record.get("engines", [])
    cluster.setup_cells = list(record.get("setup_cells", []))
    cluster.started_at = record.get("started_at")
    cluster.start_seconds = record.get("start_seconds")
    registry.update(record["id"], holder=registry.me(), released_at=None)
    return cluster


def clean() -> list[str]:
    """End every cluster of this user here that no live process holds, and remove its files;
    the lines of those ended."""
    from .watchdog import end_cluster

    ended = []
    for record in upkeep.running():
        if not registry.alive(record.get("holder")):
            ended.append(describe(record))
            end_cluster(record)
    return ended
