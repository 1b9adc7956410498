"""The fault and output tests again, with the MPI job "on another host": tests/support/other_host.sh puts
it in its own PID, UTS and mount namespaces (other PIDs, another hostname, a private /tmp and
/dev/shm), sharing only loopback with the notebook, which itself runs in a PID namespace of its
own, so that a signal sent to a wrong PID cannot reach this machine's other processes. Every
fault case must pass there too: nothing may rely on a shared filesystem or on local PIDs.

Needs root (unshare); .ci/run runs as root and sets MPINB_REQUIRE_NAMESPACES=1 so that this can
never be skipped there.
"""

import os
import shutil

from support.require import require
from support.rerun import JAX_NATIVE, pytest_passes

TIMEOUT = 900


#: the rerun in a PID namespace of its own; --kill-child: a rerun that times out (its unshare
#: killed) takes every process of it along, its clusters too
OWN_PIDS = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]


def _can_unshare() -> str | None:
    if not shutil.which("unshare"):
        return "no unshare command"
    if os.geteuid() != 0:
        return "unshare of PID and mount namespaces needs root"
    return None


def test_fault_and_output_tests_pass_with_the_engines_on_another_host(tmp_path):
    require("namespaces", _can_unshare())
    env = dict(os.environ, MPINB_TEST_OTHER_HOST="1")
    pytest_passes(["test_faults.py", "test_output.py", "test_lifetime.py"], env,
                  prefix=OWN_PIDS, timeout=TIMEOUT)


def test_the_stall_report_and_pull_of_a_jax_distributed_cluster_on_another_host():
    require("namespaces", _can_unshare())
    env = dict(os.environ, MPINB_TEST_OTHER_HOST="1")
    pytest_passes(JAX_NATIVE, env, prefix=OWN_PIDS, timeout=TIMEOUT)
