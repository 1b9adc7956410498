"""Rerunning test files in a subprocess under another topology (tests/support/topology.py): the other
host stand-in and the Slurm job step rerun the fault and output tests this way."""

import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent
TIMEOUT = 1200
#: JAX's own multi-process stack under another topology: its coordinator, the stall report, pull
JAX_NATIVE = [f"test_jax_native.py::{name}[2 ranks]" for name in (
    "test_a_rank_that_skips_a_collective_is_named_and_the_waiting_rank_s_line_shown",
    "test_pull_assembles_the_global_array_in_index_order")]


def pytest_passes(files, env: dict, prefix=(), timeout: float = TIMEOUT) -> None:
    """Run ``pytest -q FILES`` (behind ``prefix``, e.g. ``unshare ...``) with ``env``; fail unless
    it passed with nothing failed or skipped."""
    cmd = [*prefix, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(str(TESTS / f) for f in files)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=TESTS.parent)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"no result after {timeout} s:\n{(exc.stdout or '')[-3000:]}")
    tail = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, tail
    assert " passed" in proc.stdout and "failed" not in proc.stdout and "skipped" not in proc.stdout, tail
