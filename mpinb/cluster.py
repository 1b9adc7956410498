"""An ipyparallel cluster of MPI engines (engine id == MPI rank) with mpinb loaded on every rank.

    from mpinb.cluster import MPICluster
    cluster = MPICluster(n=4).start()      # progress bar while the engines register
    result = cluster.run_cell("import jax; x = jax.numpy.ones(3)")
    cluster.stop()

Launching: by default ``mpiexec -n N`` from the ``mpich`` wheel next to this Python. Inside a
Slurm or PBS allocation pass the site's launcher and its arguments, e.g.
``MPICluster(n=64, mpi_cmd=["srun"], mpi_args=["--mpi=pmix"], controller_ip="0.0.0.0")``; every
argument ends up in the ipyparallel configuration returned by ``config()``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

from traitlets.config import Config

DEFAULT_START_TIMEOUT = 120.0


class ClusterError(RuntimeError):
    """The cluster could not be started, reached or used."""


def default_mpiexec() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.exists(here):
        return here
    found = shutil.which("mpiexec")
    if not found:
        raise ClusterError("no mpiexec found: install the `mpich` wheel or pass mpi_cmd=[...]")
    return found


class MPICluster:
    """Lifecycle of the engine cluster: ``start``, ``stop``, ``restart``, ``status``.

    Parameters
    ----------
    n: number of MPI ranks (engines).
    mpi_cmd: launcher command, default ``[mpiexec]`` of the ``mpich`` wheel (``["srun"]`` on Slurm).
    mpi_args: extra launcher arguments (``["--bind-to", "core"]``, ``["--mpi=pmix"]``, ...).
    engine_env: environment variables for the engines (e.g. ``{"JAX_ENABLE_X64": "1"}``).
    controller_ip: interface the controller listens on; loopback unless told otherwise.
    hlo: capture the optimized HLO of what each rank compiles (for layout warnings).
    start_timeout: seconds to wait for all engines to register.
    progress: show a progress bar while engines register.
    """

    def __init__(self, n: int = 4, *, mpi_cmd=None, mpi_args=(), engine_env=None,
                 controller_ip: str = "127.0.0.1", hlo: bool = True,
                 start_timeout: float = DEFAULT_START_TIMEOUT, progress: bool = True,
                 cluster_id: str | None = None):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"MPICluster: n must be a positive int, got {n!r}")
        self.n = n
        self.mpi_cmd = list(mpi_cmd) if mpi_cmd else None
        self.mpi_args = list(mpi_args)
        self.engine_env = dict(engine_env or {})
        self.controller_ip = controller_ip
        self.hlo = hlo
        self.start_timeout = float(start_timeout)
        self.progress = progress
        self.cluster_id = cluster_id
        self._cluster = None
        self.client = None
        self.view = None
        self.engines: list[dict] = []
        self.dump_root: str | None = None
        self.started_at: float | None = None
        self.start_seconds: float | None = None
        self.setup_cells: list[str] = []

    # ----------------------------------------------------------------------- configuration
    def config(self) -> Config:
        """The ipyparallel configuration this cluster starts with (inspectable, testable)."""
        c = Config()
        c.Cluster.engine_launcher_class = "mpi"
        c.Cluster.n = self.n
        c.Cluster.controller_ip = self.controller_ip
        c.MPILauncher.mpi_cmd = self.mpi_cmd or [default_mpiexec()]
        c.MPILauncher.mpi_args = list(self.mpi_args)
        env = {"JAX_PLATFORMS": "cpu"}
        env.update(self.engine_env)
        c.MPIEngineSetLauncher.environment = env
        return c

    # ----------------------------------------------------------------------- lifecycle
    @property
    def running(self) -> bool:
        return self.client is not None

    def start(self) -> "MPICluster":
        import ipyparallel as ipp

        if self.running:
            raise ClusterError("cluster already running; stop() or restart() it first")
        t0 = time.perf_counter()
        kwargs = {"config": self.config(), "log_level": 40}
        if self.cluster_id:
            kwargs["cluster_id"] = self.cluster_id
        self._cluster = ipp.Cluster(**kwargs)
        try:
            self.client = self._cluster.start_and_connect_sync()
            self.client.wait_for_engines(self.n, timeout=self.start_timeout, interactive=self.progress)
        except Exception as exc:
            self._teardown()
            raise ClusterError(f"MPI engines did not start within {self.start_timeout:.0f} s: {exc}") from exc
        self.view = self.client[:]
        self.view.block = True
        self.dump_root = tempfile.mkdtemp(prefix="mpinb-hlo-") if self.hlo else None
        from . import engine

        infos = self.view.apply_sync(engine.setup, self.dump_root)
        ranks = [info["rank"] for info in infos]
        if ranks != list(self.client.ids):
            self._teardown()
            raise ClusterError(f"engine ids {self.client.ids} are not the MPI ranks {ranks}")
        self.engines = infos
        self.started_at = time.time()
        self.start_seconds = time.perf_counter() - t0
        return self

    def stop(self) -> None:
        """Stop engines and controller (idempotent)."""
        self._teardown()

    def _teardown(self) -> None:
        cluster, self._cluster = self._cluster, None
        if self.client is not None:
            try:
                self.client.close()
            except Exception:  # noqa: BLE001 - best effort on the way down
                pass
        self.client = None
        self.view = None
        if cluster is not None:
            try:
                cluster.stop_cluster_sync()
            except Exception:  # noqa: BLE001
                pass
        if self.dump_root:
            shutil.rmtree(self.dump_root, ignore_errors=True)
            self.dump_root = None

    def restart(self, replay_setup: bool = True) -> "MPICluster":
        """Stop and start a cluster of the same size; replay the cells marked as setup."""
        cells = list(self.setup_cells)
        self.stop()
        self.start()
        if replay_setup:
            for code in cells:
                self.run_cell(code, setup=True)
        return self

    def status(self) -> dict:
        if not self.running:
            return {"running": False, "n": self.n}
        return {
            "running": True,
            "n": self.n,
            "engines": list(self.client.ids),
            "uptime_s": round(time.time() - (self.started_at or time.time()), 1),
            "start_s": round(self.start_seconds or 0.0, 2),
            "hlo_capture": all(e.get("hlo_capture") for e in self.engines),
            "pids": [e["pid"] for e in self.engines],
            "hosts": sorted({e["host"] for e in self.engines}),
            "setup_cells": len(self.setup_cells),
        }

    # ----------------------------------------------------------------------- cells
    def run_cell(self, code: str, **options):
        """Run ``code`` on every rank (or ``ranks=...``); see :func:`mpinb.cell.run_cell`."""
        from .cell import run_cell

        setup = options.pop("setup", False)
        result = run_cell(self, code, **options)
        if setup and code not in self.setup_cells and result.ok:
            self.setup_cells.append(code)
        return result

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self) -> str:
        state = f"running, engines {list(self.client.ids)}" if self.running else "stopped"
        return f"<MPICluster n={self.n} {state}>"
