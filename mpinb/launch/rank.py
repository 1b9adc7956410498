"""Engine wrapper: ``python -m mpinb.launch.rank --status-dir DIR -- ENGINE COMMAND...``.

mpiexec (or srun) starts this wrapper as the rank process; it runs the real engine as a child
(which inherits the MPI environment and becomes the MPI rank), forwards SIGINT/SIGTERM/SIGHUP to
it, and when the child ends abnormally writes one exit record line to stderr (see
:mod:`mpinb.wire.status`): the exit code or the signal that killed it, and what faulthandler wrote.
The MPI launcher carries that line to the notebook's host. That is how a SIGKILL, a segfault or
``os._exit`` of one rank is reported by rank and cause instead of as a generic timeout. DIR is
a directory on the engine's own host (for the fault file). The wrapper exits like its child.

When its parent (the MPI launcher's process on this host) dies, the wrapper kills its engine
(Linux's parent-death signal): a launcher killed without a chance to end its ranks (the
watchdog of a dead kernel, mpinb.cluster.watchdog) leaves no engine running, on any host.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

from ..wire.status import STATUS_DIR_ENV, exit_line, fault_path

EXIT_LINGER = 1.0  # seconds
PR_SET_PDEATHSIG = 1  # prctl(2)
PARENT_DIED = signal.SIGUSR2  # what the kernel sends this wrapper when its parent dies


def signal_on_parent_death(sig: int) -> bool:
    """Ask Linux to send ``sig`` to this process when its parent dies (False where it cannot)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
RANK_VARIABLES = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID")


def rank_from_environment(env=os.environ) -> int | None:
    for name in RANK_VARIABLES:
        value = env.get(name)
        if value is not None and value.strip().isdigit():
            return int(value)
    return None


def read_fault(status_dir: str, rank: int | None) -> str:
    try:
        with open(fault_path(status_dir, rank)) as fh:
            return fh.read()
    except OSError:
        return ""


def ensure_profile_dir(command: list[str], env=os.environ) -> None:
    """ipyparallel tells the engine the notebook host's profile directory ($IPP_PROFILE_DIR or
    --profile-dir); on another host it does not exist (the connection info comes in
    $IPP_CONNECTION_INFO, nothing else is read from it), so make an empty one there rather than
    let the engine refuse to start."""
    if env.get("IPP_PROFILE_DIR"):
        with contextlib.suppress(OSError):
            os.makedirs(env["IPP_PROFILE_DIR"], exist_ok=True)
    path = option(command, "--profile-dir")
    if path:
        with contextlib.suppress(OSError):
            os.makedirs(path, exist_ok=True)


def option(command: list[str], name: str) -> str | None:
    """The value of ``--name=V`` or ``--name V`` in a command line, None when it has none."""
    for i, arg in enumerate(command):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name and i + 1 < len(command):
            return command[i + 1]
    return None


def wait_for_connection_file(command: list[str], env=os.environ) -> None:
    """Where the engine reads the controller's address from a file, not from
    $IPP_CONNECTION_INFO (the local launcher starts the engines with the controller), wait until
    the file is whole: ipyparallel's engine reads it once it exists, and a file still being
    written would end the engine (and the job). At most ``--IPEngine.wait_for_url_file`` seconds;
    then the engine says what it misses."""
    if env.get("IPP_CONNECTION_INFO"):
        return
    profile = env.get("IPP_PROFILE_DIR") or option(command, "--profile-dir")
    cluster_id = env.get("IPP_CLUSTER_ID") or option(command, "--cluster-id")
    if not profile or cluster_id is None:
        return
    path = os.path.join(profile, "security", f"ipcontroller-{cluster_id}-engine.json" if cluster_id
                        else "ipcontroller-engine.json")
    end = time.monotonic() + float(option(command, "--IPEngine.wait_for_url_file") or 10)
    while time.monotonic() < end:
        with contextlib.suppress(OSError, ValueError):
            with open(path) as fh:
                json.load(fh)
            return
        time.sleep(0.02)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 3 or argv[0] != "--status-dir" or "--" not in argv:
        print("usage: python -m mpinb.launch.rank --status-dir DIR -- COMMAND...", file=sys.stderr)
        return 2
    status_dir = argv[1]
    command = argv[argv.index("--") + 1:]
    os.makedirs(status_dir, exist_ok=True)
    ensure_profile_dir(command)
    wait_for_connection_file(command)
    parent = os.getppid()
    # close_fds=False: the child inherits the MPI launcher's PMI socket (PMI_FD) to become the rank
    child = subprocess.Popen(command, close_fds=False, env={**os.environ, STATUS_DIR_ENV: status_dir})

    def forward(signum, _frame):
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    def parent_died(_signum, _frame):
        with contextlib.suppress(ProcessLookupError):
            child.kill()  # SIGKILL: an engine blocked in MPI would not answer another signal

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    signal.signal(PARENT_DIED, parent_died)
    if signal_on_parent_death(PARENT_DIED) and os.getppid() != parent:  # it died before we asked
        parent_died(PARENT_DIED, None)
    returncode = child.wait()
    if returncode != 0:
        rank = rank_from_environment()
        # one write (atomic: the line is under PIPE_BUF): the rank's nanny writes to the same
        # stream, and must not split the line
        data = (exit_line(rank, returncode, read_fault(status_dir, rank)) + "\n").encode()
        while data:
            data = data[os.write(sys.stderr.fileno(), data):]
        # The MPI launcher forwards output through pipes and may stop reading them as soon as it
        # sees a rank end: stay a moment so that the line is read before this process ends.
        time.sleep(EXIT_LINGER)
    return 128 - returncode if returncode < 0 else returncode


if __name__ == "__main__":
    sys.exit(main())
