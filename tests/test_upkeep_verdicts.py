"""How mpinb.cluster.upkeep judges a cluster's file, without a cluster: a Slurm cluster by its
scheduler (a stand-in ``squeue`` on PATH), a file of an earlier boot, one whose processes are
gone; and what it does (the files of a gone cluster removed, its Slurm job cancelled)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from mpinb.cluster import identity, registry, upkeep


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "600"])
    yield identity.of(proc.pid)
    proc.kill()
    proc.wait()


@pytest.fixture
def slurm(tmp_path, monkeypatch):
    """A stand-in squeue (its answer in ``answer``, its status in ``status``) and scancel (which
    writes down what it was asked to cancel)."""
    answer, status, cancelled = tmp_path / "answer", tmp_path / "status", tmp_path / "cancelled"
    answer.write_text("")
    status.write_text("0")
    (tmp_path / "squeue").write_text(f"#!/bin/sh\ncat {answer}\nexit $(cat {status})\n")
    (tmp_path / "scancel").write_text(f"#!/bin/sh\necho \"$@\" >> {cancelled}\n")
    for name in ("squeue", "scancel"):
        os.chmod(tmp_path / name, 0o700)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    return answer, status, cancelled


def record(cluster_id: str, processes: list[dict], **fields) -> dict:
    made = {"id": cluster_id, "started_at": 0, "boot": identity.boot_id(), "holder": None, "processes": processes,
            "files": [], "workdir": None, **fields}
    registry.write(cluster_id, made)
    return made


def test_a_slurm_cluster_is_judged_by_its_scheduler(sleeper, slurm):
    answer, status, _ = slurm
    job = record("slurm-1", [sleeper], slurm_job_name="mpinb-slurm-1")
    answer.write_text("41 mpinb-slurm-1\n")
    assert upkeep.verdict(job) == upkeep.RUNNING
    status.write_text("1")  # Slurm does not answer: what runs here decides
    assert upkeep.verdict(job) == upkeep.RUNNING
    status.write_text("0")
    answer.write_text("42 another-job\n")
    assert upkeep.verdict(job) == upkeep.JOB_ENDED
    assert all(k.record["id"] != "slurm-1" for k in upkeep.survey() if k.verdict == upkeep.RUNNING)
    assert registry.read("slurm-1") is None


def test_a_file_of_an_earlier_boot_or_without_a_process_is_dropped_and_a_running_one_kept(sleeper, slurm):
    record("old-boot", [{**sleeper, "boot": "an-earlier-boot"}], boot="an-earlier-boot",
           slurm_job_name="mpinb-old-boot")
    record("no-process", [{**sleeper, "ticks": (sleeper["ticks"] or 0) + 1}])
    record("runs", [sleeper], holder=identity.me())  # held by this test: its new watchdog waits
    slurm[0].write_text("7 mpinb-old-boot\n")  # the job outlived the reboot of this host: cancelled
    verdicts = {k.record["id"]: (k.verdict, k.new_watchdog) for k in upkeep.survey()}
    assert verdicts["old-boot"][0] == upkeep.EARLIER_BOOT and verdicts["no-process"][0] == upkeep.NO_PROCESS
    assert verdicts["runs"] == (upkeep.RUNNING, True)  # no watchdog watched it: a new one does
    assert registry.read("old-boot") is None and registry.read("no-process") is None
    assert "7" in slurm[2].read_text().split()
    assert identity.running(sleeper)  # nothing of this boot was killed
    from mpinb.cluster.watchdog import end_cluster, watched

    since = time.monotonic()
    while not watched("runs") and time.monotonic() - since < 30:  # the new watchdog takes the lock
        time.sleep(0.1)
    assert watched("runs")
    end_cluster(registry.read("runs"))  # its new watchdog then exits: nothing left to watch
    assert registry.read("runs") is None
