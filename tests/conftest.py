"""Suite-wide setup: hermetic IPython/Jupyter directories, each test file's kind (its marker),
and the 64-bit switch as a fixture.

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

# Each test file's kind, registered as markers in pyproject.toml: ``pytest -m pure`` runs the
# fast tests that start nothing; a new test file must be listed here.
KINDS = {
    "pure": ["test_compare.py", "test_display.py", "test_hlo.py", "test_layout.py", "test_one_voice.py",
             "test_status.py",
             "test_validation_properties.py", "test_cluster_config.py", "test_library.py",
             "test_stall.py", "test_package.py", "test_start_checks.py", "test_deadlock_proof.py",
             "test_freeing.py", "test_by_name.py", "test_docs_sources.py", "test_divergence.py",
             "test_restarted_view.py", "test_identity.py", "test_upstream_stall.py",
             "test_bounded_records.py", "test_upkeep_verdicts.py",
             "test_abi.py", "test_cluster_options.py", "test_environment.py", "test_registry.py"],
    # the collective suite: in this process (world size 1), and on 2 and 4 ranks by test_ranks.py
    "multi_rank": ["collectives/", "test_ranks.py", "test_mpi_watch.py", "test_shared_cores.py"],
    "cluster": ["test_magic.py", "test_faults.py", "test_output.py", "test_soak.py", "test_notebooks.py",
                "test_jax_native.py", "test_lifetime.py", "test_cluster_upkeep.py", "test_deadlocks_on_cluster.py",
                "test_controller.py", "test_divergence_cells.py", "test_headless.py", "test_outside_end.py",
                "test_profile.py", "test_docs_snippets.py", "test_standby.py"],
    "topology": ["test_other_host.py", "test_slurm.py"],
    "browser": ["test_browser.py"],
    # the built documentation site in a browser: run last, after the notebook tests saved the runs it shows
    "docs": ["test_docs_site.py"],
}


def pytest_configure(config):
    root = tempfile.mkdtemp(prefix="mpinb-tests-")
    _ROOT.append(root)
    for variable, name in HERMETIC_DIRS.items():
        path = os.path.join(root, name)
        os.makedirs(path)
        os.environ[variable] = path


def kind_of(path: str) -> str:
    """The kind of a test file, by its path under tests/."""
    for kind, names in KINDS.items():
        if any(path.startswith(n) if n.endswith("/") else path == n for n in names):
            return kind
    raise pytest.UsageError(f"tests/{path}: not in the KINDS table of tests/conftest.py")


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(os.path.abspath(__file__))
    kinds = {}
    for item in items:
        path = os.path.relpath(str(item.path), here).replace(os.sep, "/")
        kinds[item] = kind_of(path)
        item.add_marker(getattr(pytest.mark, kinds[item]))
    items.sort(key=lambda item: kinds[item] == "docs")  # stable: the rest keep their order


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
