"""The variant of the compiled libraries chosen per MPI ABI (mpinb/variant/abitable.py, mpinb/variant/abi.py),
the ELF reader behind its checks (mpinb/variant/elf.py), and the XLA FFI layout shift of the floor's
header on newer jaxlibs (mpinb/mpi/jax_versions.py). Bad input is refused with one
MPIVariantError each, naming what was found and expected: checked by class and fields."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from mpinb.errors import MPIVariantError
from mpinb.mpi import jax_versions, library
from mpinb.variant import abi, elf
from mpinb.variant.abitable import EXCLUDED_SONAMES, VARIANTS

#: runs in a fresh interpreter: the error's class and fields as JSON, or "ok"
IMPORT = """
import json
try:
    import mpinb.mpi
    mpinb.mpi.build_info()
    print(json.dumps("ok"))
except ImportError as exc:
    print(json.dumps({"class": type(exc).__name__, "found": getattr(exc, "found", None),
                      "expected": getattr(exc, "expected", None), "fix": getattr(exc, "fix", None)}))
"""


def import_with(**env) -> object:
    environment = {k: v for k, v in os.environ.items() if k not in ("MPINB_MPIABI", "MPI4PY_MPIABI")}
    proc = subprocess.run([sys.executable, "-c", IMPORT], capture_output=True, text=True, timeout=300,
                          env={**environment, **env})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_variant_is_the_abi_mpi4py_chose_and_its_libraries_need_that_libmpi():
    from mpi4py import _mpiabi

    variant = abi.chosen()
    assert variant is VARIANTS[_mpiabi._get_mpiabi()]
    library.load()
    for kind in ("ffi", "mpi_watch"):
        needed = elf.read_dynamic(abi.library_file(variant, kind)).needed
        assert variant.soname in needed, (kind, needed)
    assert abi.soname_of(abi.loaded_libmpi()) == variant.soname
    assert set(EXCLUDED_SONAMES) == {v.soname for v in VARIANTS.values()}


def test_the_elf_reader_reads_sonames_and_refuses_what_is_not_elf(tmp_path):
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc, "a C compiler (the build needs one too)"
    (tmp_path / "a.c").write_text("int f(void) { return 1; }\n")
    lib = tmp_path / "libfake.so.7"
    subprocess.run([gcc, "-shared", "-fPIC", "-Wl,-soname,libfake.so.7", "-Wl,--no-as-needed", "-o", str(lib),
                    str(tmp_path / "a.c"), "-lm"], check=True)
    found = elf.read_dynamic(str(lib))
    assert found.soname == "libfake.so.7" and "libm.so.6" in found.needed, found
    (tmp_path / "text.so").write_text("not a library")
    with pytest.raises(elf.ELFError):
        elf.read_dynamic(str(tmp_path / "text.so"))
    with pytest.raises(FileNotFoundError):
        elf.read_dynamic(str(tmp_path / "missing.so"))


def test_a_libmpi_that_does_not_match_the_variant_is_refused_naming_both(tmp_path):
    gcc = shutil.which("gcc") or shutil.which("cc")
    variant = abi.chosen()
    other = next(v for v in VARIANTS.values() if v.soname != variant.soname)
    (tmp_path / "a.c").write_text("int MPI_Init(void) { return 0; }\n")
    fake = tmp_path / other.soname
    subprocess.run([gcc, "-shared", "-fPIC", f"-Wl,-soname,{other.soname}", "-o", str(fake), str(tmp_path / "a.c")],
                   check=True)
    with pytest.raises(MPIVariantError) as info:
        abi.check_fits(variant, "ffi", str(fake))
    assert other.soname in info.value.found and info.value.expected == variant.soname, vars(info.value)
    assert abi.check_fits(variant, "ffi", abi.loaded_libmpi()) == abi.library_file(variant, "ffi")


def test_a_forced_variant_that_is_not_built_is_refused():
    got = import_with(MPINB_MPIABI="nosuch")
    assert got["class"] == "MPIVariantError" and got["found"] == "nosuch", got
    assert abi.chosen().name in got["expected"].split(", "), got


def test_an_mpi_of_no_variant_is_refused_naming_the_abi_and_the_source_recipe():
    got = import_with(MPI4PY_MPIABI="msmpi")  # what mpi4py would say of an ABI mpinb has no build for
    assert got["class"] == "MPIVariantError" and got["found"] == "msmpi", got
    assert "MPINB_MPICC=/path/to/mpicc pip install --no-build-isolation ." in got["fix"], got


def test_a_forced_variant_of_another_mpi_is_refused_before_it_loads():
    built = abi.built_variants()
    others = [name for name in built if VARIANTS[name].soname != abi.chosen().soname]
    if not others:  # a source build holds one variant: its refusal is that of a variant not built
        got = import_with(MPINB_MPIABI=next(n for n in VARIANTS if n not in built))
        assert got["class"] == "MPIVariantError", got
        return
    got = import_with(MPINB_MPIABI=others[0])
    assert got["class"] == "MPIVariantError" and got["expected"] == VARIANTS[others[0]].soname, got
    assert abi.chosen().soname in got["found"], got


@pytest.mark.parametrize(("built", "installed", "shift"), [
    ("0.4.36", "0.4.36", 0),
    ("0.4.36", "0.4.38", 1),   # the floor's header on a jaxlib with XLA_FFI_ThreadPool_NumThreads
    ("0.4.36", "0.10.2", 1),
    ("0.10.2", "0.10.2", 0),
    ("0.5.0", "0.10.2.dev20260101", 0),
    ("unknown", "0.10.2", 0),
])
def test_the_futures_are_found_where_the_running_jaxlib_keeps_them(built, installed, shift):
    assert jax_versions.future_shift(built, installed) == shift


def test_a_jaxlib_older_than_the_floor_is_refused():
    with pytest.raises(ImportError, match=r"needs jaxlib 0\.4\.36 or newer; jaxlib 0\.4\.35 is installed"):
        jax_versions.check_jaxlib_version("0.4.35")
    jax_versions.check_jaxlib_version("0.4.36")
    jax_versions.check_jaxlib_version("0.10.2")
