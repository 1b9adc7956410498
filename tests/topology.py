"""Where the tests' clusters run: on this host (the default), or, with MPINB_TEST_OTHER_HOST=1,
"on another host" through tests/other_host.sh (own PID, UTS and mount namespaces, private /tmp).
tests/test_other_host.py reruns the fault and output tests that way."""

import os
from pathlib import Path

from mpinb.cluster import MPICluster, default_mpiexec

OTHER_HOST = os.environ.get("MPINB_TEST_OTHER_HOST") == "1"
SCRIPT = Path(__file__).resolve().parent / "other_host.sh"


def make_cluster(n: int) -> MPICluster:
    if not OTHER_HOST:
        return MPICluster(n=n, progress=False)
    return MPICluster(n=n, progress=False, mpi_cmd=[str(SCRIPT), default_mpiexec("mpiexec.gforker")],
                      engine_env={"UCX_TLS": "self,sm"})
