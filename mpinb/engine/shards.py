"""What a rank holds of a variable, for ``%mpijax pull`` (engine side): the blocks of a
``jax.Array`` sharded across processes, each with its place in the global array, or the whole
value of a per-rank array. Assembled in the notebook by mpinb.client.pull.
"""

from __future__ import annotations

import numpy as np

from ..errors import PullError
from .code import namespace


def local_parts(name: str, max_bytes: int) -> dict:
    """{"kind": "global", "shape", "dtype", "blocks": [(slices as (start, stop) pairs, array)]}
    for a jax.Array spread over processes (each block once: replica 0), else {"kind": "local",
    "array"}. PullError for an unknown name or more than ``max_bytes`` on this rank."""
    ns = namespace()
    if name not in ns:
        raise PullError(f"pull: no variable {name!r} on this rank")
    value = ns[name]
    if _is_global(value):
        blocks = [(_bounds(shard.index, value.shape), np.asarray(shard.data))
                  for shard in value.addressable_shards if shard.replica_id == 0]
        _check_size(name, sum(b.nbytes for _, b in blocks), max_bytes)
        return {"kind": "global", "shape": tuple(value.shape), "dtype": str(value.dtype), "blocks": blocks}
    try:
        array = np.asarray(value)
    except Exception as exc:  # noqa: BLE001 - whatever the value is, say it cannot be an array
        raise PullError(f"pull: {name} is a {type(value).__name__}, not an array ({exc})") from None
    if array.dtype == object:
        raise PullError(f"pull: {name} is a {type(value).__name__}, not an array")
    _check_size(name, array.nbytes, max_bytes)
    return {"kind": "local", "array": array}


def _is_global(value) -> bool:
    """A jax.Array that this process does not hold whole (sharded across processes)."""
    return hasattr(value, "addressable_shards") and not getattr(value, "is_fully_addressable", True)


def _bounds(index: tuple, shape: tuple) -> list[tuple[int, int]]:
    """A shard's index (a tuple of slices) as (start, stop) per dimension."""
    return [tuple(s.indices(n)[:2]) for s, n in zip(index, shape, strict=True)]


def _check_size(name: str, nbytes: int, max_bytes: int) -> None:
    if nbytes > max_bytes:
        raise PullError(f"pull: {name} is {nbytes} bytes on this rank, over the limit of {max_bytes} "
                        "(raise it: %mpijax pull NAME --max-mib M, or MPICluster.pull(name, max_bytes=...))")
