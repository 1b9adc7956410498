"""A new kernel and the clusters of earlier ones: ``attach`` (reconnect to a cluster kept alive,
its engines' variables intact), ``listing`` (this user's clusters here, held or idle) and
``clean`` (end the clusters no kernel holds, remove their files). The magic's ``%mpijax attach``,
``list`` and ``clean`` and the command line's ``mpinb list`` and ``mpinb clean`` call these. Each
first keeps the files true (mpinb.cluster.upkeep): a cluster that no longer runs is not offered.
"""

from __future__ import annotations

import time

from ..errors import ClusterError, ClusterHeld
from ..view import error_words as _error_words  # noqa: F401 - gives mpinb.errors its voice
from . import registry, upkeep


def seen(record: dict, now: float | None = None) -> dict:
    """A cluster's registry record with what is seen of it ``now``: ``now`` and ``idle`` (how
    long no live process has held it, None while one does); mpinb.view.cluster_words says it."""
    now = time.time() if now is None else now
    return dict(record, now=now, idle=registry.idle_seconds(record, now))


def listing() -> list[dict]:
    """This user's clusters on this host, as seen now (empty: none)."""
    return [seen(r) for r in upkeep.running()]


def _choose(cluster_id: str | None) -> dict:
    records = upkeep.running()
    if cluster_id is None:
        if len(records) != 1:
            raise ClusterError(cause="none_to_choose", records=[seen(r) for r in records])
        return records[0]
    record = next((r for r in records if r["id"] == cluster_id), None)
    if record is None:
        raise ClusterError(cause="no_such_cluster", cluster_id=cluster_id, records=[seen(r) for r in records])
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
        raise ClusterHeld(cause="held", cluster_id=record["id"], pid=holder["pid"], host=holder["host"])
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
        raise ClusterError(cause="engines_died", cluster_id=record["id"], answering=len(client.ids), n=cluster.n,
                           records=[seen(record)]) from exc
    cluster.client, cluster.every_engine = client, client[:]
    cluster.every_engine.block = True
    cluster.engines = record.get("engines", [])
    cluster.setup_cells = list(record.get("setup_cells", []))
    cluster.started_at = record.get("started_at")
    cluster.start_seconds = record.get("start_seconds")
    cluster.record = registry.update(record["id"], holder=registry.me(), released_at=None)
    return cluster


def clean() -> list[dict]:
    """End every cluster of this user here that no live process holds, and remove its files;
    those ended, as seen before."""
    from .watchdog import end_cluster

    ended = []
    for record in upkeep.running():
        if not registry.alive(record.get("holder")):
            ended.append(seen(record))
            end_cluster(record)
    return ended
