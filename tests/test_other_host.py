"""The fault and output tests again, with the MPI job "on another host": tests/other_host.sh puts
it in its own PID, UTS and mount namespaces (other PIDs, another hostname, a private /tmp and
/dev/shm), sharing only loopback with the notebook, which itself runs in a PID namespace of its
own, so that a signal sent to a wrong PID cannot reach this machine's other processes. Every
fault case must pass there too: nothing may rely on a shared filesystem or on local PIDs.

Needs root (unshare); .ci/run runs as root and sets MPINB_REQUIRE_NAMESPACES=1 so that this can
never be skipped there.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
TIMEOUT = 900


def _can_unshare() -> str | None:
    if not shutil.which("unshare"):
        return "no unshare command"
    if os.geteuid() != 0:
        return "unshare of PID and mount namespaces needs root"
    return None


def test_fault_and_output_tests_pass_with_the_engines_on_another_host(tmp_path):
    why = _can_unshare()
    if why:
        if os.environ.get("MPINB_REQUIRE_NAMESPACES") == "1":
            pytest.fail(f"MPINB_REQUIRE_NAMESPACES=1 but {why}")
        pytest.skip(why)
    env = dict(os.environ, MPINB_TEST_OTHER_HOST="1")
    cmd = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "pytest", "-q",
           "-p", "no:cacheprovider", str(HERE / "test_faults.py"), str(HERE / "test_output.py")]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env, cwd=HERE.parent)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"no result after {TIMEOUT} s:\n{(exc.stdout or '')[-3000:]}")
    tail = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, tail
    assert " passed" in proc.stdout and "failed" not in proc.stdout and "skipped" not in proc.stdout, tail
