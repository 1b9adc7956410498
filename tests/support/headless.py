"""Notebooks run headless with the tools users use, and the check that none of them stalled.

``run(tool, ...)`` executes a notebook with plain ``jupyter execute`` or with papermill, each in
a process of its own, as a workshop organiser runs them before a workshop (no client of the
project's own), and returns the executed notebook. ``late_starts(nb)`` reads nbclient's timing
metadata (both tools record it): a cell that started more than ``allowed`` seconds after the
kernel sent the previous cell's reply was held up by the client, the stall of
docs/how-to/headless.md ("A headless run stalls"), which lasts a whole cell timeout.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path

import nbformat

TOOLS = ("jupyter-execute", "papermill")
#: seconds between a cell's reply and the next cell's start above which the client stalled
ALLOWED_GAP = 5.0


def command(tool: str, source: Path, output: Path, cell_timeout: int) -> list[str]:
    if tool == "jupyter-execute":
        return [sys.executable, "-m", "jupyter", "execute", f"--timeout={cell_timeout}", "--kernel_name=python3",
                f"--output={output}", str(source)]
    if tool == "papermill":
        return [sys.executable, "-m", "papermill", "--kernel", "python3", "--execution-timeout", str(cell_timeout),
                "--cwd", str(source.parent), "--no-progress-bar", str(source), str(output)]
    raise ValueError(f"unknown tool {tool!r}: one of {TOOLS}")


def run(tool: str, source: Path, output: Path, cell_timeout: int, env: dict | None = None,
        timeout: float = 1500) -> nbformat.NotebookNode:
    """Execute ``source`` with ``tool`` into ``output`` (its kernel's working directory is the
    notebook's own), each cell given ``cell_timeout`` seconds; the executed notebook. Fails with
    the tool's own output when it does not end well."""
    output.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(command(tool, source, output, cell_timeout), capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, check=False)
    assert done.returncode == 0, f"{tool} {source.name}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return nbformat.read(output, as_version=4)


def _when(stamp: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def start_gaps(nb) -> list[tuple[int, float]]:
    """(cell index, seconds) for each code cell after the first: how long after the kernel sent
    the previous cell's reply this cell started (its busy status)."""
    gaps, replied = [], None
    for index, cell in enumerate(nb.cells):
        timing = cell.get("metadata", {}).get("execution", {})
        if cell.cell_type != "code" or not timing:
            continue
        if replied is not None:
            gaps.append((index, (_when(timing["iopub.status.busy"]) - replied).total_seconds()))
        replied = _when(timing["shell.execute_reply"])
    return gaps


def late_starts(nb, allowed: float = ALLOWED_GAP) -> list[tuple[int, float]]:
    """The cells that started more than ``allowed`` seconds after the previous cell's reply."""
    gaps = start_gaps(nb)
    assert gaps, "no execution timing in the notebook: was it run with record_timing?"
    return [(index, round(gap, 1)) for index, gap in gaps if gap > allowed]
