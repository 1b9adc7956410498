"""``devices="per-rank"``: each rank's visibility variables name its rank on its host (here
every rank shares one host, so that is its world rank); a variable the user set is kept."""

import pytest
from mpi4py import MPI

from mpinb.engine import devices


def test_per_rank_makes_the_local_rank_s_device_the_only_visible_one(world):
    rank, _ = world
    env = {"HIP_VISIBLE_DEVICES": "7"}  # set by the user: left alone
    assert devices.place("per-rank", MPI.COMM_WORLD, env) == rank
    assert env["CUDA_VISIBLE_DEVICES"] == str(rank) and env["TPU_VISIBLE_CHIPS"] == str(rank)
    assert env["ROCR_VISIBLE_DEVICES"] == str(rank) and env["HIP_VISIBLE_DEVICES"] == "7"
    assert env["TPU_PROCESS_BOUNDS"] == "1,1,1" and env["TPU_CHIPS_PER_PROCESS_BOUNDS"] == "1,1,1"


def test_cpu_changes_nothing_and_an_unknown_placement_is_refused(world):
    env = {}
    assert devices.place("cpu", MPI.COMM_WORLD, env) is None and env == {}
    with pytest.raises(ValueError, match="devices must be one of cpu, per-rank, got 'gpu'"):
        devices.place("gpu", MPI.COMM_WORLD, env)
