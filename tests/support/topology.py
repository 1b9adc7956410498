"""Where the tests' clusters run: on this host (the default); with MPINB_TEST_OTHER_HOST=1 "on
another host" through tests/support/other_host.sh (own PID, UTS and mount namespaces, private /tmp);
with MPINB_TEST_SLURM=1 as a step of the Slurm allocation in SLURM_JOB_ID (tests/support/slurm_cluster.py
makes one: two Slurm nodes on this machine). tests/test_other_host.py and tests/test_slurm.py
rerun the fault and output tests those ways."""

import os
from pathlib import Path

from mpinb.cluster.mpi_cluster import MPICluster
from mpinb.launch.launchers import default_mpiexec

OTHER_HOST = os.environ.get("MPINB_TEST_OTHER_HOST") == "1"
SLURM = os.environ.get("MPINB_TEST_SLURM") == "1"
SCRIPT = Path(__file__).resolve().parent / "other_host.sh"


def make_cluster(n: int, **options) -> MPICluster:
    """A cluster of ``n`` ranks where the tests run (``options``: MPICluster's others), without
    a standby unless asked (tests/test_standby.py tests it; elsewhere it would double the
    engines the suite starts)."""
    options.setdefault("standby", False)
    if SLURM:
        # UCX_NET_DEVICES=lo: the test's Slurm nodes are this machine
        return MPICluster(n=n, progress=False, launcher="slurm", engine_env={"UCX_NET_DEVICES": "lo"}, **options)
    if OTHER_HOST:
        return MPICluster(n=n, progress=False, mpi_cmd=[str(SCRIPT), default_mpiexec(local=True)],
                          engine_env={"UCX_TLS": "self,sm"}, **options)
    return MPICluster(n=n, progress=False, **options)
