"""A new kernel and the clusters of earlier ones: ``attach`` (reconnect to a cluster kept alive,
its engines' variables intact, or take in one that ipyparallel started from an mpinb profile:
mpinb.cluster.profile), ``listing`` (this user's clusters here, held or idle) and ``clean`` (end
the clusters no kernel holds, remove their files). The magic's ``%mpijax attach``, ``list`` and
``clean`` and the command line's ``mpinb list`` and ``mpinb clean`` call these. Each first keeps
the files true (mpinb.cluster.upkeep): a cluster that no longer runs is not offered.
"""

from __future__ import annotations

import glob
import json
import os
import tempfile
import time

import psutil

from ..errors import ClusterError, ClusterHeld
from ..view import error_words as _error_words  # noqa: F401 - gives mpinb.errors its voice
from . import lifetime, profile, registry, upkeep


def seen(record: dict, now: float | None = None) -> dict:
    """A cluster's registry record with what is seen of it ``now``: ``now`` and ``idle`` (how
    long no live process has held it, None while one does); mpinb.view.cluster_words says it."""
    now = time.time() if now is None else now
    return dict(record, now=now, idle=registry.idle_seconds(record, now))


def listing() -> list[dict]:
    """This user's clusters on this host, as seen now (empty: none): mpinb's, then those that
    ipyparallel started from an mpinb profile and no kernel took in yet."""
    return [seen(r) for r in upkeep.running()] + [seen(r) for r in profile_clusters().values()]


def profile_clusters() -> dict[str, dict]:
    """The running clusters that ipyparallel started from an mpinb profile (the IPython Parallel
    panel's "+ NEW", ``ipcluster start --profile=mpinb``) and that mpinb has no file of yet:
    {cluster id: a record of what is known (its id, size, profile, cluster file, start)}. Read
    from their cluster files (ipyparallel's own loading would start a thread per cluster here)."""
    from IPython.paths import get_ipython_dir

    known = {record["id"] for record in registry.clusters()}
    found = {}
    for profile_dir in glob.glob(os.path.join(get_ipython_dir(), "profile_*")):
        if not profile.made_by_mpinb(profile_dir):
            continue
        for path in glob.glob(os.path.join(profile_dir, "security", "cluster-*.json")):
            try:
                with open(path) as fh:
                    saved = json.load(fh)
                cluster_id = saved["cluster"]["cluster_id"]
                pid = saved["controller"]["state"]["pid"]
                n = sum(int(engines.get("n") or 0) for engines in saved["engines"]["sets"].values())
                started = os.path.getmtime(path)
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue  # being written, or not a cluster of ipyparallel's
            if not cluster_id or cluster_id in known or not psutil.pid_exists(pid):
                continue
            found[cluster_id] = {
                "id": cluster_id, "n": n, "launcher": saved["engines"].get("class", "mpi"),
                "profile": os.path.basename(profile_dir).removeprefix("profile_"), "ipp_cluster_file": path,
                "started_at": started, "holder": None, "released_at": None, "keep_alive": None,
                "started_outside": True}
    return found


def _choose(cluster_id: str | None) -> dict:
    records = upkeep.running() + list(profile_clusters().values())
    if cluster_id is None:
        if len(records) != 1:
            raise ClusterError(cause="none_to_choose", records=[seen(r) for r in records])
        return records[0]
    record = next((r for r in records if r["id"] == cluster_id), None)
    if record is None:
        raise ClusterError(cause="no_such_cluster", cluster_id=cluster_id, records=[seen(r) for r in records])
    return record


def adopt(cluster_class, record: dict, timeout: float = 30.0, force: bool = False):
    """A ``cluster_class`` (MPICluster) that takes in a cluster ipyparallel started from an mpinb
    profile (``record``: as profile_clusters finds it): its engines checked and set up as a
    start does, registered with this process as its holder. It stays ipyparallel's: it outlives
    this process and ends with ipyparallel's stop. One that cannot be taken (its engines did
    not answer, its ranks are not right) is let go of as it was. One process at a time takes a
    cluster in: another kernel that tries meanwhile is refused (ClusterHeld), and one that tries
    after attaches to it as to any held cluster."""
    with registry.taking(record["id"]) as other:
        if other is not None:
            raise ClusterHeld(cause="being_taken", cluster_id=record["id"], pid=other["pid"], host=other["host"])
        if registry.read(record["id"]) is not None:  # taken in since this process looked
            return attach(cluster_class, record["id"], force=force, timeout=timeout)
        return _take_in(cluster_class, record, timeout)


def _take_in(cluster_class, record: dict, timeout: float):
    """adopt's work, while this process alone takes the cluster in."""
    import ipyparallel as ipp

    from .start_phases import check_and_set_up

    cluster = cluster_class(n=record["n"], progress=False)
    cluster.cluster_id, cluster._own_cluster_id, cluster.adopting = record["id"], False, True
    cluster.workdir = tempfile.mkdtemp(prefix="mpinb-")
    os.makedirs(cluster.status_dir)
    cluster._cluster = ipp.Cluster.from_file(record["ipp_cluster_file"])
    cluster._cluster.shutdown_atexit = False
    cluster.client = cluster._cluster.connect_client_sync()
    try:
        cluster.client.wait_for_engines(cluster.n, timeout=timeout)
    except TimeoutError as exc:
        answering = len(cluster.client.ids)
        cluster._teardown()
        raise ClusterError(cause="engines_died", cluster_id=record["id"], answering=answering, n=cluster.n,
                           records=[seen(record)]) from exc
    lifetime.register(cluster, cluster._cluster, started_outside=True)
    cluster.record = registry.read(cluster.cluster_id)
    started = time.perf_counter()
    check_and_set_up(cluster)
    cluster.adopting = False
    cluster.started_at, cluster.start_seconds = record["started_at"], time.perf_counter() - started
    registry.update(cluster.cluster_id, engines=cluster.engines, start_seconds=cluster.start_seconds)
    return cluster


def attach(cluster_class, cluster_id: str | None = None, *, force: bool = False, timeout: float = 30.0):
    """A ``cluster_class`` (MPICluster) connected to a running cluster of this user on this host
    (the only one if ``cluster_id`` is None), this process its holder from now on. A cluster held
    by another live process is refused (ClusterHeld, naming it) unless ``force``; one whose
    engines died is refused with what is left."""
    import ipyparallel as ipp

    record = _choose(cluster_id)
    if record.get("started_outside") and not record.get("holder"):  # not taken in by a kernel yet
        return adopt(cluster_class, record, timeout, force)
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
    """End every cluster of this user here that no live process holds (but those ipyparallel
    started, which end with its stop), and remove its files; those ended, as seen before."""
    from .watchdog import end_cluster

    ended = []
    for record in upkeep.running():  # not those ipyparallel started: they end with its stop
        if not registry.alive(record.get("holder")) and not record.get("started_outside"):
            ended.append(seen(record))
            end_cluster(record)
    return ended
