"""The compiled library: what it was built against, the MPI mismatch check, the debug log."""

import ast
import os
import re
import subprocess
import sys

import pytest

from mpinb.mpi import library


def test_build_info_matches_loaded_mpi():
    """The build says what it was compiled against; check that against what is loaded (and
    against mpi4py's own view of MPI), whichever MPI that is: MPICH, Open MPI, Intel MPI."""
    from mpi4py import MPI

    info = library.build_info()
    assert info["mpi_family"] != "unknown", info
    assert info["mpi_family"] == library.mpi_family(info["loaded_mpi"])
    assert info["sizeof_comm"] == MPI._sizeof(MPI.Comm)  # an int (MPICH) or a pointer (Open MPI)
    assert info["ffi_api"][0] == 0


@pytest.mark.parametrize(("text", "family"), [
    ("MPICH Version: 5.0.2\nMPICH Release date", "MPICH"),
    ("Open MPI v4.1.4, package: Debian OpenMPI", "Open MPI"),
    ("Intel(R) MPI Library 2021.10 for Linux* OS", "Intel MPI"),
    ("Something else", "unknown"),
])
def test_mpi_family(text, family):
    assert library.mpi_family(text) == family


@pytest.mark.parametrize(("built", "installed", "refused"), [
    ("0.10.2", "0.4.36", True),   # a newer header's FFI API version breaks the older CPU backend
    ("0.10.2", "0.10.2", False),
    ("0.4.36", "0.10.2", False),  # older headers work with newer XLA
    ("0.6.0", "0.10.0.dev20260101", False),
    ("unknown", "0.4.36", False),
])
def test_an_extension_built_for_a_newer_jaxlib_is_refused(built, installed, refused):
    if refused:
        with pytest.raises(ImportError, match=rf"compiled against jaxlib {built}, newer than the installed jaxlib"):
            library.check_jaxlib_match(built, installed)
    else:
        library.check_jaxlib_match(built, installed)


def test_build_info_names_the_jaxlib_it_was_compiled_against():
    import jaxlib.version

    assert library.build_info()["jaxlib"] == jaxlib.version.__version__


def test_mismatch_is_refused_with_instructions():
    build = {"mpi_family": "MPICH", "mpicc": "/venv/bin/mpicc"}
    with pytest.raises(ImportError) as info:
        library.check_mpi_match(build, ("MPICH", "Intel MPI"), "", "Open MPI v4.1.4, package: Debian OpenMPI")
    msg = str(info.value)
    assert "built against MPICH" in msg and "mpi4py loaded Open MPI" in msg
    assert "MPINB_MPICC=/path/to/mpicc pip install --no-build-isolation" in msg


def test_two_libraries_loaded_is_refused():
    build = {"mpi_family": "MPICH", "mpicc": "x"}
    with pytest.raises(ImportError, match="two different MPI libraries"):
        library.check_mpi_match(build, ("MPICH",), "MPICH Version: 4.1", "MPICH Version: 5.0.2")
    library.check_mpi_match(build, ("MPICH",), "MPICH Version: 5.0.2", "MPICH  Version:   5.0.2")  # same, spacing aside
    # Intel MPI is of the MPICH ABI: the mpich variant serves it
    library.check_mpi_match(build, ("MPICH", "Intel MPI"), "", "Intel(R) MPI Library 2021.18 for Linux* OS")


LINE = re.compile(r"^r0 \| (\w+), (\d+) bytes, (\d+\.\d{6}) s$")

PROGRAM = """
import jax, jax.numpy as jnp
from mpi4py import MPI
from mpinb import mpi
mpi.allreduce(jnp.zeros(4, jnp.float32), MPI.SUM)
mpi.set_debug({toggle})
jax.jit(lambda x: mpi.alltoall(x))(jnp.zeros((1, 8), jnp.int16))
"""


def _run(env_value, toggle):
    env = dict(os.environ, MPINB_DEBUG=env_value)
    proc = subprocess.run([sys.executable, "-c", PROGRAM.format(toggle=toggle)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [m.groups() for m in map(LINE.match, proc.stderr.splitlines()) if m]


def test_debug_log_from_environment_then_switched_off():
    assert [(op, int(n)) for op, n, _ in _run("1", False)] == [("allreduce", 16)]


def test_debug_log_switched_on_by_function():
    assert [(op, int(n)) for op, n, _ in _run("0", True)] == [("alltoall", 16)]


@pytest.mark.parametrize(("value", "advised"), [(None, 0), ("1", 2)])
def test_huge_pages_are_asked_for_only_when_chosen(value, advised):
    """Off by default (it loses a step loop: benchmarks/step_loop.py); MPINB_HUGE_PAGES=1 advises
    the 2 MiB pages inside a large buffer that reaches a collective."""
    env = {k: v for k, v in os.environ.items() if k != "MPINB_HUGE_PAGES"}
    if value is not None:
        env["MPINB_HUGE_PAGES"] = value
    program = ("import jax.numpy as jnp\nfrom mpi4py import MPI\nfrom mpinb import mpi\n"
               "mpi.allreduce(jnp.ones(2 << 20, jnp.float32), MPI.SUM).block_until_ready()\n"
               "print(mpi.library.load().huge_pages())")
    proc = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    said = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    assert said["enabled"] is bool(advised)
    assert said["pages"] >= advised if advised else said["pages"] == 0


def test_jax_internals_are_reached_only_through_jax_compat():
    """Every use of JAX's internals is in mpinb/mpi/jax_compat.py, where a JAX upgrade is adapted."""
    import pathlib

    root = pathlib.Path(library.__file__).resolve().parents[1]
    internal = re.compile(r"jax\._src|jax\.interpreters|partial_eval|dce_rules|cached_primitive_lowerings")
    offenders = [f"{path.relative_to(root)}:{n}: {line.strip()}"
                 for path in sorted(root.rglob("*.py")) if path.name != "jax_compat.py"
                 for n, line in enumerate(path.read_text().splitlines(), 1) if internal.search(line)]
    assert not offenders, "\n".join(offenders)
