"""``MPICluster.pull`` (notebook side): a variable of every rank as one NumPy array. A
``jax.Array`` sharded across processes is assembled from the blocks the ranks hold, in index
order whatever the sharding; per-rank arrays are stacked along a new leading axis in rank order.
"""

from __future__ import annotations

import numpy as np

from ..errors import PullError
from .health import first_remote_error

#: the default limit on what a pull may bring into the notebook
DEFAULT_MAX_BYTES = 256 << 20


def pull(cluster, name: str, max_bytes: int = DEFAULT_MAX_BYTES) -> np.ndarray:
    """Every rank's ``name`` as one array (see the module's docstring); PullError otherwise."""
    from ipyparallel.error import CompositeError

    from ..engine.shards import local_parts

    cluster.ensure_ready()
    try:
        parts = cluster.on_engines(local_parts, name, max_bytes).get()
    except CompositeError as exc:
        rank, ename, evalue = first_remote_error(exc)
        what = evalue if ename == "PullError" else f"{ename}: {evalue}"
        raise PullError(f"rank {rank}: {what}") from None
    return assemble(name, parts, max_bytes)


def assemble(name: str, parts: list[dict], max_bytes: int = DEFAULT_MAX_BYTES) -> np.ndarray:
    """The ranks' parts (in rank order) as one array."""
    kinds = {p["kind"] for p in parts}
    if kinds == {"global"}:
        return _global(name, parts, max_bytes)
    if kinds != {"local"}:
        raise PullError(f"pull: {name} is a jax.Array spread over processes on some ranks only")
    arrays = [p["array"] for p in parts]
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        listed = ", ".join(str(a.shape) for a in arrays)
        raise PullError(f"pull: {name} has different shapes on the ranks ({listed}); they cannot be stacked")
    total = sum(a.nbytes for a in arrays)
    if total > max_bytes:
        raise PullError(f"pull: {name} is {total} bytes on the ranks together, over the limit of {max_bytes}")
    return np.stack(arrays)


def _global(name: str, parts: list[dict], max_bytes: int) -> np.ndarray:
    shape, dtype = tuple(parts[0]["shape"]), np.dtype(parts[0]["dtype"])
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if size > max_bytes:
        raise PullError(f"pull: {name} is {size} bytes as a global array, over the limit of {max_bytes}")
    out = np.empty(shape, dtype)
    filled = np.zeros(shape, bool)
    for part in parts:
        for bounds, block in part["blocks"]:
            where = tuple(slice(a, b) for a, b in bounds)
            out[where] = block
            filled[where] = True
    if not filled.all():
        raise PullError(f"pull: the ranks hold only {int(filled.sum())} of {filled.size} elements of {name}")
    return out

