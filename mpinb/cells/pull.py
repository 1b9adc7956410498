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
        raise PullError(cause="on_rank", name=name, rank=rank, ename=ename, evalue=evalue) from None
    refused = [(rank, part) for rank, part in enumerate(parts) if part["kind"] == "refused"]
    if refused:
        rank, part = refused[0]
        raise PullError(cause="refused_on_rank", name=name, rank=rank, refusal=part)
    return assemble(name, parts, max_bytes)


def assemble(name: str, parts: list[dict], max_bytes: int = DEFAULT_MAX_BYTES) -> np.ndarray:
    """The ranks' parts (in rank order) as one array."""
    kinds = {p["kind"] for p in parts}
    if kinds == {"global"}:
        return _global(name, parts, max_bytes)
    if kinds != {"local"}:
        raise PullError(cause="spread_on_some", name=name)
    arrays = [p["array"] for p in parts]
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise PullError(cause="shapes_differ", name=name, shapes=[a.shape for a in arrays])
    total = sum(a.nbytes for a in arrays)
    if total > max_bytes:
        raise PullError(cause="too_large_stacked", name=name, nbytes=total, limit=max_bytes)
    return np.stack(arrays)


def _global(name: str, parts: list[dict], max_bytes: int) -> np.ndarray:
    shape, dtype = tuple(parts[0]["shape"]), np.dtype(parts[0]["dtype"])
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if size > max_bytes:
        raise PullError(cause="too_large_global", name=name, nbytes=size, limit=max_bytes)
    out = np.empty(shape, dtype)
    filled = np.zeros(shape, bool)
    for part in parts:
        for bounds, block in part["blocks"]:
            where = tuple(slice(a, b) for a, b in bounds)
            out[where] = block
            filled[where] = True
    if not filled.all():
        raise PullError(cause="missing_elements", name=name, held=int(filled.sum()), size=filled.size)
    return out

