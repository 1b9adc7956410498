"""The cluster files (mpinb.cluster.registry) when several processes touch one: changes made at
once are all kept (none written over by another's stale copy), and one process at a time takes
in a cluster that ipyparallel started; another that tries meanwhile is told who does. Real
processes (forked), no cluster."""

from __future__ import annotations

import multiprocessing
import os
import uuid

import pytest

from mpinb.cluster import attach, registry
from mpinb.errors import ClusterHeld

WRITERS, CHANGES = 6, 40


def change_often(cluster_id: str, writer: int) -> None:
    for n in range(1, CHANGES + 1):
        registry.update(cluster_id, **{f"writer{writer}": n})


def test_changes_made_at_once_by_several_processes_are_all_kept():
    cluster_id = f"registry-{uuid.uuid4().hex[:8]}"
    registry.write(cluster_id, {"id": cluster_id})
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=change_often, args=(cluster_id, w)) for w in range(WRITERS)]
    for proc in writers:
        proc.start()
    for proc in writers:
        proc.join(60)
        assert proc.exitcode == 0
    record = registry.read(cluster_id)
    assert {k: v for k, v in record.items() if k.startswith("writer")} == {
        f"writer{w}": CHANGES for w in range(WRITERS)}
    registry.remove(cluster_id)
    assert registry.read(cluster_id) is None and registry.update(cluster_id, late=True) is None
    assert not any(name.startswith(cluster_id) for name in os.listdir(registry.folder()))


def hold_taking(cluster_id: str, held, release) -> None:
    with registry.taking(cluster_id) as other:
        assert other is None
        held.set()
        release.wait(60)


def test_one_process_at_a_time_takes_a_cluster_in_and_another_is_told_who():
    cluster_id = f"taking-{uuid.uuid4().hex[:8]}"
    context = multiprocessing.get_context("fork")
    held, release = context.Event(), context.Event()
    holder = context.Process(target=hold_taking, args=(cluster_id, held, release))
    holder.start()
    try:
        assert held.wait(60)
        with registry.taking(cluster_id) as other:
            assert other is not None and other["pid"] == holder.pid
        record = {"id": cluster_id, "n": 2, "started_outside": True, "holder": None}
        with pytest.raises(ClusterHeld) as refused:
            attach.adopt(object, record)
        assert refused.value.cause == "being_taken"
        assert f"PID {holder.pid}" in str(refused.value) and "--force" in str(refused.value)
    finally:
        release.set()
        holder.join(60)
    assert holder.exitcode == 0
    with registry.taking(cluster_id) as other:  # let go of: this process's turn
        assert other is None
    assert not any(name.startswith(cluster_id) for name in os.listdir(registry.folder()))
