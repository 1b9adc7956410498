"""Build of the private extension ``mpinb._ffi_<abi>`` from the Cython sources in ``ext/``, and of
the MPI watch ``mpinb._mpi_watch_<abi>`` from ``ext/mpi_watch.c``, once per MPI ABI built for
(``<abi>``: a name of mpinb/variant/abitable.py, the one table of variants; mpinb.variant.abi chooses at import).

Which MPIs are used:
  * ``MPINB_VARIANTS="mpich=/path/to/mpicc openmpi=/path/to/mpicc ..."`` (environment): one build
    per ABI, each with that MPI's compiler wrapper (the release wheel: .ci/wheel);
  * otherwise one build, for the ABI of the MPI found: ``MPINB_MPICC=/path/to/mpicc`` names its
    wrapper explicitly, else the ``mpicc`` next to the running Python (the ``mpich`` wheel in the
    build environment), then the first ``mpicc`` on ``PATH``.
A wrapper is only asked for its include and library flags and its mpi.h's macros (which say the
ABI); the C compiler is Python's.
"""

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup


def find_mpicc():
    explicit = os.environ.get(variable("MPICC"))
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
    inc, libdirs, libs, rpaths, defines = [], [], [], [], []
    tokens = shlex.split(out)
    for i, tok in enumerate(tokens):
        if tok.startswith("-D"):  # MPICH's mpicc_abi: -DMPI_ABI selects the standard ABI's mpi.h
            name, _, value = tok[2:].partition("=")
            defines.append((name, value or None))
        elif tok.startswith("-I"):
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
    # must not be baked in as an rpath, nor may the release wheel's MPIs; at run time mpi4py has
    # already loaded libmpi (same soname) before mpinb's libraries. A system MPI named by
    # MPINB_MPICC keeps its rpaths.
    if not os.environ.get(variable("MPICC")) or os.environ.get(variable("VARIANTS")):
        rpaths = []
    return inc, libdirs, libs or ["mpi"], rpaths, defines


def variable(name):
    """The name of an environment variable of mpinb's one table of them (mpinb/environment.py)."""
    return getattr(load_by_path("environment"), name).name


def load_by_path(name):
    """A module of the package that imports nothing (mpinb/<name>.py, ``name`` with its folder:
    "variant/abitable"), without importing the package (that would import JAX)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name.replace("/", "."), os.path.join(HERE, "mpinb", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses looks its module up
    spec.loader.exec_module(module)
    return module


def abi_of(mpicc, defines):
    """The variant (mpinb/variant/abitable.py) whose ABI ``mpicc``'s mpi.h is: the first whose marker
    macro the header defines, asked of the wrapper's own preprocessor."""
    table = load_by_path("variant/abitable")
    flags = [f"-D{n}" if v is None else f"-D{n}={v}" for n, v in defines]
    try:
        macros = subprocess.run([mpicc, *flags, "-E", "-dM", "-x", "c", "-"], input="#include <mpi.h>\n",
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        sys.exit(f"mpinb build: {mpicc} cannot preprocess mpi.h: {exc}")
    defined = {line.split()[1] for line in macros.splitlines() if line.startswith("#define ")}
    for name in ("mpiabi", "openmpi", "mpich"):  # the standard ABI first: MPICH's header defines both
        if table.VARIANTS[name].marker in defined:
            return table.VARIANTS[name]
    sys.exit(f"mpinb build: the mpi.h of {mpicc} is of no ABI mpinb knows (mpinb/variant/abitable.py: "
             f"{', '.join(table.VARIANTS)})")


def wanted_variants():
    """[(variant, mpicc)]: MPINB_VARIANTS, or the one MPI found."""
    table = load_by_path("variant/abitable")
    given = os.environ.get(variable("VARIANTS"), "").replace(",", " ").split()
    if not given:
        mpicc = find_mpicc()
        return [(abi_of(mpicc, mpi_flags(mpicc)[4]), mpicc)]
    chosen = []
    for item in given:
        name, _, mpicc = item.partition("=")
        if name not in table.VARIANTS or not shutil.which(mpicc):
            sys.exit(f"mpinb build: MPINB_VARIANTS item {item!r}: expected NAME=MPICC with NAME one of "
                     f"{', '.join(table.VARIANTS)} and MPICC an executable")
        found = abi_of(shutil.which(mpicc), mpi_flags(mpicc)[4])
        if found.name != name:
            sys.exit(f"mpinb build: MPINB_VARIANTS item {item!r}: that mpicc's mpi.h is of the {found.name} ABI")
        chosen.append((found, shutil.which(mpicc)))
    return chosen


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
    """ext/ops.pxi and ext/ops_registry.pxi from the one table of ops, mpinb/mpi_ops.py
    (read by path: importing the package would import JAX)."""
    mpi_ops = load_by_path("mpi_ops")
    for name, text in (("ops.pxi", mpi_ops.generate_ops_pxi()), ("ops_registry.pxi", mpi_ops.generate_registry_pxi())):
        path = os.path.join(HERE, "ext", name)
        old = None
        if os.path.exists(path):
            with open(path) as fh:
                old = fh.read()
        if old != text:  # unchanged files keep their time stamps: no needless rebuild
            with open(path, "w") as fh:
                fh.write(text)


def variant_source(variant):
    """ext/<module>.pyx: the collective library under this variant's module name (Cython names a
    module after its file), generated like ext/ops.pxi; the code is ext/_ffi.pyx's."""
    path = os.path.join(HERE, "ext", variant.module("ffi") + ".pyx")
    text = f'# generated by setup.py: ext/_ffi.pyx as mpinb.{variant.module("ffi")}\ninclude "_ffi.pyx"\n'
    old = None
    if os.path.exists(path):
        with open(path) as fh:
            old = fh.read()
    if old != text:
        with open(path, "w") as fh:
            fh.write(text)
    return os.path.relpath(path, HERE)


def extensions():
    from Cython.Build import cythonize

    generate_op_tables()
    xla_include, jaxlib_version = xla_ffi_include()
    print(f"mpinb build: XLA FFI header of jaxlib {jaxlib_version}")
    built = []
    for variant, mpicc in wanted_variants():
        inc, libdirs, libs, rpaths, defines = mpi_flags(mpicc)
        print(f"mpinb build: the {variant.name} variant, MPI from {mpicc}: include={inc} libs={libs} "
              f"libdirs={libdirs} rpaths={rpaths} defines={defines}")
        ext = Extension(
            f"mpinb.{variant.module('ffi')}",
            sources=[variant_source(variant)],
            include_dirs=[xla_include, "ext", *inc],
            library_dirs=libdirs,
            libraries=libs,
            runtime_library_dirs=rpaths,
            extra_compile_args=["-O2", "-Wno-unused-function"],
            define_macros=[*defines, ("MPINB_BUILD_MPICC", '"{}"'.format(mpicc.replace('"', ""))),
                           ("MPINB_BUILD_JAXLIB", f'"{jaxlib_version}"')],
        )
        # The MPI watch (ext/mpi_watch.c): a library of the MPI profiling interface the engines load
        # before mpi4py, not a Python module (mpinb/engine/mpi4py_waits.py loads it with ctypes).
        watch = Extension(
            f"mpinb.{variant.module('mpi_watch')}",
            sources=["ext/mpi_watch.c"],
            include_dirs=inc,
            library_dirs=libdirs,
            libraries=libs,
            runtime_library_dirs=rpaths,
            define_macros=defines,
            extra_compile_args=["-O2"],
        )
        built += [*cythonize([ext], language_level=3, include_path=["ext"],
                             compiler_directives={"boundscheck": False, "wraparound": False}), watch]
    return built


setup(ext_modules=extensions())
