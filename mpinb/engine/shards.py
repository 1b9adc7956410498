"""What a rank holds of a variable, for ``%mpijax pull`` (engine side): the blocks of a
``jax.Array`` sharded across processes, each with its place in the global array, or the whole
value of a per-rank array. Assembled in the notebook by mpinb.cells.pull.
"""

from __future__ import annotations

import numpy as np

from ..wire.values import block_bounds, is_spread
from .code import namespace


def local_parts(name: str, max_bytes: int) -> dict:
    """{"kind": "global", "shape", "dtype", "blocks": [(slices as (start, stop) pairs, array)]}
    for a jax.Array spread over processes (each block once: replica 0), else {"kind": "local",
    "array"}; {"kind": "refused", "cause", ...} for an unknown name, a value that is no array, or
    more than ``max_bytes`` on this rank (the client raises PullError with these facts)."""
    ns = namespace()
    if name not in ns:
        return {"kind": "refused", "cause": "no_variable"}
    value = ns[name]
    if is_spread(value):
        blocks = [(block_bounds(shard.index, tuple(value.shape)), np.asarray(shard.data))
                  for shard in value.addressable_shards if shard.replica_id == 0]
        nbytes = sum(b.nbytes for _, b in blocks)
        if nbytes > max_bytes:
            return _too_large(nbytes, max_bytes)
        return {"kind": "global", "shape": tuple(value.shape), "dtype": str(value.dtype), "blocks": blocks}
    try:
        array = np.asarray(value)
    except Exception as exc:  # noqa: BLE001 - whatever the value is, say it cannot be an array
        return {"kind": "refused", "cause": "not_array", "type_name": type(value).__name__, "problem": str(exc)}
    if array.dtype == object:
        return {"kind": "refused", "cause": "not_array", "type_name": type(value).__name__, "problem": ""}
    if array.nbytes > max_bytes:
        return _too_large(array.nbytes, max_bytes)
    return {"kind": "local", "array": array}


def _too_large(nbytes: int, max_bytes: int) -> dict:
    return {"kind": "refused", "cause": "too_large", "nbytes": nbytes, "limit": max_bytes}
