"""What a rank holds of a variable, for ``%mpijax pull`` (engine side): the blocks of a
``jax.Array`` sharded across processes, each with its place in the global array, or the whole
value of a per-rank array. Assembled in the notebook by mpinb.client.pull.
"""

from __future__ import annotations

import numpy as np

from ..errors import PullError
from ..wire.values import block_bounds, is_spread
from .code import namespace


def local_parts(name: str, max_bytes: int) -> dict:
    """{"kind": "global", "shape", "dtype", "blocks": [(slices as (start, stop) pairs, array)]}
    for a jax.Array spread over processes (each block once: replica 0), else {"kind": "local",
    "array"}. PullError for an unknown name or more than ``max_bytes`` on this rank."""
    ns = namespace()
    if name not in ns:
        raise PullError(f"pull: no variable {name!r} on this rank")
    value = ns[name]
    if is_spread(value):
        blocks = [(block_bounds(shard.index, tuple(value.shape)), np.asarray(shard.data))
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




def _check_size(name: str, nbytes: int, max_bytes: int) -> None:
    if nbytes > max_bytes:
        raise PullError(f"pull: {name} is {nbytes} bytes on this rank, over the limit of {max_bytes} "
                        "(raise it: %mpijax pull NAME --max-mib M, or MPICluster.pull(name, max_bytes=...))")
