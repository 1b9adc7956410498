"""One MPI lane of .ci/package: the release wheel installed in a fresh venv beside one MPI, used
from outside the source tree (run with that venv's Python, from a folder holding a copy of the
tests, .ci/installed.py and this file):

1. the installed package (not the source tree) imports, every module of the source tree's
   package among it, and its compiled variant is the one of the ABI mpi4py chose (``--abi``);
2. ``mpinb demo -n 2`` passes;
3. the collective suite on 2 ranks (tests/test_ranks.py, with the MPI's own launcher);
4. a cluster started by ``%mpijax start -n 2`` runs a cell, and a cycle of mpi4py ``comm.recv``
   ends as a deadlock proven through the MPI watch (each rank's wait seen in an MPI function),
   after which the next cell runs.

Exit status 0 only if all hold; each step prints one line.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import installed  # .ci/installed.py, copied beside this file


def check_variant(abi: str) -> None:
    import mpinb.mpi
    from mpinb import abi as choice

    variant = choice.chosen()
    assert variant.name == abi, f"variant {variant.name}, expected {abi}"
    info = mpinb.mpi.build_info()
    assert info["loaded_mpi"], info
    installed.step(f"variant {variant.name} ({choice.loaded_libmpi()}), built for {info['mpi_family']} against "
                   f"jaxlib {info['jaxlib']}, runs on {info['loaded_mpi']}")


def check_suite_on_2_ranks(tests: Path) -> None:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(tests / "test_ranks.py"), "-k", "2"], capture_output=True, text=True, cwd=tests.parent)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    installed.step(f"the collective suite on 2 ranks: {proc.stdout.strip().splitlines()[-1]} "
                   f"({time.monotonic() - started:.0f} s)")


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
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mpinb-lane-") as root:
        installed.hermetic_environment(root)
        os.chdir(root)
        installed.check_installed(args.source)
        installed.check_modules(args.source)
        check_variant(args.abi)
        installed.check_demo()
        check_suite_on_2_ranks(args.tests)
        check_magic_and_deadlock()
    return 0


if __name__ == "__main__":
    sys.exit(main())
