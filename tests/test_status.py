"""The engine/notebook protocol (mpinb/wire/status.py) read and written as the two sides do."""

import subprocess
import sys

from mpinb.view.words import exit_words
from mpinb.wire import status


def test_exit_lines_survive_the_launcher_output_around_them():
    fault = 'Fatal Python error: Segmentation fault\n  File "<mpijax-cell-1>", line 3'
    text = "\n".join(["2026-12-03 engine log line", status.exit_line(1, -11, fault),
                      "MPINB-EXIT {not json", status.exit_line(2, 3), ""])
    records = status.parse_exit_lines(text)
    assert sorted(records) == [1, 2]
    assert records[1]["returncode"] == -11 and records[1]["signal"] == 11 and records[1]["fault"] == fault
    assert records[2]["returncode"] == 3 and records[2]["signal"] is None
    assert exit_words(records[1]["returncode"]) == "killed by signal 11 (SIGSEGV)"
    assert exit_words(records[2]["returncode"]) == "exited with code 3" and exit_words(None) == "process ended"


def test_exit_line_with_another_process_text_after_it_on_its_line():
    """Seen under srun: the rank's nanny wrote its log line before the record's newline."""
    text = status.exit_line(1, 3) + "2026-12-03 05:12:20.083 [KernelNanny.1] Notifying Hub {x}\n"
    assert status.parse_exit_lines(text)[1]["returncode"] == 3


def test_exit_line_fits_one_atomic_pipe_write():
    fault = "Fatal Python error: Segmentation fault\n" + 'File "x.py", line 1 in "\u00e9"\n' * 400
    line = status.exit_line(1, -11, fault)
    assert len((line + "\n").encode()) <= status.MAX_LINE_BYTES
    record = status.parse_exit_lines(line)[1]
    assert record["fault"].startswith("Fatal Python error: Segmentation fault") and fault.startswith(record["fault"])


def test_inflight_of_published_data():
    assert status.inflight_of(None) is None
    assert status.inflight_of(status.status_message(None, 3)) is None
    info = {"op": "barrier", "call": 2, "bytes": 0, "peer": -1, "seconds": 1.5}
    assert status.inflight_of(status.status_message(info, 3)) == info


def test_the_launch_wrapper_reports_how_its_child_ended(tmp_path):
    """mpinb.launch.rank on its own: the child dies of SIGKILL; the exit record line is on stderr."""
    child = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    env = {"PMI_RANK": "5", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "mpinb.launch.rank", "--status-dir", str(tmp_path), "--",
                           sys.executable, "-c", child], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 128 + 9
    assert status.parse_exit_lines(proc.stderr)[5]["returncode"] == -9
