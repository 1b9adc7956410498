"""The package as users install it (pure): `mpinb tutorials`, the version, what is refused at
import (a JAX outside the tested range, a JAX internal that moved, a library built for another MPI).

The wheel and the sdist themselves are built, installed into fresh environments and used from
outside the tree by .ci/package (a CI step: building takes minutes).
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from importlib.metadata import version
from pathlib import Path

import pytest

from mpinb import cli, workshop

ROOT = Path(__file__).resolve().parent.parent


def test_the_shipped_notebooks_are_the_tutorials_in_lesson_order():
    names = list(workshop.notebooks())
    assert names == sorted(p.name for p in (ROOT / "mpinb" / "tutorials").glob("*.ipynb"))
    assert names[0].startswith("01_") and len(names) >= 4


def test_a_copy_carries_no_jupytext_pairing_and_is_the_same_notebook():
    for name, text in workshop.notebooks().items():
        shipped, copy = json.loads(text), json.loads(workshop.for_user(text))
        assert "jupytext" in shipped["metadata"], name  # the repository pairs it with notebooks/NAME.py
        assert "jupytext" not in copy["metadata"]
        assert copy["cells"] == shipped["cells"]


def run_cli(*args, capsys):
    code = cli.main(list(args))
    return code, capsys.readouterr()


def test_tutorials_copies_then_keeps_a_changed_notebook_unless_forced(tmp_path, capsys):
    folder = tmp_path / "mine"
    code, out = run_cli("tutorials", str(folder), capsys=capsys)
    names = list(workshop.notebooks())
    assert code == 0 and sorted(p.name for p in folder.glob("*.ipynb")) == names
    assert f"copied: {', '.join(names)}" in out.out
    assert f"cd {folder} && jupyter lab {names[0]}" in out.out
    # again: nothing to do
    code, out = run_cli("tutorials", str(folder), capsys=capsys)
    assert code == 0 and "already up to date" in out.out and "copied" not in out.out
    # the user edits one: kept, and said so
    edited = folder / names[0]
    mine = edited.read_text().replace("mpinb quick start", "my notes")
    edited.write_text(mine)
    code, out = run_cli("tutorials", str(folder), capsys=capsys)
    assert code == 0 and edited.read_text() == mine
    assert f"kept your changed copy of: {names[0]}" in out.out and "--force" in out.out
    # --force replaces it
    code, out = run_cli("tutorials", str(folder), "--force", capsys=capsys)
    assert code == 0 and edited.read_text() == workshop.for_user(workshop.notebooks()[names[0]])
    assert f"replaced your changed copy of: {names[0]}" in out.out


def test_a_notebook_mpinb_wrote_is_updated_and_a_foreign_one_is_kept(tmp_path, capsys):
    """What an older mpinb wrote (its text in the record) is brought up to date; a notebook of the
    same name that mpinb never wrote is the user's."""
    folder = tmp_path / "t"
    workshop.copy_tutorials(str(folder))
    names = list(workshop.notebooks())
    older = '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\n'
    (folder / names[0]).write_text(older)
    record = json.loads((folder / workshop.RECORD).read_text())
    record["files"][names[0]] = workshop._digest(older)  # as if an older mpinb had written it
    (folder / names[1]).write_text("my own notebook")
    record["files"].pop(names[1])  # never written by mpinb
    (folder / workshop.RECORD).write_text(json.dumps(record))
    report = workshop.copy_tutorials(str(folder))
    assert report.updated == [names[0]] and report.kept == [names[1]]
    assert (folder / names[1]).read_text() == "my own notebook"
    assert (folder / names[0]).read_text() == workshop.for_user(workshop.notebooks()[names[0]])


def test_tutorials_into_a_file_is_an_error_that_says_so(tmp_path, capsys):
    target = tmp_path / "afile"
    target.write_text("x")
    code, out = run_cli("tutorials", str(target), capsys=capsys)
    assert code == 1 and "exists and is not a folder" in out.err and target.read_text() == "x"


def test_every_public_name_of_the_package_resolves():
    """The names ``mpinb`` lists (imported on first use, so a renamed module breaks only here)."""
    code = "import json, mpinb; print(json.dumps([n for n in mpinb.__all__ if getattr(mpinb, n) is not None]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert {"CellOptions", "ClusterOptions", "MPICluster", "ViewOptions", "__version__"} <= set(json.loads(out))


def test_the_version_is_the_installed_distribution_s():
    import mpinb

    assert mpinb.__version__ == version("mpinb")
    out = subprocess.run([sys.executable, "-m", "mpinb", "--version"], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == f"mpinb {version('mpinb')}"


def test_jax_older_than_the_floor_is_refused_and_newer_than_tested_warned_about():
    from mpinb.errors import JaxVersionWarning
    from mpinb.mpi import jax_versions

    with pytest.raises(ImportError, match=r"needs JAX 0\.4\.36 or newer; JAX 0\.4\.30 is installed: pip install"):
        jax_versions.check_jax_version("0.4.30")
    newest = ".".join(map(str, jax_versions.NEWEST_TESTED))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jax_versions.check_jax_version(f"{newest}.9")  # the newest series tested: silent
        jax_versions.check_jax_version("0.4.36")
    later = f"{jax_versions.NEWEST_TESTED[0]}.{jax_versions.NEWEST_TESTED[1] + 1}.0"
    with pytest.warns(JaxVersionWarning, match=rf"tested with JAX 0\.4\.36 to {newest}\.x; JAX {later} is installed"):
        jax_versions.check_jax_version(later)


def test_the_floor_is_pyproject_s_lower_bound_of_jax():
    """The one number in two places (the metadata pip reads, the check at import): kept equal."""
    import re

    from mpinb.mpi import jax_versions

    requirements = re.findall(r'^\s*"(jax>=[^"]*)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert requirements == [f"jax>={jax_versions.dotted(jax_versions.FLOOR)}"]


def test_a_jax_internal_that_moved_names_itself():
    from mpinb.mpi import jax_compat

    with pytest.raises(ImportError, match=r"has no jax\._src\.core\.no_such_thing \(used for testing\); mpinb was "
                                          r"tested with JAX 0\.4\.36 to .*: pip install 'jax<"):
        jax_compat._internal("jax._src.core", "no_such_thing", purpose="testing")
    with pytest.raises(ImportError, match=r"has no jax\._src\.no_such_module"):
        jax_compat._internal("jax._src.no_such_module", purpose="testing")


def test_a_library_that_does_not_load_is_named_with_the_mpi_and_the_fix():
    from mpinb.mpi import library

    library.load()
    message = library.unloadable_message("libmpi.so.x: cannot open shared object file",
                                         "Other MPI v9.9, package: a test\n")
    assert "cannot open shared object file" in message and "Other MPI v9.9" in message
    assert "MPINB_MPICC=" in message  # and how to rebuild
