"""An engine's start (engine side): the per-rank HLO dump directory (set before JAX
initialises), the collective library loaded in checked mode, MPICH's shared-memory name
unlinked, faulthandler's file, the MPI watch started on the thread that runs cells, the signal
that withdraws a waiting receive (mpinb.engine.rank_release), and the
thread that publishes, while a cell runs, which MPI call this rank is blocked in (an mpinb
collective, or a call the program makes itself: mpinb.engine.mpi4py_waits; mpinb.wire.status).
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import socket
import sys
import threading
import time

from ..wire.status import STATUS_DIR_ENV, fault_path, status_message
from . import devices as devices_module
from . import jax_processes, mpi4py_waits, rank_release, settle, stall
from .code import execute_code
from .hlo_capture import forget_hlo_modules
from .state import STATE

STATUS_PERIOD = 0.2


def _publish_status() -> None:
    """Send {"inflight": the MPI call this rank waits in, or None} to the notebook over the
    engine's IOPub connection, as data of the cell that runs now (no shared filesystem)."""
    from ipyparallel.datapub import publish_data
    from mpi4py import MPI

    from mpinb import mpi

    where = stall.where_now() if STATE.running is not None else None
    inflight = mpi.inflight() or mpi4py_waits.inflight(MPI.Wtime())  # mpinb's own op, else MPI called directly
    publish_data(status_message(inflight, STATE.running, where))


def _status_loop() -> None:
    """Publish, while a cell runs, which MPI call this rank is blocked in (read by the client
    when a rank fails, a timeout expires or the user interrupts). A thread: the main thread may
    be blocked inside MPI, which releases the GIL."""
    was_running = False
    while True:
        running = STATE.running is not None
        if running or was_running:
            with contextlib.suppress(Exception):  # status is best effort: never kill the engine
                _publish_status()
        was_running = running
        time.sleep(STATUS_PERIOD)


def setup(dump_root: str | None, status_dir: str | None = None, checked: bool = True,
          jax_distributed: bool = False, local_devices: int | None = None, devices: str = "cpu") -> dict:
    """Prepare this engine. Must run before JAX is imported for HLO capture to work. Its fault
    report goes to the folder its rank wrapper named ($MPINB_STATUS_DIR), else to ``status_dir``.

    checked: turn on the collective library's checked mode (ranks agree on every collective
    before running it), the default for interactive use.
    jax_distributed: start JAX's multi-process runtime across the ranks (collective).
    local_devices: CPU devices of this process (default JAX's: one).
    devices: 'cpu' or 'per-rank' (mpinb.engine.devices), before JAX starts."""
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    size = MPI.COMM_WORLD.Get_size()
    jax_was_loaded = "jax" in sys.modules
    local_index = devices_module.place(devices, MPI.COMM_WORLD)
    dump = None
    if dump_root:
        dump = os.path.join(dump_root, f"rank{rank}")
        os.makedirs(dump, exist_ok=True)
        flags = os.environ.get("XLA_FLAGS", "")
        if "--xla_dump_to" not in flags:
            os.environ["XLA_FLAGS"] = f"{flags} --xla_dump_to={dump} --xla_dump_hlo_as_text".strip()
    import jax

    if local_devices is not None:
        jax_processes.set_local_devices(local_devices)
    if jax_distributed:
        jax_processes.initialize(MPI.COMM_WORLD)
    import mpinb.mpi  # registers the collective library
    from mpinb.mpi import ordering

    ordering.end_walks_at(execute_code)  # a cell's eager collectives look for a host callback down to it
    mpinb.mpi.set_checked(checked)
    mpinb.mpi.default_comm()  # clone COMM_WORLD now, on every rank, not inside some later cell
    unlinked = _unlink_mpi_shared_memory()
    status_dir = os.environ.get(STATUS_DIR_ENV) or status_dir  # the rank wrapper's own, where it reads
    STATE.rank, STATE.size, STATE.dump, STATE.status_dir = rank, size, dump, status_dir
    STATE.hlo_ok, STATE.cells, STATE.running = bool(dump) and not jax_was_loaded, 0, None
    described = devices_module.describe()  # starts JAX's backend
    settle.dispatched_work("setup")  # compiles the fence that ends each cell now, not in the first cell
    forget_hlo_modules()
    watched = mpi4py_waits.start()  # this thread runs the cells
    wake = rank_release.install()  # a signal frees this rank from a receive (mpinb.engine.rank_release)
    if status_dir:
        os.makedirs(status_dir, exist_ok=True)
        STATE.fault_file = open(fault_path(status_dir, rank), "w")  # noqa: SIM115 - lives with the engine
        faulthandler.enable(STATE.fault_file, all_threads=False)
        if STATE.status_thread is None:
            STATE.status_thread = threading.Thread(target=_status_loop, name="mpinb-status", daemon=True)
            STATE.status_thread.start()
    return {
        "rank": rank,
        "size": size,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "jax": jax.__version__,
        "hlo_capture": STATE.hlo_ok,
        "mpi_watch": watched,
        "wake_signal": wake,
        "checked": checked,
        "shm_unlinked": unlinked,
        **jax_processes.describe(jax_distributed, local_devices),
        **described,
        "local_rank": local_index,
    }


MPI_SHM_PREFIX = "/dev/shm/mpich_shm_"  # noqa: S108 - MPICH's name, read from /proc/self/maps


def _unlink_mpi_shared_memory() -> list[str]:
    """Unlink the name of the shared-memory segment MPICH made for this job, once every rank
    has it mapped (after a barrier): the memory stays until the last rank ends, however it
    ends, and no name is left in /dev/shm for a killed job (3 MB each) that a later job could
    attach to. Segments made later (shared-memory windows) keep their names."""
    from mpi4py import MPI

    MPI.COMM_WORLD.Barrier()
    names = set()
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                at = line.find(MPI_SHM_PREFIX)
                if at >= 0:
                    names.add(line[at:].split()[0])
    except OSError:
        return []
    for name in sorted(names):
        with contextlib.suppress(OSError):  # another rank of this host was first
            os.unlink(name)
    MPI.COMM_WORLD.Barrier()
    return sorted(os.path.basename(n) for n in names)
