"""Waiting for a state instead of sleeping: helpers of the cluster and fault tests.

A fault test presses the stop button, lets a timeout expire or makes a rank fail only once the
state it means to test is there (ranks inside a collective, every rank running Python), read
from the cluster's own status; on a loaded machine compiling the first collective can take
seconds, so a fixed sleep would race.
"""

import time

STATE_TIMEOUT = 180.0  # seconds to reach a state before the test fails (a loaded 2-core machine)


def wait_until(predicate, what: str, timeout: float = STATE_TIMEOUT, poll: float = 0.05) -> float:
    """Poll ``predicate`` until it holds; return the seconds it took. AssertionError on expiry."""
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)
    return time.monotonic() - t0


def inside(cluster, ranks, op: str) -> bool:
    """Every rank of ``ranks`` is blocked inside the mpinb collective ``op`` (its status says so)."""
    return all((cluster.inflight(r) or {}).get("op") == op for r in ranks)


class OnOutput:
    """A ``stream`` callback for ``run_cell`` that acts once, when every rank of ``ranks`` has
    printed ``marker``: it waits there until ``ready()`` holds, then calls ``action()`` (which may
    raise KeyboardInterrupt: the notebook's stop button). ``pressed_at`` is when it acted."""

    def __init__(self, marker: str, ranks, action, ready=lambda: True):
        self.marker, self.waiting = marker, set(ranks)
        self.action, self.ready = action, ready
        self.pressed_at: float | None = None
        self.text: dict[int, str] = {}

    def __call__(self, rank: int, kind: str, text: str) -> None:
        if kind != "stdout" or self.pressed_at is not None:
            return
        self.text[rank] = self.text.get(rank, "") + text
        if self.marker in self.text[rank]:
            self.waiting.discard(rank)
        if not self.waiting:
            wait_until(self.ready, "the state the test waits for")
            self.pressed_at = time.perf_counter()
            self.action()


def press_stop():
    raise KeyboardInterrupt
