"""Which process a cluster's file names (mpinb.cluster.identity): a zombie, a process that took a
PID, and a process of an earlier boot are not the process recorded; a live one is."""

from __future__ import annotations

import os
import subprocess
import time

import psutil

from mpinb.cluster import identity, registry


def test_a_live_process_runs_and_a_zombie_does_not():
    child = subprocess.Popen(["sleep", "600"])
    try:
        entry = identity.of(child.pid)
        assert entry is not None and identity.running(entry) and registry.alive(entry)
        child.kill()  # not reaped: a zombie
        while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.01)
        assert not identity.running(entry) and not registry.alive(entry)
        assert identity.of(child.pid) is None
    finally:
        child.kill()
        child.wait()
    assert not identity.running(entry)  # reaped


def test_another_process_with_the_pid_is_not_the_one_recorded():
    me = identity.me()
    assert identity.running(me)
    if me["ticks"] is not None:
        assert not identity.running({**me, "ticks": me["ticks"] - 1})
    assert not identity.running({**me, "ticks": None, "started": me["started"] - 5})


def test_an_entry_of_another_boot_names_no_process_of_this_one():
    me = identity.me()
    if identity.boot_id() is None:
        return  # no boot id on this system: nothing to compare
    assert not identity.running({**me, "boot": "another-boot"})
    assert not identity.this_boot({"boot": "another-boot"})
    assert identity.this_boot({"boot": identity.boot_id()}) and identity.this_boot({})


def test_a_damaged_entry_names_no_process():
    assert not identity.running(None) and not identity.running({})
    assert not identity.running({"pid": os.getpid()})  # no start to compare
    assert not identity.running({"pid": "1", "ticks": 0})
