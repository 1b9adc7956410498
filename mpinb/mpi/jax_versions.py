"""Which JAX mpinb runs on: the floor (pyproject.toml's ``jax>=``, the collective suite runs on
it in .ci/floor), the newest series tested (.ci/run always takes the newest release), and the
check at import: a JAX older than the floor is refused, a newer one than tested is let through
with a ``JaxVersionWarning`` (docs/install.md, "Which JAX": why there is no upper bound).

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

