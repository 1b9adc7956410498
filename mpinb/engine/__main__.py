"""A rank's engine process: ``python -m mpinb.engine [ipengine arguments]`` (what launchers start).

It loads the MPI watch (mpi4py_waits.py) before anything imports mpi4py, so that the
MPI calls the program makes itself (mpi4py's ``comm.recv``, ``comm.Barrier``, ...) can be seen
while they block, then runs ipyparallel's engine exactly as ``python -m ipyparallel.engine``
does. Without the watch (off, or not loadable here) the engine runs all the same.
"""

from __future__ import annotations

import runpy

from . import mpi4py_waits


def main() -> None:
    mpi4py_waits.preload()
    runpy.run_module("ipyparallel.engine", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
