"""A cell whose engines were restarted after a proven deadlock tells its end: its ranks are
"restarted" (with what each was blocked in), none "still running", in the text, the HTML and
the error under the view; the header gives the cell's whole time and the restart's share; the
restart's progress bar leaves the cell's output. Pure: a fake cluster, no engines."""

import re

from mpinb import view
from mpinb.analysis.deadlock import prove
from mpinb.cells import freeing
from mpinb.cells.result import CellResult, Note
from mpinb.cluster.progress import StartProgress
from mpinb.errors import CellFailed

SEND = {"op": "send", "call": 5, "bytes": 16_000_000, "peer": 1, "seconds": 1.1}
#: both ranks in a blocking send to the other, at line 6: what the run proved
SWAP_DEADLOCK = prove({r: {"op": "send", "dest": 1 - r, "sendtag": 0, "comm": [0, 1]} for r in (0, 1)}, left=set(),
                      lines={0: 6, 1: 6})


def blocked_in_sends() -> CellResult:
    """The tutorial's swap of large arrays as the cell's run leaves it: both ranks in a send."""
    return CellResult("swap", [0, 1], {0: None, 1: None}, {0: "swapped 16 values\n", 1: "swapped 16 values\n"},
                      {0: "", 1: ""}, {0: "running", 1: "running"}, 1.52,
                      notes=[Note("deadlock", {"deadlock": SWAP_DEADLOCK})],
                      inflight={0: SEND, 1: {**SEND, "peer": 0}},
                      where={0: {"cell": "In[5]", "line": 6}, 1: {"cell": "In[5]", "line": 6}})


class Restarting:
    """What restart_after_deadlock needs of a cluster: a restart that takes a while."""

    n, start_seconds, setup_cells, replayed = 2, 9.5, ["setup"], [("import jax", 0.8)]

    def __init__(self):
        self.asked = {}

    def restart(self, **options):
        self.asked = options


def restarted() -> CellResult:
    result = blocked_in_sends()
    cluster = Restarting()
    freeing.restart_after_deadlock(cluster, result)
    assert cluster.asked == {"replay_setup": True, "keep_progress": False}
    result.elapsed = 11.3  # the cell's run sets its whole time once the restart is done
    return result


def test_a_restarted_cell_says_its_ranks_were_restarted_and_none_runs():
    result = restarted()
    assert result.restarted and result.states == {0: "restarted", 1: "restarted"}
    text = view.render_text(result)
    assert "running" not in text, text
    assert "restarted: ranks 0-1" in text, text
    assert ("state: restarted (its engine, and the cell's work there); it was blocked in send (call 5, 15.3 MiB, "
            "peer 1, waiting 1.1 s) at Cell In[5], line 6") in text, text
    html = view.CellView(result)._repr_mimebundle_()["text/html"]
    assert "running" not in html and "restarted" in html
    failed = str(CellFailed(result))
    assert "running" not in failed and "rank 0 restarted; rank 1 restarted" in failed, failed


def test_the_header_gives_the_whole_time_and_the_restart_s_share():
    result = restarted()
    header = result.summary()
    assert header.startswith("2 ranks, 11.30 s ("), header
    share = float(re.search(r"\((\d+\.\d) s of it restarting the engines\)", header).group(1))
    assert 0 <= share < 11.3, header
    assert "2 restarted (ranks 0-1)" in header and "still running" not in header, header


class Handle:
    def __init__(self):
        self.shown = []

    def update(self, bundle, raw):
        self.shown.append(bundle)


def test_a_progress_bar_closed_without_keeping_it_leaves_nothing_shown():
    bar = StartProgress(2, show=False)
    bar.handle = Handle()
    bar.count(2)
    bar.close(keep=False)
    assert bar.handle.shown[-1] == {}
    kept = StartProgress(2, show=False)
    kept.handle = Handle()
    kept.close()
    assert kept.handle.shown[-1]["text/plain"].startswith("starting the controller: 0/2 engines")  # kept


def test_a_rank_freed_where_it_waited_says_so_with_its_line():
    from mpinb.wire.records import ErrorInfo, RankRecord

    error = ErrorInfo("JaxRuntimeError", "ABORTED: mpinb.allreduce: rank 0: withdrawn before it ran")
    records = {0: RankRecord(rank=0, ok=False, error=error), 1: RankRecord(rank=1, ok=True)}
    result = CellResult("branch", [0, 1], records, {0: "", 1: ""}, {0: "", 1: ""}, {0: "failed", 1: "finished"}, 1.68,
                        freed={0: {"cell": "In[7]", "line": 3}})
    text = view.render_text(result)
    assert "state: freed where it waited, at Cell In[7], line 3 (its cell failed there)" in text, text
    assert "running" not in text, text
