"""One MPI lane of .ci/package: the release wheel installed in a fresh venv beside one MPI, used
from outside the source tree (run with that venv's Python, from a folder holding a copy of the
tests, .ci/installed.py and this file):

1. the installed package (not the source tree) imports, every module of the source tree's
   package among it, and its compiled variant is the one of the ABI mpi4py chose (``--abi``);
2. ``mpinb demo -n 2`` passes;
3. the collective suite on 2 ranks (tests/test_ranks.py, with the MPI's own launcher), or the
   tests ``--pytest`` names;
4. a cluster started by ``%mpijax start -n 2`` runs a cell, and a cycle of mpi4py ``comm.recv``
   ends as a deadlock proven through the MPI watch (each rank's wait seen in an MPI function),
   after which the next cell runs;
5. bad input, each one MPIVariantError with its fields: a forced variant of another MPI (where
   the install holds one), a forced variant that is not built, an ABI with no variant;
6. with ``--full``, also .ci/installed.py's ``mpinb --version``, ``mpinb tutorials`` and the first
   workshop notebook on 2 ranks.

Exit status 0 only if all hold; each step prints one line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import installed  # .ci/installed.py, copied beside this file


def check_variant(abi: str) -> None:
    import mpinb.mpi
    from mpinb.variant import abi as choice

    variant = choice.chosen()
    assert variant.name == abi, f"variant {variant.name}, expected {abi}"
    info = mpinb.mpi.build_info()
    assert info["loaded_mpi"], info
    installed.step(f"variant {variant.name} ({choice.loaded_libmpi()}), built for {info['mpi_family']} against "
                   f"jaxlib {info['jaxlib']}, runs on {info['loaded_mpi']}")


def check_tests(tests: Path, args: list[str]) -> None:
    """pytest on the copy of the tests (run from its parent: the installed package is imported)."""
    started = time.monotonic()
    assert not (tests.parent / "mpinb").exists(), "the tests' folder must not hold the source package"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          capture_output=True, text=True, cwd=tests.parent, env=dict(os.environ))  # installed.run
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    installed.step(f"pytest {' '.join(args)}: {proc.stdout.strip().splitlines()[-1]} "
                   f"({time.monotonic() - started:.0f} s)")


REFUSED = """
import json
try:
    import mpinb.mpi
    mpinb.mpi.build_info()
    print(json.dumps(None))
except ImportError as exc:
    print(json.dumps([type(exc).__name__, getattr(exc, "found", ""), getattr(exc, "expected", "")]))
"""


def refusal(**env) -> list | None:
    clean = {k: v for k, v in os.environ.items() if k not in ("MPINB_MPIABI", "MPI4PY_MPIABI")}
    proc = subprocess.run([sys.executable, "-c", REFUSED], capture_output=True, text=True, timeout=300,
                          env={**clean, **env})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check_refusals() -> None:
    from mpinb.variant import abi
    from mpinb.variant.abitable import VARIANTS

    mine = abi.chosen()
    said = []
    other = next((n for n in abi.built_variants() if VARIANTS[n].soname != mine.soname), None)
    if other:  # its library needs another libmpi than the one mpi4py loads
        got = refusal(MPINB_MPIABI=other)
        assert got and got[0] == "MPIVariantError" and got[2] == VARIANTS[other].soname and mine.soname in got[1], got
        said.append(f"MPINB_MPIABI={other}: found {got[1]}, expected {got[2]}")
    got = refusal(MPINB_MPIABI="nosuch")
    assert got and got[0] == "MPIVariantError" and got[1] == "nosuch", got
    said.append(f"MPINB_MPIABI=nosuch: expected one of {got[2]}")
    got = refusal(MPI4PY_MPIABI="msmpi")
    assert got and got[0] == "MPIVariantError" and got[1] == "msmpi", got
    said.append("an ABI with no variant (msmpi)")
    installed.step("refused, each with MPIVariantError: " + "; ".join(said))


def check_magic_and_deadlock() -> None:
    from IPython.testing import globalipapp

    started = time.monotonic()
    shell = globalipapp.start_ipython() or globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "mpinb")
    shell.run_line_magic("mpijax", "start -n 2")
    try:
        shell.run_cell_magic("mpijax", "", "from mpi4py import MPI\nrank = MPI.COMM_WORLD.Get_rank()\nprint(rank)")
        res = shell.user_ns["_mpijax"]
        assert res.ok and sorted(res.records) == [0, 1], res.text()
        shell.run_cell_magic("mpijax", "--timeout 120 --no-raise",
                             "got = MPI.COMM_WORLD.recv(source=(rank + 1) % 2)")
        res = shell.user_ns["_mpijax"]
        assert not res.timed_out and res.deadlock is not None, res.text()
        functions = {r: res.deadlock.waits[r]["function"] for r in (0, 1)}
        assert all(f.startswith("MPI_") for f in functions.values()), functions  # seen by the watch
        shell.run_cell_magic("mpijax", "", "print(rank + 1)")
        assert shell.user_ns["_mpijax"].ok, shell.user_ns["_mpijax"].text()
    finally:
        shell.run_line_magic("mpijax", "stop")
    installed.step(f"%mpijax start -n 2 ran a cell; an mpi4py recv cycle was proven a deadlock "
                   f"({', '.join(f'rank {r} in {f}' for r, f in functions.items())}), the next cell ran "
                   f"({time.monotonic() - started:.0f} s)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, type=Path, help="the source tree the wheel was built from")
    parser.add_argument("--tests", required=True, type=Path, help="a copy of the source tree's tests/")
    parser.add_argument("--abi", required=True, help="the variant mpi4py's choice must give")
    parser.add_argument("--pytest", default="tests/test_ranks.py -k 2",
                        help="the tests to run (default: the collective suite on 2 ranks); '' for none")
    parser.add_argument("--full", action="store_true", help="also version, tutorials and the first notebook")
    args = parser.parse_args()
    assert not (Path.cwd() / "mpinb").exists(), "run this from a folder outside the source tree"
    root = tempfile.mkdtemp(prefix="mpinb-lane-")
    try:
        installed.hermetic_environment(root)
        installed.check_installed(args.source)
        installed.check_modules(args.source)
        check_variant(args.abi)
        check_refusals()
        installed.check_demo()
        if args.pytest.strip():
            check_tests(args.tests, args.pytest.split())
        check_magic_and_deadlock()
        if args.full:
            installed.check_version()
            folder = os.path.join(root, "my-tutorials")
            installed.check_notebook(folder, installed.check_tutorials(folder)[0])
    finally:
        installed.remove_when_released(root)
    installed.step("every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
