"""The mpinb profile (``mpinb profile``): clusters that ipyparallel starts from it
(``ipcluster start --profile=mpinb``, what the "+ NEW" button of JupyterLab's IPython Parallel
panel runs; tests/test_browser.py presses that button) are mpinb's MPI engines; ``attach`` takes
one in (its ranks checked and set up); it outlives the process that attached and ``clean``, and
ends with ``ipcluster stop``, leaving nothing behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from IPython.paths import get_ipython_dir

from mpinb import MPICluster
from mpinb.cli import main
from mpinb.cluster import attach, identity, profile, registry

BIN = os.path.dirname(sys.executable)


def ipcluster(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([os.path.join(BIN, "ipcluster"), *args], capture_output=True, text=True, timeout=180,
                          check=True)


def test_the_profile_is_written_once_and_another_s_file_is_kept(tmp_path, capsys):
    where, written = profile.write("mpinb-test", ipython_dir=str(tmp_path))
    assert written and where == str(tmp_path / "profile_mpinb-test")
    assert profile.made_by_mpinb(where)
    assert profile.write("mpinb-test", ipython_dir=str(tmp_path)) == (where, True)  # the same: written again
    config = tmp_path / "profile_mpinb-test" / "ipcluster_config.py"
    config.write_text("c = get_config()\n")
    assert profile.write("mpinb-test", ipython_dir=str(tmp_path)) == (where, False)
    assert config.read_text() == "c = get_config()\n" and not profile.made_by_mpinb(where)
    assert profile.write("mpinb-test", ipython_dir=str(tmp_path), force=True) == (where, True)


def test_the_command_line_says_what_to_do_next(capsys):
    assert main(["profile"]) == 0
    said = capsys.readouterr().out
    assert "+ NEW with profile mpinb" in said and "%mpijax attach CLUSTER_ID" in said
    assert profile.made_by_mpinb(os.path.join(get_ipython_dir(), "profile_mpinb"))


@pytest.fixture
def started_by_ipcluster():
    profile.write()
    ipcluster("start", "--profile=mpinb", "-n", "2", "--cluster-id=from-profile", "--daemonize")
    deadline = time.monotonic() + 120
    while "from-profile" not in attach.profile_clusters() and time.monotonic() < deadline:
        time.sleep(0.5)
    yield "from-profile"
    subprocess.run([os.path.join(BIN, "ipcluster"), "stop", "--profile=mpinb", "--cluster-id=from-profile"],
                   capture_output=True, timeout=180, check=False)


def test_a_cluster_started_from_the_profile_is_attached_outlives_its_holder_and_ends_with_ipcluster_stop(
        started_by_ipcluster):
    cluster_id = started_by_ipcluster
    listed = [line for line in attach_listing() if line.startswith(cluster_id)]
    assert listed and "started by ipyparallel (profile mpinb), not attached yet" in listed[0], listed
    holder = subprocess.run([sys.executable, "-c", "import sys\nfrom mpinb import MPICluster\n"
                             "c = MPICluster.attach(sys.argv[1])\n"
                             "r = c.run_cell('from mpi4py import MPI\\nMPI.COMM_WORLD.Get_size()')\n"
                             "print('SIZES', {rec.result['repr'] for rec in r.records.values()}, c.engines[0]['rank'])",
                             cluster_id], capture_output=True, text=True, timeout=300, check=True)
    assert "SIZES {'2'} 0" in holder.stdout, holder.stdout + holder.stderr
    record = registry.read(cluster_id)
    assert record["started_outside"] and not registry.alive(record["holder"])  # the holder has ended
    assert cluster_id not in [s["id"] for s in attach.clean()] and registry.read(cluster_id)  # clean leaves it
    cluster = MPICluster.attach(cluster_id)  # a second kernel takes it in, its engines set up already
    assert cluster.run_cell("1 + 1").ok
    cluster.stop()  # this notebook's stop ends it too
    deadline = time.monotonic() + 30
    while any(identity.running(e) for e in record["processes"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(identity.running(e) for e in record["processes"])
    assert registry.read(cluster_id) is None and cluster_id not in attach.profile_clusters()


def test_ipcluster_stop_ends_an_attached_cluster_and_the_next_cell_says_so(started_by_ipcluster):
    cluster = MPICluster.attach(started_by_ipcluster)
    record = registry.read(started_by_ipcluster)
    ipcluster("stop", "--profile=mpinb", f"--cluster-id={started_by_ipcluster}")
    with pytest.raises(Exception, match="the cluster was stopped outside this notebook"):
        cluster.run_cell("1")
    assert not any(identity.running(e) for e in record["processes"])


def attach_listing() -> list[str]:
    from mpinb.view.cluster_words import listing_words

    return listing_words(attach.listing()).splitlines()
