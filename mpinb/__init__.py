"""mpinb: a Jupyter-first interactive environment for distributed JAX over MPI.

``import mpinb`` is cheap and needs neither IPython nor widgets nor a kernel. The parts:

* ``mpinb.mpi``      MPI collectives callable inside ``jax.jit`` (mpi4jax-compatible API)
* ``%load_ext mpinb`` registers the ``%mpijax`` / ``%%mpijax`` magics
"""

__version__ = "0.1.0"


def load_ipython_extension(ipython):  # pragma: no cover - exercised through IPython
    from .magic import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython):  # pragma: no cover
    from .magic import unload_ipython_extension as _unload

    _unload(ipython)
