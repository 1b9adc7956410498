"""An installed mpinb, used as a user would, from a folder outside the source tree (run by
.ci/package in a fresh virtual environment holding the wheel or the sdist):

1. the package imported is the installed one, not the source tree;
2. every module of the source tree's package is installed, and imports;
3. ``mpinb --version`` is the distribution's version;
4. ``mpinb tutorials DIR`` writes the notebooks the package ships;
5. ``mpinb demo -n 2`` passes;
6. with ``--lab`` (the ``lab`` extra installed): ``jupyter lab`` opens a tutorial ``mpinb tutorials``
   copied, as the README says to;
7. the first workshop notebook, copied by ``mpinb tutorials``, executes on 2 ranks without an error.

Exit status 0 only if all hold; each step prints one line.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def step(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)


def source_modules(source: Path) -> list[str]:
    """The dotted names of the source tree's modules (in folders with an ``__init__.py``)."""
    names = []
    for path in sorted((source / "mpinb").rglob("*.py")):
        if not (path.parent / "__init__.py").exists():
            continue
        parts = list(path.relative_to(source).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def hermetic_environment(root: str) -> None:
    """IPython's and Jupyter's files in a temporary folder, as the test suite keeps them."""
    for variable in ("IPYTHONDIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR"):
        os.environ[variable] = os.path.join(root, variable.lower())
        os.makedirs(os.environ[variable])
    # IPython puts the site-packages of $VIRTUAL_ENV first on sys.path when this Python is not that
    # venv's (CI's own venv is active around the lanes): the lane would then test CI's packages
    if os.path.realpath(os.environ.get("VIRTUAL_ENV", sys.prefix)) != os.path.realpath(sys.prefix):
        del os.environ["VIRTUAL_ENV"]


def check_installed(source: Path) -> None:
    import mpinb

    where = Path(mpinb.__file__).resolve().parent
    assert source.resolve() not in where.parents and where != source / "mpinb", f"imported from the source: {where}"
    assert "site-packages" in where.parts, where
    step(f"mpinb {mpinb.__version__} imported from {where}")


def check_modules(source: Path) -> None:
    modules = source_modules(source)
    assert len(modules) > 40, modules
    failed = {}
    for name in modules:
        if name.endswith("__main__"):  # runs the command line when imported
            assert importlib.util.find_spec(name) is not None, name
            continue
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - every failure is reported, then the check fails
            failed[name] = f"{type(exc).__name__}: {exc}"
    detail = "\n".join(f"  {name}: {error}" for name, error in failed.items())
    assert not failed, f"modules that do not import from the install:\n{detail}"
    from mpinb.variant import abi

    variant = abi.chosen()
    libraries = [f"mpinb.{variant.module(kind)}" for kind in ("ffi", "mpi_watch")]
    assert all(abi.library_file(variant, kind) for kind in ("ffi", "mpi_watch")), \
        f"the compiled libraries of the {variant.name} variant are missing (built: {abi.built_variants()})"
    step(f"all {len(modules)} modules of the source tree are installed and import, and {', '.join(libraries)}")


def run(*cmd: str, **kwargs) -> subprocess.CompletedProcess:
    # env: Python's copy of the environment, not the process's own: once this process imported
    # mpinb.mpi, an Open MPI 4 singleton's variables are in the latter, and an mpiexec started
    # with them joins this process's runtime and fails at once (as tests/test_ranks.py says)
    kwargs.setdefault("env", dict(os.environ))
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert proc.returncode == 0, \
        f"{' '.join(cmd)}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def check_version() -> None:
    out = run("mpinb", "--version").stdout.strip()
    assert out == f"mpinb {importlib.metadata.version('mpinb')}", out
    step(out)


def check_tutorials(folder: str) -> list[str]:
    from mpinb import workshop

    out = run("mpinb", "tutorials", folder).stdout
    shipped = list(workshop.notebooks())
    written = sorted(p.name for p in Path(folder).glob("*.ipynb"))
    assert written == shipped and len(shipped) >= 4, (written, shipped, out)
    step(f"mpinb tutorials {folder}: {', '.join(written)}")
    return written


def check_demo() -> None:
    started = time.monotonic()
    out = run("mpinb", "demo", "-n", "2", timeout=600).stdout
    assert out.rstrip().splitlines()[-1].startswith("OK: 2 ranks"), out[-2000:]
    step(f"mpinb demo -n 2: OK ({time.monotonic() - started:.0f} s)")


def check_notebook(folder: str, name: str) -> None:
    """Run a tutorial as a workshop organiser checks it: plain ``jupyter execute``, a cell timeout."""
    import nbformat

    path, executed = Path(folder) / name, Path(folder) / f"executed-{name}"
    started, wall = time.monotonic(), datetime.datetime.now(datetime.timezone.utc)
    run(sys.executable, "-m", "jupyter", "execute", "--timeout=180", "--kernel_name=python3", f"--output={executed}",
        str(path), timeout=1200, env={**os.environ, "MPINB_NOTEBOOK_RANKS": "2"})
    nb = nbformat.read(executed, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    views = [o for o in outputs if "[rank 0]" in o.get("data", {}).get("text/plain", "")]
    assert views, "no %%mpijax view in the executed notebook"
    step(f"{name} executed on 2 ranks by jupyter execute: {len(outputs)} outputs, {len(views)} views "
         f"({time.monotonic() - started:.0f} s)")
    for line in slow_parts(nb, wall):
        step(f"  slow: {line}")


def check_lab(folder: str, name: str) -> None:
    """``jupyter lab`` started in the tutorials' folder, as the README says, serves the notebook."""
    import secrets
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(8)
    lab = subprocess.Popen([sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root",
                            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", f"--IdentityProvider.token={token}",
                            "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
                           cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, served = time.monotonic() + 120, None
        while served is None and time.monotonic() < deadline and lab.poll() is None:
            try:
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{port}/api/contents/{name}?token={token}", timeout=5) as reply:
                    served = reply.status
            except OSError:
                time.sleep(0.5)
        assert served == 200, f"jupyter lab did not serve {name} (exit {lab.poll()})"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=30) as page:
            assert page.status == 200 and b"JupyterLab" in page.read()
    finally:
        lab.terminate()
        lab.wait(timeout=30)
    step(f"jupyter lab serves {name} from {folder}")


def slow_parts(nb, started: datetime.datetime, at_least: float = 30.0) -> list[str]:
    """What took at least ``at_least`` seconds of a notebook's run, from nbclient's own timestamps:
    the kernel's start (until the first cell began), each code cell (its first line), the end
    (after the last cell, until now). Once a run took 600 s where others took 15, unexplained."""
    spans, before = [], started
    for cell in nb.cells:
        times = cell.get("metadata", {}).get("execution", {})
        if cell.cell_type != "code" or "iopub.status.busy" not in times:
            continue
        busy = datetime.datetime.fromisoformat(times["iopub.status.busy"])
        idle = datetime.datetime.fromisoformat(times.get("iopub.status.idle") or times["iopub.status.busy"])
        first = cell.source.splitlines()[0] if cell.source else ""
        spans.append(("before it" if before is started else "between cells", (busy - before).total_seconds(), first))
        spans.append(("cell", (idle - busy).total_seconds(), first))
        before = idle
    spans.append(("after the last cell", (datetime.datetime.now(datetime.timezone.utc) - before).total_seconds(), ""))
    return [f"{what} {seconds:.0f} s {first!r}" for what, seconds, first in spans if seconds >= at_least]


def remove_when_released(root: str, wait: float = 60.0) -> None:
    """Remove the temporary folder once nothing writes into it any more: the notebook's kernel
    has ended, but the cluster it started (its controller's logs, in IPYTHONDIR) is stopped by
    its watchdog a moment later. Fails naming what is still written after ``wait`` seconds (a
    cluster that outlived its kernel)."""
    end = time.monotonic() + wait
    while True:
        try:
            shutil.rmtree(root)
            return
        except OSError:
            if time.monotonic() > end:
                left = sorted(str(p) for p in Path(root).rglob("*"))[:20]
                raise AssertionError(f"{root} still written to {wait:.0f} s after the checks: {left}") from None
            time.sleep(0.5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, type=Path, help="the source tree the package was built from")
    parser.add_argument("--kind", default="install", help="what was installed (for the log)")
    parser.add_argument("--lab", action="store_true", help="the lab extra is installed: check jupyter lab")
    args = parser.parse_args()
    assert not (Path.cwd() / "mpinb").exists(), "run this from a folder outside the source tree"
    root = tempfile.mkdtemp(prefix=f"mpinb-{args.kind}-")
    try:
        hermetic_environment(root)
        check_installed(args.source)
        check_modules(args.source)
        check_version()
        folder = os.path.join(root, "my-tutorials")
        notebooks = check_tutorials(folder)
        check_demo()
        if args.lab:
            check_lab(folder, notebooks[0])
        check_notebook(folder, notebooks[0])
    finally:
        remove_when_released(root)
    step(f"{args.kind}: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
