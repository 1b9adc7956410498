"""What a test needs from the machine: skipped where it is missing, failed where CI requires it.

.ci/run installs Chromium and Slurm and runs as root, and sets MPINB_REQUIRE_BROWSER,
MPINB_REQUIRE_SLURM and MPINB_REQUIRE_NAMESPACES to 1 so that a missing piece fails the run
instead of hiding behind a skip.
"""

import os

import pytest

NEEDS = {  # what -> the variable that makes it required
    "browser": "MPINB_REQUIRE_BROWSER",
    "slurm": "MPINB_REQUIRE_SLURM",
    "namespaces": "MPINB_REQUIRE_NAMESPACES",
}


def require(what: str, missing: str | None, *, module_level: bool = False) -> None:
    """Go on if ``missing`` is None; else fail when the variable for ``what`` is 1, skip otherwise."""
    if missing is None:
        return
    variable = NEEDS[what]
    if os.environ.get(variable) == "1":
        pytest.fail(f"{variable}=1 but {missing}", pytrace=False)
    pytest.skip(missing, allow_module_level=module_level)
