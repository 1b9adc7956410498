"""Build of the private extension ``mpinb._ffi`` from the Cython sources in ``ext/``, and of the
MPI watch ``mpinb._mpi_watch`` from ``ext/mpi_watch.c``.

Which MPI is used:
  * ``MPINB_MPICC=/path/to/mpicc`` (environment) names the MPI compiler wrapper explicitly;
  * otherwise the ``mpicc`` next to the running Python (the ``mpich`` wheel in the build
    environment), then the first ``mpicc`` on ``PATH``.
The wrapper is only asked for its include and library flags; the C compiler is Python's.
"""

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup


def find_mpicc():
    explicit = os.environ.get("MPINB_MPICC")
    if explicit:
        if not shutil.which(explicit):
            sys.exit(f"mpinb build: MPINB_MPICC={explicit!r} is not an executable")
        return shutil.which(explicit)
    here = os.path.join(sysconfig.get_path("scripts"), "mpicc")
    if os.path.exists(here):
        return here
    found = shutil.which("mpicc")
    if found:
        return found
    sys.exit(
        "mpinb build: no MPI compiler wrapper found. Install the `mpich` wheel into the build "
        "environment (the default), or set MPINB_MPICC to your MPI's mpicc."
    )


def mpi_flags(mpicc):
    """Include dirs, library dirs, libraries and rpaths reported by the MPI wrapper."""
    for query in (["-show"], ["--showme"]):  # MPICH-style, then Open MPI-style
        try:
            out = subprocess.run([mpicc, *query], capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            continue
        if out.strip():
            break
    else:
        sys.exit(f"mpinb build: {mpicc} -show / --showme gave no flags")
    inc, libdirs, libs, rpaths = [], [], [], []
    tokens = shlex.split(out)
    for i, tok in enumerate(tokens):
        if tok.startswith("-I"):
            inc.append(tok[2:])
        elif tok.startswith("-L"):
            libdirs.append(tok[2:])
        elif tok.startswith("-l"):
            libs.append(tok[2:])
        elif tok.startswith("-Wl,"):
            parts = tok[4:].split(",")
            for j, part in enumerate(parts):
                if part.startswith("-rpath="):
                    rpaths.append(part[len("-rpath="):])
                elif part == "-rpath" and j + 1 < len(parts):
                    rpaths.append(parts[j + 1])
            if parts == ["-rpath"] and i + 1 < len(tokens) and tokens[i + 1].startswith("-Wl,"):
                rpaths.append(tokens[i + 1][4:])
    # The default MPI (the `mpich` wheel) may live in pip's temporary build environment, which
    # must not be baked in as an rpath; at run time mpi4py has already loaded libmpi (same
    # soname) before mpinb._ffi. A system MPI named by MPINB_MPICC keeps its rpaths.
    if not os.environ.get("MPINB_MPICC"):
        rpaths = []
    return inc, libdirs, libs or ["mpi"], rpaths


def xla_ffi_include():
    """The XLA FFI headers inside jaxlib, and that jaxlib's version (the extension then runs on
    this jaxlib or a newer one: mpinb/mpi/library.py checks it)."""
    import jaxlib  # only the headers are needed, so jax itself is not imported
    from jaxlib.version import __version__

    path = os.path.join(os.path.dirname(jaxlib.__file__), "include")
    if not os.path.exists(os.path.join(path, "xla", "ffi", "api", "c_api.h")):
        sys.exit(f"mpinb build: xla/ffi/api/c_api.h not found under {path}; upgrade jaxlib")
    return path, __version__


HERE = os.path.dirname(os.path.abspath(__file__))


def generate_op_tables():
    """ext/ops.pxi and ext/ops_registry.pxi from the one table of ops, mpinb/optable.py
    (read by path: importing the package would import JAX)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("optable", os.path.join(HERE, "mpinb", "optable.py"))
    optable = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(optable)
    for name, text in (("ops.pxi", optable.generate_ops_pxi()), ("ops_registry.pxi", optable.generate_registry_pxi())):
        path = os.path.join(HERE, "ext", name)
        old = None
        if os.path.exists(path):
            with open(path) as fh:
                old = fh.read()
        if old != text:  # unchanged files keep their time stamps: no needless rebuild
            with open(path, "w") as fh:
                fh.write(text)


def extensions():
    from Cython.Build import cythonize

    generate_op_tables()
    mpicc = find_mpicc()
    inc, libdirs, libs, rpaths = mpi_flags(mpicc)
    print(f"mpinb build: MPI from {mpicc}: include={inc} libs={libs} libdirs={libdirs} rpaths={rpaths}")
    xla_include, jaxlib_version = xla_ffi_include()
    print(f"mpinb build: XLA FFI header of jaxlib {jaxlib_version}")
    ext = Extension(
        "mpinb._ffi",
        sources=["ext/_ffi.pyx"],
        include_dirs=[xla_include, "ext", *inc],
        library_dirs=libdirs,
        libraries=libs,
        runtime_library_dirs=rpaths,
        extra_compile_args=["-O2", "-Wno-unused-function"],
        define_macros=[("MPINB_BUILD_MPICC", '"{}"'.format(mpicc.replace('"', ""))),
                       ("MPINB_BUILD_JAXLIB", f'"{jaxlib_version}"')],
    )
    # The MPI watch (ext/mpi_watch.c): a library of the MPI profiling interface the engines load
    # before mpi4py, not a Python module (mpinb/engine/mpi_watch.py loads it with ctypes).
    watch = Extension(
        "mpinb._mpi_watch",
        sources=["ext/mpi_watch.c"],
        include_dirs=inc,
        library_dirs=libdirs,
        libraries=libs,
        runtime_library_dirs=rpaths,
        extra_compile_args=["-O2"],
    )
    return [*cythonize([ext], language_level=3, compiler_directives={"boundscheck": False, "wraparound": False}),
            watch]


setup(ext_modules=extensions())
