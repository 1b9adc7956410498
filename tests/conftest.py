"""Suite-wide setup: hermetic IPython/Jupyter directories, and the 64-bit switch as a fixture.

Every cluster, kernel and JupyterLab the tests start writes its profiles, connection files and
runtime files under one temporary directory, never under ``~/.ipython`` or ``~/.jupyter``. The
variables are set before any test imports IPython, and inherited by every process the tests
start (engines, controllers, kernels, the ranks of tests/test_ranks.py).
"""

import os
import shutil
import tempfile

import pytest

HERMETIC_DIRS = {
    "IPYTHONDIR": "ipython",
    "JUPYTER_CONFIG_DIR": "jupyter-config",
    "JUPYTER_DATA_DIR": "jupyter-data",
    "JUPYTER_RUNTIME_DIR": "jupyter-runtime",
    "MPLCONFIGDIR": "matplotlib",
}
_ROOT: list[str] = []


def pytest_configure(config):
    root = tempfile.mkdtemp(prefix="mpinb-tests-")
    _ROOT.append(root)
    for variable, name in HERMETIC_DIRS.items():
        path = os.path.join(root, name)
        os.makedirs(path)
        os.environ[variable] = path


def pytest_unconfigure(config):
    while _ROOT:
        shutil.rmtree(_ROOT.pop(), ignore_errors=True)


@pytest.fixture(scope="module")
def x64():
    """64-bit JAX types for the tests of one module, restored afterwards."""
    import jax

    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)
