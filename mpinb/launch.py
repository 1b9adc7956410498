"""Engine wrapper: ``python -m mpinb.launch --status-dir DIR -- ENGINE COMMAND...``.

mpiexec starts this wrapper as the rank process; it runs the real engine as a child (which
inherits the MPI environment and becomes the MPI rank), forwards SIGINT/SIGTERM/SIGHUP to it,
and when the child ends abnormally writes ``DIR/exit-rank{R}.json`` with its exit code or the
signal that killed it. That is how a SIGKILL, a segfault or ``os._exit`` of one rank is reported
by rank and cause instead of as a generic timeout. The wrapper exits like its child.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

RANK_VARIABLES = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID")


def rank_from_environment(env=os.environ) -> int | None:
    for name in RANK_VARIABLES:
        value = env.get(name)
        if value is not None and value.strip().isdigit():
            return int(value)
    return None


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by signal {-returncode} ({name})"
    return f"exited with code {returncode}"


def write_exit_record(status_dir: str, rank: int | None, pid: int, returncode: int) -> str:
    record = {"rank": rank, "pid": pid, "returncode": returncode,
              "signal": -returncode if returncode < 0 else None,
              "description": describe_exit(returncode), "time": time.time()}
    path = os.path.join(status_dir, f"exit-rank{rank if rank is not None else pid}.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(record, fh)
    os.replace(tmp, path)
    return path


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 3 or argv[0] != "--status-dir" or "--" not in argv:
        print("usage: python -m mpinb.launch --status-dir DIR -- COMMAND...", file=sys.stderr)
        return 2
    status_dir = argv[1]
    command = argv[argv.index("--") + 1:]
    os.makedirs(status_dir, exist_ok=True)
    # close_fds=False: the child inherits the MPI launcher's PMI socket (PMI_FD) to become the rank
    child = subprocess.Popen(command, close_fds=False)

    def forward(signum, _frame):
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    returncode = child.wait()
    if returncode != 0:
        write_exit_record(status_dir, rank_from_environment(), child.pid, returncode)
    return 128 - returncode if returncode < 0 else returncode


if __name__ == "__main__":
    sys.exit(main())
