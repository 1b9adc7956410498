"""A real Slurm on this machine, for the tests: munged, slurmctld and two slurmd ("nodes"
mpinb-n1 and mpinb-n2, both on 127.0.0.1 with their own ports), started without systemd from a
private directory and stopped again. Debian's ``slurmctld slurmd slurm-client munge``
(.ci/run installs them); root only (the daemons run as root, munged as user munge).

    with SlurmTestCluster() as slurm:      # sets SLURM_CONF for srun, salloc, squeue, ...
        job = slurm.allocate(nodes=2, tasks=4)
        ...
    python tests/support/slurm_cluster.py          # start one by hand; Ctrl-C stops it

What the configuration must have (measured here, see ../shared/DESIGN.md): job ids unique across
restarts of the test cluster (FirstJobId from the clock: MPICH derives its shared-memory segment
from the job id, and a reused id attached to a stale segment hangs in MPI_Init), KillOnBadExit=1
(one dead rank ends the step), an Epilog that removes MPICH segments no process maps any more,
every daemon bound to 127.0.0.1 (CommunicationParameters=NoInAddrAny,NoCtldInAddrAny).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NODES = ("mpinb-n1", "mpinb-n2")
CPUS_PER_NODE = 2
PARTITION = "mpinb"
PACKAGES = ("slurmctld", "slurmd", "srun", "munged")

EPILOG = """#!/bin/sh
# MPICH segments that no process maps any more belong to ended jobs
for f in /dev/shm/mpich_shm_*; do
  [ -e "$f" ] || continue
  grep -qsF "$f" /proc/[0-9]*/maps || rm -f "$f"
done
exit 0
"""


def missing() -> str | None:
    """Why a test Slurm cannot run here (None when it can)."""
    absent = [name for name in PACKAGES if not shutil.which(name)]
    if absent:
        return f"Slurm is not installed (no {', '.join(absent)}): apt-get install slurmctld slurmd slurm-client munge"
    if os.geteuid() != 0:
        return "the test Slurm runs its daemons as root"
    if not os.path.exists("/etc/munge/munge.key"):
        return "no /etc/munge/munge.key (Debian's munge package makes one)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ensure_hosts_entries() -> None:
    """The node names resolve to loopback (slurmd and srun look them up)."""
    text = Path("/etc/hosts").read_text()
    names = [name for name in NODES if name not in text.split()]
    if names:
        with open("/etc/hosts", "a") as fh:
            fh.write(f"127.0.0.1 {' '.join(names)}\n")


class SlurmTestCluster:
    def __init__(self):
        self.dir: Path | None = None
        self.procs: list[subprocess.Popen] = []
        self.env_before: str | None = None

    @property
    def conf(self) -> Path:
        return self.dir / "slurm.conf"

    def _write_config(self) -> None:
        d = self.dir
        host = socket.gethostname()
        munge_socket = d / "munge" / "munge.socket"
        lines = [
            "ClusterName=mpinbtest",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={_free_port()}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={munge_socket}",
            f"StateSaveLocation={d}/state",
            f"SlurmdSpoolDir={d}/spool/%n",
            f"SlurmctldPidFile={d}/slurmctld.pid",
            f"SlurmdPidFile={d}/slurmd-%n.pid",
            f"SlurmctldLogFile={d}/log/slurmctld.log",
            f"SlurmdLogFile={d}/log/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/builtin",
            "MpiDefault=none",
            "ReturnToService=2",
            "KillOnBadExit=1",
            "KillWait=2",
            "InactiveLimit=0",
            "MinJobAge=10",
            f"FirstJobId={int(time.time()) % 600_000 * 100 + 1}",  # unique per second, below MaxJobId
            "CommunicationParameters=NoInAddrAny,NoCtldInAddrAny",
            "SlurmdParameters=config_overrides",
            f"Epilog={d}/epilog.sh",
        ]
        for name in NODES:
            lines.append(f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={_free_port()} "
                         f"CPUs={CPUS_PER_NODE} State=UNKNOWN")
        lines.append(f"PartitionName={PARTITION} Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE "
                     "State=UP OverSubscribe=FORCE:4")
        self.conf.write_text("\n".join(lines) + "\n")
        epilog = d / "epilog.sh"
        epilog.write_text(EPILOG)
        epilog.chmod(0o755)

    def _spawn(self, name: str, cmd: list[str], **kwargs) -> None:
        log = open(self.dir / "log" / f"{name}.out", "w")  # noqa: SIM115 - closed with the process
        self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, **kwargs))

    def _start_munge(self) -> None:
        mdir = self.dir / "munge"
        mdir.mkdir(mode=0o755)
        user = pwd.getpwnam("munge")
        os.chown(mdir, user.pw_uid, user.pw_gid)
        self._spawn("munged", ["runuser", "-u", "munge", "--", "munged", "--foreground",
                               f"--socket={mdir}/munge.socket", f"--pid-file={mdir}/munged.pid",
                               f"--log-file={mdir}/munged.log", f"--seed-file={mdir}/munged.seed",
                               "--key-file=/etc/munge/munge.key"])
        self._wait(lambda: (mdir / "munge.socket").exists(), "munged")

    def start(self, timeout: float = 60.0) -> SlurmTestCluster:
        why = missing()
        if why:
            raise RuntimeError(why)
        self.dir = Path(tempfile.mkdtemp(prefix="mpinb-slurm-"))
        self.dir.chmod(0o755)
        for sub in ("state", "spool", "log"):
            (self.dir / sub).mkdir()
        _ensure_hosts_entries()
        self._write_config()
        self.env_before = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = str(self.conf)
        try:
            self._start_munge()
            self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
            for name in NODES:
                self._spawn(f"slurmd-{name}", ["slurmd", "-D", "-N", name, "-f", str(self.conf)])
            self._wait(self._nodes_idle, "the Slurm nodes to be idle", timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _nodes_idle(self) -> bool:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True).stdout
        states = dict(line.split() for line in out.splitlines() if line.strip())
        return all(states.get(name, "").startswith("idle") for name in NODES)

    def _wait(self, ready, what: str, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while not ready():
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{proc.args[0]} ended ({proc.returncode}) while waiting for {what}:\n"
                                       + self.logs())
            if time.monotonic() > end:
                raise RuntimeError(f"waited {timeout:.0f} s for {what}:\n" + self.logs())
            time.sleep(0.1)

    def logs(self, tail: int = 3000) -> str:
        text = ""
        for path in sorted((self.dir / "log").glob("*")):
            text += f"--- {path.name}\n{path.read_text(errors='replace')[-tail:]}\n"
        return text

    def jobs(self) -> list[str]:
        """Job ids Slurm still has pending or running."""
        out = subprocess.run(["squeue", "-h", "-o", "%i %T"], capture_output=True, text=True).stdout
        return [line.split()[0] for line in out.splitlines() if line.strip()]

    def steps(self) -> list[str]:
        out = subprocess.run(["squeue", "-h", "-s", "-o", "%i"], capture_output=True, text=True).stdout
        return [line.strip() for line in out.splitlines() if line.strip() and not line.strip().endswith(".extern")]

    def allocate(self, nodes: int = 2, tasks: int = 4, timeout: int = 30) -> str:
        """An allocation without a shell (``salloc --no-shell``); its job id. Steps join it with
        ``SLURM_JOB_ID`` set, as they do inside ``salloc``."""
        proc = subprocess.run(["salloc", "--no-shell", f"--immediate={timeout}", "-N", str(nodes), "-n", str(tasks),
                               "-J", "mpinb-test-allocation"], capture_output=True, text=True, timeout=timeout + 30)
        for word in (proc.stdout + proc.stderr).split():
            if word.isdigit():
                return word
        raise RuntimeError(f"salloc failed ({proc.returncode}): {proc.stdout}{proc.stderr}\n{self.logs()}")

    def cancel(self, job: str) -> None:
        subprocess.run(["scancel", job], capture_output=True)

    def stop(self) -> None:
        if self.dir is None:
            return
        for job in self.jobs():
            self.cancel(job)
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = []
        if self.env_before is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = self.env_before
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None

    def __enter__(self) -> SlurmTestCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # kill/pkill: still stop the daemons
    with SlurmTestCluster() as slurm:
        print(f"export SLURM_CONF={slurm.conf}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            sys.exit(0)
