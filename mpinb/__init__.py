"""mpinb: a Jupyter-first interactive environment for distributed JAX over MPI.

``import mpinb`` is cheap and needs neither IPython nor widgets nor a kernel. The parts:

* ``mpinb.mpi``          MPI collectives callable inside ``jax.jit`` (mpi4jax-compatible API)
* ``%load_ext mpinb``    registers the ``%mpijax`` / ``%%mpijax`` magics (mpinb.magic)
* ``mpinb.MPICluster``   the same from Python: ``MPICluster(n=4).start().run_cell(code)``

The code is arranged by side of the wire and by lifecycle: ``cluster/`` (a cluster's life, on
the notebook's side), ``cells/`` (running cells on it), ``launch/`` (starting the MPI job),
``engine/`` (each rank's side), ``wire/`` (what crosses), ``analysis/`` (pure functions over what
crossed, for every side) and ``view/`` (every word a user reads); ``mpi/`` is the collective
library. The documentation's developer API (docs/developer-api.md) lists the modules.
"""

__all__ = ["CellOptions", "ClusterOptions", "MPICluster", "ViewOptions", "__version__"]


def _version() -> str:
    """The installed distribution's version (pyproject.toml's, the one place it is written);
    ``0+unknown`` for a source tree that was never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mpinb")
    except PackageNotFoundError:
        return "0+unknown"


def __getattr__(name: str):
    """``mpinb.__version__``, ``mpinb.MPICluster`` and the option classes, computed or imported
    on first use."""
    if name == "__version__":
        return _version()
    if name == "MPICluster":
        from .cluster.mpi_cluster import MPICluster

        return MPICluster
    if name in ("CellOptions", "ViewOptions"):
        from .options import cell_options

        return getattr(cell_options, name)
    if name == "ClusterOptions":
        from .options.cluster_options import ClusterOptions

        return ClusterOptions
    raise AttributeError(f"module 'mpinb' has no attribute {name!r}")


def load_ipython_extension(ipython):  # pragma: no cover - exercised through IPython
    from .magic import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython):  # pragma: no cover
    from .magic import unload_ipython_extension as _unload

    _unload(ipython)
