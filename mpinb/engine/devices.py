"""Which devices an engine's JAX uses (``MPICluster(devices=...)``, ``--devices``), set before JAX
starts:

- ``cpu`` (the default): JAX on the CPU (``JAX_PLATFORMS=cpu``, set by the client): mpinb's
  collectives move arrays in host memory, and on an accelerator host every rank would otherwise
  take JAX's default platform, all of them on device 0;
- ``per-rank``: each rank sees one local accelerator, the one numbered by its rank among the
  ranks on its host, through the platform's visibility variables (``VISIBILITY``); a variable
  the user set is left alone. For JAX's own collectives (``--jax-distributed``) and per-rank
  computation; mpinb's collectives still need their arrays on the CPU.
"""

from __future__ import annotations

import os

from ..options.cluster_options import DEVICES

#: what makes only local device I visible, per platform (JAX's documented variables; for TPU,
#: one chip per process on a host)
VISIBILITY = {
    "cuda": {"CUDA_VISIBLE_DEVICES": "{i}"},
    "rocm": {"HIP_VISIBLE_DEVICES": "{i}", "ROCR_VISIBLE_DEVICES": "{i}"},
    "tpu": {"TPU_VISIBLE_CHIPS": "{i}", "TPU_PROCESS_BOUNDS": "1,1,1", "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1"},
}


def placement(devices: str) -> str:
    """``devices`` checked (ValueError names the choices)."""
    if devices not in DEVICES:
        raise ValueError(f"devices must be one of {', '.join(DEVICES)}, got {devices!r}")
    return devices


def local_rank(comm) -> int:
    """This rank's number among the ranks of its host."""
    from mpi4py import MPI

    host = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return host.Get_rank()
    finally:
        host.Free()


def place(devices: str, comm, env=os.environ) -> int | None:
    """Before JAX starts: with ``per-rank``, make the local rank's device the only one of each
    platform visible (collective: every rank calls it). Returns the local rank, or None."""
    if placement(devices) != "per-rank":
        return None
    index = local_rank(comm)
    for variables in VISIBILITY.values():
        for name, value in variables.items():
            env.setdefault(name, value.format(i=index))
    return index


def describe() -> dict:
    """The platform and devices this engine's JAX uses (after it started)."""
    import jax

    return {"platform": jax.default_backend(), "devices": [str(d) for d in jax.local_devices()]}
