"""JAX's own multi-process runtime on the engines (engine side), for ``--jax-distributed``
clusters: every rank calls ``jax.distributed.initialize`` at setup, before anything else starts
JAX's backend, so that ``jax.process_count()`` is the number of ranks, ``jax.devices()`` lists
every rank's devices, and ``shard_map``/``lax`` collectives run across the ranks (over Gloo on
CPU). Also the number of CPU devices each process has (``--local-devices K``).

The coordinator runs in rank 0 on a free port of rank 0's host, chosen there and shared over
MPI. JAX's coordination service has no authentication: it listens on loopback when every rank
runs on rank 0's host, else on the address rank 0's host name resolves to (and only there).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket

from ..errors import EngineSetupError

LOOPBACK = "127.0.0.1"


def set_local_devices(count: int) -> None:
    """Give this process ``count`` CPU devices; before JAX's backend starts."""
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", count)
    except AttributeError:  # JAX before the option: XLA's flag, read when the backend starts
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={count}".strip()


def coordinator_address(comm) -> str:
    """``host:port`` of the coordination service, chosen on rank 0 and the same on every rank."""
    hosts = comm.allgather(socket.gethostname())
    address = None
    if comm.Get_rank() == 0:
        host = LOOPBACK if set(hosts) == {hosts[0]} else reachable_address()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            address = f"{host}:{probe.getsockname()[1]}"
    return comm.bcast(address, root=0)


def reachable_address() -> str:
    """An address of this host that other hosts can reach: the first non-loopback IPv4 address
    its name resolves to."""
    name = socket.gethostname()
    try:
        infos = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)
    except OSError as exc:
        raise EngineSetupError(f"--jax-distributed: rank 0's host name {name!r} does not resolve ({exc}); "
                               "the other ranks could not reach JAX's coordinator") from exc
    for info in infos:
        address = info[4][0]
        if not ipaddress.ip_address(address).is_loopback:
            return address
    raise EngineSetupError(f"--jax-distributed: rank 0's host name {name!r} resolves only to loopback, "
                           "which the ranks on other hosts cannot reach (fix /etc/hosts on rank 0's host)")


def initialize(comm, timeout: int = 120) -> None:
    """``jax.distributed.initialize`` on every rank (collective), then the backend started on all
    of them together (it exchanges the processes' devices)."""
    import jax

    if getattr(jax.distributed, "is_initialized", lambda: False)():
        return
    with contextlib.suppress(AttributeError):  # a JAX without the option has Gloo only
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    address = coordinator_address(comm)
    jax.distributed.initialize(coordinator_address=address, num_processes=comm.Get_size(),
                               process_id=comm.Get_rank(), coordinator_bind_address=address,
                               initialization_timeout=timeout)
    jax.devices()


def describe(jax_distributed: bool, local_devices: int | None) -> dict:
    """What this process's JAX runtime is, for the cluster's status."""
    import jax

    if not jax_distributed and local_devices is None:
        return {}
    return {"jax_processes": jax.process_count(), "local_devices": jax.local_device_count(),
            "process_index": jax.process_index()}
