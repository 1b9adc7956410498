"""Which JAX mpinb runs on: the floor (pyproject.toml's ``jax>=``, the collective suite runs on
it in .ci/floor), the newest series tested (.ci/run always takes the newest release), and the
check at import: a JAX older than the floor is refused, a newer one than tested is let through
with a ``JaxVersionWarning`` (docs/how-to/choose-mpi.md, "Which JAX": why there is no upper bound).

Tested: the collective suite, nested ordering included, passed on JAX 0.4.36, 0.5.0, 0.6.0,
0.7.0 and 0.10.2 at 1, 2 and 4 ranks.
"""

from __future__ import annotations

import warnings

from ..errors import JaxVersionWarning

#: the oldest JAX mpinb runs on (pyproject.toml's ``jax>=``) and the newest series it was tested on
FLOOR = (0, 4, 36)
NEWEST_TESTED = (0, 10)


def release(version: str) -> tuple[int, ...]:
    """(0, 10, 2) from '0.10.2' or '0.10.2.dev20260101'; () when there is no number."""
    numbers = []
    for part in version.split("."):
        if not part.isdigit():
            break
        numbers.append(int(part))
    return tuple(numbers)


def dotted(numbers: tuple[int, ...]) -> str:
    return ".".join(map(str, numbers))


def next_series() -> str:
    return f"{NEWEST_TESTED[0]}.{NEWEST_TESTED[1] + 1}"


#: the first jaxlib whose XLA_FFI_Api has XLA_FFI_ThreadPool_NumThreads before the futures (same
#: API version 0.1 as the floor's): ext/xla_ffi_c.h
FFI_FUTURES_MOVED = (0, 4, 38)


def future_shift(built_with: str, installed: str) -> int:
    """How many slots later than in the header the library was compiled against (jaxlib
    ``built_with``) the installed jaxlib keeps the XLA FFI futures: 1 for the floor's header on a
    newer jaxlib, else 0 (an unknown version counts as the installed one)."""
    built, running = release(built_with) or release(installed), release(installed)
    return int(running >= FFI_FUTURES_MOVED) - int(built >= FFI_FUTURES_MOVED) if built and running else 0


def check_jaxlib_version(version: str) -> None:
    """Refuse a jaxlib older than the floor (ImportError): the collective library's header is the
    floor's, and an older XLA may refuse it or lay out its API differently."""
    numbers = release(version)
    if numbers and numbers < FLOOR:
        raise ImportError(f"mpinb needs jaxlib {dotted(FLOOR)} or newer; jaxlib {version} is installed: "
                          f"pip install 'jax>={dotted(FLOOR)}' 'jaxlib>={dotted(FLOOR)}'")


def check_jax_version(version: str) -> None:
    """Refuse a JAX older than the floor (ImportError); warn about one newer than the newest
    series tested (it may well work: most releases keep what mpinb uses)."""
    numbers = release(version)
    if numbers and numbers < FLOOR:
        raise ImportError(f"mpinb needs JAX {dotted(FLOOR)} or newer; JAX {version} is installed: "
                          f"pip install 'jax>={dotted(FLOOR)}'")
    if numbers[:2] > NEWEST_TESTED:
        warnings.warn(f"mpinb was tested with JAX {dotted(FLOOR)} to {dotted(NEWEST_TESTED)}.x; JAX {version} "
                      f"is installed. If a collective fails to trace or compile, pip install "
                      f"'jax<{next_series()}' (and report it).", JaxVersionWarning, stacklevel=2)

