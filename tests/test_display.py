"""The per-rank view rendered from a synthetic result (no cluster, no kernel)."""

import dataclasses
import zlib

import numpy as np
import pytest

from mpinb import view
from mpinb.analysis import compare as cmp
from mpinb.analysis import hlo
from mpinb.cells.result import CellResult, Note
from mpinb.options.cell_options import ViewOptions, parse_ranks
from mpinb.view import images, timeline_svg
from mpinb.view.timeline_words import timeline_summary
from mpinb.wire import values
from mpinb.wire.records import ErrorInfo, RankRecord


def result():
    recs = {
        0: RankRecord(rank=0, ok=True, elapsed=0.01, result=values.summarize(np.arange(8.0)),
                      show={"y": values.summarize(np.ones((2, 2)), image=True)},
                      comparisons=[cmp.Comparison("y", "equal")]),
        1: RankRecord(rank=1, ok=False, elapsed=0.02,
                      error=ErrorInfo("ValueError", "boom", "Traceback...\nValueError: boom")),
        2: None,
    }
    w = [hlo.HloWarning("unconstrained", 0, "jit_f", "cc.1", hlo.Unconstrained("x")),
         hlo.HloWarning("divergent", None, "jit_g", "collective #1",
                        hlo.CompiledApart("jit_g", 1, 0, 2, "a", "b", None, None, 1, 1))]
    return CellResult("code", [0, 1, 2], recs, {0: "hi\n", 1: "", 2: "partial\n"}, {0: "", 1: "oops\n", 2: ""},
                      {0: "finished", 1: "failed", 2: "running"}, 1.5, w, True, True)


def test_summary_line():
    assert result().summary() == ("3 ranks, 1.50 s, 1 failed (rank 1), 1 still running (rank 2), timed out, "
                                  "2 layout findings: 1 divergent (error), 1 unconstrained (warning), "
                                  "jit == eager: y")


def test_by_rank_text_has_one_block_per_rank():
    res = result()
    text = view.render_text(res, ViewOptions(by_rank=True))
    blocks = text.split("[rank ")
    assert len(blocks) == 4
    r0, r1, r2 = blocks[1], blocks[2], blocks[3]
    assert "hi" in r0 and "Out: float64[8]  min 0 max 7 mean 3.5" in r0 and "compare: y: jit == eager" in r0
    assert "warning [unconstrained] rank 0: a custom call without layout constraints" in r0
    assert "error: ValueError: boom" in r1 and "oops" in r1
    assert "state: still running, not inside an mpinb collective" in r2 and "partial" in r2
    shared = text.split("[all ranks]")[1]
    assert "error [divergent] across ranks" in shared and "rank 0 compiled a but rank 2 compiled b" in shared


#: a copy of 64 B that feeds mpinb's alltoall
COPY_FEEDS = hlo.Relayout("copy", "copy.1", "mpinb_alltoall", "cc.1", True, "f32[4,4]{0,1}", 64)


def four_ranks(lines_per_rank: int = 1):
    """Ranks 0-2 print and compute the same; rank 3 differs. A relayout on every rank, in two
    nested modules of one jitted call."""
    same = values.summarize(np.zeros(3))
    recs = {r: RankRecord(rank=r, ok=True, elapsed=0.01 + r / 1000,
                          result=same if r < 3 else values.summarize(np.ones(3))) for r in range(4)}
    text = "".join(f"line {i}\n" for i in range(lines_per_rank))
    w = [hlo.HloWarning("relayout", r, module, "copy.1", COPY_FEEDS, "cell.py:3")
         for r in range(4) for module in ("jit_step", "jit_step.inner")]
    return CellResult("code", [0, 1, 2, 3], recs, dict.fromkeys(range(4), text), dict.fromkeys(range(4), ""),
                      dict.fromkeys(range(4), "finished"), 0.5, w)


def test_grouped_view_says_each_thing_once_with_its_ranks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the notebook's folder, with the tutorials copied there
    (tmp_path / "02_debugging_transpose.ipynb").write_text("{}")
    res = four_ranks()
    text = view.render_text(res)
    assert text.count("line 0") == 1 and "[ranks 0-3]\n  stdout:\n      line 0" in text
    assert "[ranks 0-2]\n  Out: float64[3]  min 0 max 0" in text and "[rank 3]\n  Out: float64[3]  min 1 max 1" in text
    assert "finished: ranks 0-3 (0.010-0.013 s)" in text
    finding = [ln for ln in text.splitlines() if "[relayout]" in ln]
    assert len(finding) == 1 and finding[0].startswith("info [relayout] ranks 0-3: XLA copies a buffer")
    assert "What to do:" in finding[0] and "02_debugging_transpose.ipynb#What-XLA-compiled" in finding[0]
    assert "1 layout finding: 1 relayout (info)" in res.summary()
    page = view.render_html(res)
    assert page.count("class='mpinb-rank'") == 3  # ranks 0-3, ranks 0-2, rank 3
    assert "data-severity='info'" in page
    assert "href='02_debugging_transpose.ipynb#What-XLA-compiled'" in page


def test_a_finding_links_its_explanation_from_where_the_notebook_is(tmp_path, monkeypatch):
    """Next to the notebook, in mpinb-tutorials/ there (what `mpinb tutorials` makes), or not
    there at all: a relative link that opens wherever the notebooks live, else words saying
    which tutorial and section, and how to get it."""
    res = four_ranks()
    monkeypatch.chdir(tmp_path)
    page, text = view.render_html(res), view.render_text(res)
    assert "href=" not in page
    assert ('See the tutorial 02_debugging_transpose, section "What XLA compiled" (mpinb tutorials copies the '
            "tutorials next to your notebooks)") in text
    (tmp_path / "mpinb-tutorials").mkdir()
    (tmp_path / "mpinb-tutorials" / "02_debugging_transpose.ipynb").write_text("{}")
    page = view.render_html(res)
    assert "<a href='mpinb-tutorials/02_debugging_transpose.ipynb#What-XLA-compiled' target='_blank'>What XLA " \
           "compiled</a>" in page


def test_output_is_trimmed_to_head_and_tail():
    res = four_ranks(lines_per_rank=20_000)
    text = view.render_text(res)
    assert "line 0\n" in text and "line 19999" in text and "line 10000" not in text
    assert "... 19,800 lines hidden" in text
    # said at the top of each box too, with the one name of the result everywhere, and in the summary
    top = "(19,800 of 20,000 lines hidden below; all of them: _mpijax.stdout[rank], or --max-lines 0)"
    assert top in text and text.index(top) < text.index("line 0\n")
    assert text.splitlines()[0].endswith("output of ranks 0-3 trimmed to 200 lines (all: _mpijax.stdout[rank])")
    assert top in view.render_html(res)
    assert "line 10000" in view.render_text(res, ViewOptions(max_lines=0))
    assert "trimmed" not in view.render_text(res, ViewOptions(max_lines=0)).splitlines()[0]
    assert res.stdout[0].count("\n") == 20_000  # the result keeps everything


def test_many_ranks_get_a_state_grid():
    res = four_ranks()
    assert "data-grid" not in view.render_html(res)
    recs = {r: RankRecord(rank=r, ok=True, elapsed=0.01) for r in range(16)}
    big = CellResult("c", list(range(16)), recs, dict.fromkeys(range(16), ""), dict.fromkeys(range(16), ""),
                     dict.fromkeys(range(16), "finished"), 0.1)
    page = view.render_html(big)
    assert "data-grid='1'" in page and page.count("title='rank ") == 16


def test_html_has_one_column_per_rank_and_an_image():
    res = result()
    page = view.render_html(res, ViewOptions(by_rank=True))
    assert page.count("class='mpinb-rank'") == 3
    assert "data:image/png;base64," in page


def test_mimebundle_outside_a_kernel_is_text_and_html():
    bundle = result()._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert bundle["text/plain"].startswith("3 ranks")


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_pictures_are_large_nearest_neighbour_and_share_one_scale():
    small = values.sample(np.arange(48 * 64.0).reshape(48, 64))
    data = images.picture(small, 0, 48 * 64 - 1)
    assert png_size(data) == (192, 144)  # 64 x 48 values, 3x3 pixels each: the long side >= 160
    idat = data[data.index(b"IDAT") + 4:data.index(b"IEND") - 8]
    rows = zlib.decompress(idat)
    assert len(rows) == 144 * (192 * 3 + 1)
    first_row = np.frombuffer(rows[1:1 + 192 * 3], np.uint8).reshape(192, 3)
    assert (first_row[0] == first_row[2]).all() and (first_row[0] != first_row[3]).any()  # blocks of 3
    big = values.sample(np.ones((1000, 10)))
    assert big.shape == (160, 10) and big.dtype == np.float32
    # two ranks, one variable: one scale over both, so rank 0's zeros and rank 1's ones differ
    recs = {r: RankRecord(rank=r, ok=True, show={"y": values.summarize(np.full((4, 4), float(r)), image=True)})
            for r in (0, 1)}
    res = CellResult("c", [0, 1], recs, dict.fromkeys((0, 1), ""), dict.fromkeys((0, 1), ""),
                     dict.fromkeys((0, 1), "finished"), 0.1)
    assert images.scales(res) == {"y": (0.0, 1.0)}
    tags = [images.tags(res, r) for r in (0, 1)]
    assert tags[0] != tags[1] and all("mpinb-colourbar" in t and "image-rendering:pixelated" in t for t in tags)
    # the same words on both ranks, but different pictures: two groups, and no checksum in the view
    text = view.render_text(res)
    assert text.count("picture y: 4x4 values, colour scale 0 to 1 (shared by all ranks)") == 2, text
    assert "[rank 0]" in text and "[rank 1]" in text and "checksum" not in text
    assert view.render_html(res).count("class='mpinb-image'") == 2
    recs[1] = RankRecord(rank=1, ok=True, show=dict(recs[0].show))  # equal pictures: one group
    text = view.render_text(res)
    assert text.count("picture y: 4x4 values") == 1 and "[ranks 0-1]" in text, text
    assert view.render_html(res).count("class='mpinb-image'") == 1


def test_difference_picture_where_jit_and_eager_differ():
    diff = values.sample(np.array([[0.0, 2.0], [-1.0, 0.0]]))
    rec = RankRecord(rank=0, ok=True, diff_images={"z": diff})
    res = CellResult("c", [0], {0: rec}, {0: ""}, {0: ""}, {0: "finished"}, 0.1)
    assert images.scales(res) == {"z: jit - eager": (-2.0, 2.0)}
    assert "data-name='z: jit - eager'" in view.render_html(res)


def test_parse_ranks():
    assert parse_ranks(None, 4) == [0, 1, 2, 3]
    assert parse_ranks("all", 3) == [0, 1, 2]
    assert parse_ranks("0,2-3", 4) == [0, 2, 3]
    assert parse_ranks([3, 1], 4) == [1, 3]
    for bad in ("5", "a", "2-1x"):
        with pytest.raises(ValueError, match="--ranks"):
            parse_ranks(bad, 4)


def test_html_and_text_carry_the_same_facts_and_no_widget():
    """Notes (restart advice), shared warnings and per-rank text: in the HTML and text/plain
    alike; a finished view is static (no widget model that dies with the kernel)."""
    for by_rank in (False, True):
        res, opts = result(), ViewOptions(by_rank=by_rank)
        blocked = {"op": "allreduce", "call": 3, "bytes": 16, "peer": -1, "seconds": 4.0}
        res.notes.append(Note("way_out", {"running": [2], "inflight": {2: blocked}, "where": {}, "replayed": 0}))
        text = view.render_text(res, opts)
        page = view.render_html(res, opts)
        bundle = view.CellView(res, opts)._repr_mimebundle_()
        assert set(bundle) == {"text/plain", "text/html"}, sorted(bundle)
        assert bundle["text/plain"] == text and bundle["text/html"] == page
        for fact in ("cannot be interrupted: run %mpijax restart", "rank 0 compiled a but rank 2 compiled b",
                     "ValueError: boom", "partial", "jit == eager: y", "a custom call without layout constraints"):
            assert fact in text, (by_rank, fact)
            assert fact in page, (by_rank, fact)


def test_records_are_typed_and_pickle():
    import pickle
    import typing

    from mpinb.wire.records import State

    rec = result().records[1]
    assert pickle.loads(pickle.dumps(rec)) == rec  # noqa: S301 - our own bytes
    assert rec.error.ename == "ValueError" and str(rec.error) == "ValueError: boom"
    assert set(typing.get_args(State)) == {"finished", "failed", "running", "dead", "restarted"}
    assert set(result().states.values()) <= set(typing.get_args(State))
    with pytest.raises(TypeError):
        RankRecord(0, True, 0.0, None, None, {}, [], None, [], False, "extra")  # no stray fields


def test_timeline_shows_who_waited_for_whom():
    """Rank 1 reaches the allreduce 1.2 s after ranks 0 and 2, which wait inside it meanwhile."""
    t = 1_000.0
    lines = {0: [("allreduce", t + 0.1, t + 1.3, 16, -1), ("send", t + 1.4, t + 1.5, 8, 1)],
             1: [("allreduce", t + 1.3, t + 1.3001, 16, -1), ("recv", t + 1.4, t + 1.5, 8, 0)],
             2: [("allreduce", t + 0.1, t + 1.3, 16, -1)]}
    recs = {r: RankRecord(rank=r, ok=True, elapsed=1.5, timeline=evs) for r, evs in lines.items()}
    res = CellResult("c", [0, 1, 2], recs, dict.fromkeys(lines, ""), dict.fromkeys(lines, ""),
                     dict.fromkeys(lines, "finished"), 1.6)
    assert timeline_summary(res) == ("timeline: 1-2 mpinb calls per rank; longest wait: allreduce #1: "
                                             "rank 1 entered 1.2 s after rank 0")
    assert timeline_summary(res) in view.render_text(res)
    picture = timeline_svg.svg(res)
    assert picture.startswith("<svg") and picture.count("<rect") == 5
    assert picture.count("data-op='allreduce'") == 3
    assert "rank 1: allreduce (call 1), 16 B, 0.0001 s, from 1.2 s" in picture
    assert "class='mpinb-timeline'" in view.render_html(res)
    assert timeline_svg.svg(result()) == "" and "timeline" not in view.render_text(result())
    # a rank without calls, and one without a record (still running), keep their rows
    recs[2] = RankRecord(rank=2, ok=True, elapsed=1.5)
    res.records[3], res.states[3] = None, "running"
    res.ranks.append(3)
    picture = timeline_svg.svg(res)
    assert "no mpinb call" in picture and "no record (running)" in picture and picture.count("<text x='2'") == 4
    assert timeline_summary(res).startswith("timeline: 0-2 mpinb calls per rank")


def test_live_output_is_throttled_and_capped(capsys):
    live = view.LiveOutput([0, 1], rich=False, max_lines=5, interval=3600)
    for i in range(20):
        live(0, "stdout", f"line {i}\n")
    live(1, "stderr", "warn\n")
    assert capsys.readouterr().out == "[stdout:0] line 0\n"  # the first call flushed; then held back
    live.close()
    out = capsys.readouterr().out.splitlines()
    assert out == [f"[stdout:0] line {i}" for i in range(1, 5)] + [
        "[stdout:0] ... (rank 0: more output, shown when the cell ends)", "[stderr:1] warn"]


def test_live_output_first_text_goes_out_at_once_on_a_freshly_booted_machine(capsys, monkeypatch):
    """time.monotonic() counts from boot: a machine up for 2 s must not hold the first line back
    for an interval measured from boot."""
    import time

    monkeypatch.setattr(time, "monotonic", lambda: 2.0)
    live = view.LiveOutput([0], rich=False, interval=60)
    live(0, "stdout", "first\n")
    live(0, "stdout", "second\n")
    assert capsys.readouterr().out == "[stdout:0] first\n"  # the second waits for the interval
    live.close()
    assert capsys.readouterr().out == "[stdout:0] second\n"


def test_live_output_sends_held_lines_when_due_and_never_splits_a_line(capsys):
    live = view.LiveOutput([0], rich=False, interval=0.05)
    live(0, "stdout", "before the allreduce\nhal")
    assert capsys.readouterr().out == "[stdout:0] before the allreduce\n"  # whole lines only
    live(0, "stdout", "f a line\n")
    import time

    time.sleep(0.06)
    live.tick()  # the wait loop's tick: due, although no new text came
    assert capsys.readouterr().out == "[stdout:0] half a line\n"
    live(0, "stdout", "no newline at the end")
    live.close()
    assert capsys.readouterr().out == "[stdout:0] no newline at the end\n"


def test_sixty_four_ranks_read_as_a_few_groups():
    """64 ranks, all alike but rank 17 (which fails) and the value of rank 63: three groups and
    a grid of 64 cells, not 64 columns."""
    n = 64
    same = values.summarize(np.zeros(2))
    recs = {r: RankRecord(rank=r, ok=True, elapsed=0.01, result=same) for r in range(n)}
    recs[17] = RankRecord(rank=17, ok=False, elapsed=0.01, error=ErrorInfo("ValueError", "bad", "tb"))
    recs[63] = RankRecord(rank=63, ok=True, elapsed=0.01, result=values.summarize(np.ones(2)))
    states = {r: "failed" if r == 17 else "finished" for r in range(n)}
    res = CellResult("c", list(range(n)), recs, dict.fromkeys(range(n), "step 1\n"), dict.fromkeys(range(n), ""),
                     states, 0.5)
    text = view.render_text(res)
    headers = [line for line in text.splitlines() if line.startswith("[rank")]
    assert headers == ["[ranks 0-63]", "[ranks 0-16,18-62]", "[rank 17]", "[rank 63]"], headers
    assert "finished: ranks 0-16,18-63 (0.010 s); failed: rank 17 (0.010 s)" in text
    page = view.render_html(res)
    assert page.count("title='rank ") == n and page.count("class='mpinb-rank'") == 4


class Redrawn:
    """A display handle that keeps what it was redrawn with (IPython's DisplayHandle.update)."""

    def __init__(self):
        self.bundles = []

    def update(self, bundle, raw=False):
        assert raw
        self.bundles.append(bundle)

    def last(self, mime):
        return self.bundles[-1][mime]


def test_live_display_is_redrawn_in_place_with_each_rank_s_lines():
    """In a notebook the live boxes are one display redrawn in place (no Output widget, which
    stalls headless clients: view/live.py): each rank's lines in its own box, stderr marked,
    whole lines only, the text rendering with the same lines; nothing redrawn when nothing
    changed; emptied when the cell ends."""
    live = view.LiveOutput([0, 1], rich=True, interval=0)
    live.handle = Redrawn()
    live(0, "stdout", "a <b> & c\nhal")
    live(1, "stderr", "warned\n")
    live(0, "error", "Traceback ...")  # the final view shows errors
    page = live.handle.last("text/html")
    box0 = page.split("mpinb-live-output-0")[1].split("mpinb-live-output-1")[0]
    assert "a &lt;b&gt; &amp; c" in box0 and "hal" not in box0 and "Traceback" not in page
    assert "class='mpinb-live-stderr'" in page.split("mpinb-live-output-1")[1]
    assert live.handle.last("text/plain").splitlines() == ["[rank 0]", "  a <b> & c", "[rank 1]", "  warned"]
    drawn = len(live.handle.bundles)
    live.tick()
    assert len(live.handle.bundles) == drawn  # unchanged: not sent again
    live.close()
    assert "a &lt;b&gt; &amp; c\nhal" in live.handle.bundles[-2]["text/html"]  # the rest, at the end
    assert live.handle.bundles[-1] == {"text/plain": "", "text/html": ""}


def test_live_display_of_many_ranks_names_those_left_out():
    live = view.LiveOutput(range(12), rich=True)
    live.handle = Redrawn()
    assert live.html().count("class='mpinb-live-column'") == 8
    assert "ranks 8-11: their output shows when the cell ends" in live.html()
    assert live.text().endswith("ranks 8-11: their output shows when the cell ends")


def test_live_headers_show_each_rank_s_state_throttled():
    """Above each rank's live output: its state and time, in words, coloured by state; updated
    at most every state_interval seconds (the last state is kept for the next update)."""
    live = view.LiveOutput([0, 1], rich=True, state_interval=3600)
    live.handle = Redrawn()
    blocked = {"op": "allreduce", "call": 2, "bytes": 12, "peer": -1, "seconds": 4.93}
    live.state(0, "running", 5.2, blocked, None)
    live.state(1, "finished", 0.0123, None, None)  # within the interval: held
    assert len(live.handle.bundles) == 1
    rank0, rank1 = live.handle.last("text/html").split("class='mpinb-live-column'")[1:]
    assert "running 5 s, blocked in allreduce (call 2, 12 B, waiting 4.9 s)" in rank0
    assert "data-state='running'" in rank0 and "finished" not in rank1
    assert "[rank 0] running 5 s, blocked in allreduce" in live.handle.last("text/plain")  # the same facts
    live.state_interval = 0
    live.state(1, "failed", 0.5, None, "ValueError")
    rank1 = live.handle.last("text/html").split("class='mpinb-live-column'")[2]
    assert "failed (ValueError)" in rank1 and "data-state='failed'" in rank1
    assert view.live_words("finished", 0.0123, None, None) == "finished in 0.01 s"
    assert view.live_words("running", 2.4, None, None) == "running 2 s"
    # where the rank is, as the status thread reads it (mpinb.engine.stall)
    line = {"cell": "In[7]", "line": 3}
    assert view.live_words("running", 9.6, None, None, line) == "running 10 s at Cell In[7], line 3"
    in_jit = dict(line, call="stepper", collectives=[("all-reduce", 2)])
    assert view.live_words("running", 9.6, None, None, in_jit) == (
        "running 10 s, waits in jit(stepper) (all-reduce over 2 devices) at Cell In[7], line 3")
    assert view.live_words("running", 5.2, blocked, None, line) == (
        "running 5 s, blocked in allreduce (call 2, 12 B, waiting 4.9 s) at Cell In[7], line 3")
    # the cell's code returned; the work its jitted calls queued still runs (mpinb.engine.settle)
    settling = {"cell": "In[7]", "settling": True}
    assert view.live_words("running", 4.2, None, None, settling) == (
        "running 4 s, finishing the work its jitted calls queued after Cell In[7] returned")
    assert view.live_words("running", 5.2, blocked, None, settling) == (
        "running 5 s, blocked in allreduce (call 2, 12 B, waiting 4.9 s) after Cell In[7] returned")


def test_a_small_copy_is_one_line_with_its_detail_one_click_away():
    """An info finding about a copy under hlo.SMALL_COPY_BYTES reads as one line (text view);
    the HTML view folds the whole finding into a <details> under that line. A large one, or a
    warning, keeps its paragraph."""
    res = four_ranks()
    facts = hlo.Relayout("copy", "copy.2", "mpinb_alltoall", "cc.1", True, "f32[4,8]{0,1}", 128)
    small = hlo.HloWarning("relayout", 0, "jit_f", "copy.2", facts, "Cell In[4]:3", 128)
    large = dataclasses.replace(small, instruction="copy.3", nbytes=hlo.SMALL_COPY_BYTES)
    res.warnings = [small, large]
    lines = [ln for ln in view.render_text(res).splitlines() if "[relayout]" in ln]
    assert lines[0] == ("info [relayout] rank 0: XLA copies 128 B around a collective at Cell In[4]:3: small, "
                        "nothing to do"), lines
    assert "What to do:" in lines[1] and "What to do:" not in lines[0]
    page = view.render_html(res)
    folded = page[page.index("<details"):page.index("</details>")]
    assert "<summary>info [relayout] rank 0: XLA copies 128 B" in folded and "What to do:" in folded
    assert page.count("<details") == 1
    # two small copies that read the same in one line: said once, counted
    res.warnings = [small, dataclasses.replace(small, instruction="copy.4")]
    lines = [ln for ln in view.render_text(res).splitlines() if "[relayout]" in ln]
    assert lines == [f"{small_line} (2 copies)" for small_line in [lines[0].removesuffix(" (2 copies)")]], lines
    assert view.render_text(res, ViewOptions(by_rank=True)).count("XLA copies 128 B") == 1


def test_the_picture_of_a_sharded_array_says_which_rank_holds_which_block():
    from mpinb.view.blocks import picture

    rows_and_cols = {"shape": (8, 6), "dtype": "float32",
                     "blocks": [(0, ((0, 4), (0, 3))), (1, ((0, 4), (3, 6))), (2, ((4, 8), (0, 3))),
                                (3, ((4, 8), (3, 6)))]}
    assert picture("g", rows_and_cols) == [
        "g: float32[8,6] in 4 blocks over ranks 0-3",
        "            cols 0:3  cols 3:6",
        "  rows 0:4  rank 0    rank 1",
        "  rows 4:8  rank 2    rank 3"]
    replicated = {"shape": (8,), "dtype": "int32", "blocks": [(0, ((0, 8),)), (1, ((0, 8),))]}
    assert picture("r", replicated) == ["r: int32[8] in 1 block over ranks 0-1", "    [0:8]", "    ranks 0-1"]
    cube = {"shape": (4, 2, 2), "dtype": "float64",
            "blocks": [(1, ((2, 4), (0, 2), (0, 2))), (0, ((0, 2), (0, 2), (0, 2)))]}
    assert picture("t", cube) == ["t: float64[4,2,2] in 2 blocks over ranks 0-1", "  [0:2, :, :]  rank 0",
                                  "  [2:4, :, :]  rank 1"]
    assert picture("plain", {"shape": (3,), "dtype": "float32"}) == []
    assert picture("huge", {"shape": (4096,), "dtype": "float32", "blocks": 1024}) == [
        "huge: float32[4096] on 1024 devices (too many blocks to draw)"]
    many = {"shape": (40, 2), "dtype": "float32", "blocks": [(r, ((r, r + 1), (0, 2))) for r in range(40)]}
    lines = picture("many", many)
    assert lines[0] == "many: float32[40,2] in 40 blocks over ranks 0-39" and len(lines) == 18
    assert lines[1] == "  [0:1, :]    rank 0" and lines[-1] == "  ... 24 more blocks"


def test_a_sharded_value_is_drawn_once_for_the_ranks_that_share_the_picture():
    blocks = [(0, ((0, 2),)), (1, ((2, 4),))]
    show = {r: {"y": {"kind": "array", "shape": (4,), "dtype": "float32", "blocks": blocks, "local": True,
                      "min": 2.0 * r, "max": 2.0 * r + 1, "mean": 2.0 * r + 0.5, "preview": f"[{2 * r}, {2 * r + 1}]"}}
            for r in range(2)}
    recs = {r: RankRecord(rank=r, ok=True, show=show[r]) for r in (0, 1)}
    res = CellResult("c", [0, 1], recs, dict.fromkeys((0, 1), ""), dict.fromkeys((0, 1), ""),
                     dict.fromkeys((0, 1), "finished"), 0.1)
    text = view.render_text(res)
    assert text.count("y: float32[4] in 2 blocks over ranks 0-1") == 1, text
    assert "y: float32[4]  this rank's blocks:  min 2 max 3 mean 2.5  [2, 3]" in text, text
    assert "rows" not in view.render_html(res) and view.render_html(res).count("in 2 blocks over ranks 0-1") == 1


def test_a_pulled_array_is_drawn_on_its_own_scale():
    drawn = images.pulled("y", np.arange(12.0).reshape(3, 4))
    assert drawn["text/plain"] == "picture y: 3x4 values, colour scale 0 to 11"
    assert drawn["text/html"].count("data:image/png;base64,") == 2  # the picture and the colour bar
    assert images.pulled("row", np.arange(5))["text/plain"] == "picture row: 1x5 values, colour scale 0 to 4"
    assert images.pulled("big", np.ones((1000, 3)))["text/plain"].endswith("(sampled from 1000x3)")
    assert images.pulled("s", np.float32(2))["text/plain"] == "s: nothing to draw (float32[])"
    assert images.pulled("long", np.arange(1000))["text/plain"].endswith("1x160 values, colour scale 0 to 999 "
                                                                        "(sampled from 1x1000)")
    assert images.pulled("z", np.array([[3 + 4j]]))["text/plain"] == "picture z: 1x1 values, |x| colour scale 5 to 5"


def test_a_stream_s_state_gets_where_only_if_it_takes_it():
    from mpinb.cells.cell_run import state_reporter

    told = []

    class Old:  # a stream written before where existed: five arguments
        def state(self, rank, state, seconds, inflight, error_name):
            told.append(("old", rank, state))

    class New:
        def state(self, rank, state, seconds, inflight, error_name, where=None):
            told.append(("new", rank, where))

    class Unhashable:  # a callable object that cannot be a cache key, taking five arguments
        __hash__ = None

        def __call__(self, rank, state, seconds, inflight, error_name):
            told.append(("unhashable", rank, state))

    class Plain:  # a function of six, not a method
        state = staticmethod(lambda rank, state, seconds, inflight, error_name, where: told.append(("plain", where)))

    for _ in range(2):  # the second time from what was learnt the first
        told.clear()
        state_reporter(Old())(1, "running", 2.0, None, None, {"line": 3})
        state_reporter(New())(1, "running", 2.0, None, None, {"line": 3})
        state_reporter(type("Stream", (), {"state": Unhashable()})())(2, "finished", 2.0, None, None, None)
        state_reporter(Plain())(1, "running", 2.0, None, None, {"line": 4})
        assert told == [("old", 1, "running"), ("new", 1, {"line": 3}), ("unhashable", 2, "finished"),
                        ("plain", {"line": 4})]
    assert state_reporter(object()) is None


def test_the_words_about_blocked_ranks_agree_in_the_report_and_when_the_next_cell_is_refused():
    from mpinb.view.words import busy_words, way_out

    inflight = {0: {"op": "allreduce", "call": 3, "bytes": 16, "peer": -1, "seconds": 4.0}, 1: None}
    report = way_out([0, 1], inflight, {}, replayed=1)
    refused = busy_words([0, 1], inflight, {}, replayed=1)
    assert report == ["rank 0 is blocked inside MPI and cannot be interrupted: run %mpijax restart (your 1 "
                      "--setup cell is replayed; the engines' other variables are lost)"]
    assert refused.startswith("ranks 0-1 still run an earlier cell (rank 0 blocked in allreduce (call 3")
    assert refused.endswith(": " + report[0])  # the same advice, in the same words
    assert "interrupt it" not in refused
    computing = busy_words([1], {1: None}, {}, replayed=0)
    assert computing.endswith(": the ranks still running can be interrupted (stop button) or restarted")
    # a rank finishing what its jitted calls queued (mpinb.engine.settle): the stop cannot end that
    settling = busy_words([2], {2: None}, {2: {"cell": "In[4]", "settling": True}}, replayed=0)
    assert settling == ("rank 2 still runs an earlier cell (rank 2 finishing the work its jitted calls queued after "
                        "Cell In[4] returned): rank 2 is finishing work that jitted calls queued, which cannot be "
                        "interrupted: wait for it, or run %mpijax restart (the engines' variables are lost)")


def test_output_that_differs_only_by_each_rank_s_own_number_is_said_once():
    """JAX's Gloo log and a rank's hello: the same words but each rank's number (or host), grouped
    with the number marked; a value that differs otherwise stays per rank."""
    from mpinb.analysis.grouping import fold_rank_numbers, rank_template

    gloo = "[Gloo] Rank {r} is connected to 1 peer ranks. Expected number of connected peer ranks is : 1\n"
    texts = {r: gloo.format(r=r) for r in range(3)}
    folded = fold_rank_numbers(texts)
    assert set(folded.values()) == {gloo.format(r="\u27e80-2\u27e9")}  # the 1s that are not rank 1 stay
    assert fold_rank_numbers({0: "v 10\n", 1: "v 11\n"}) == {0: "v 10\n", 1: "v 11\n"}
    assert rank_template({0: "on a: 0", 1: "on b: 1"}, {0: "a", 1: "b"}) == "on \u27e8host\u27e9: \u27e8rank\u27e9"
    assert rank_template({0: "rank 0", 1: "rank 2"}) is None  # 2 is not rank 1's own number
    res = four_ranks()
    for r in range(4):
        res.stdout[r] = f"hello from rank {r} of 4\n"
    text = view.render_text(res)
    assert "[ranks 0-3]\n  stdout:\n      hello from rank \u27e80-3\u27e9 of 4" in text and text.count("hello") == 1
    assert "hello from rank 2 of 4" in view.render_text(res, ViewOptions(by_rank=True))  # in full, as said


def test_library_logs_fold_into_one_line_per_run_and_group_across_ranks():
    """Log lines, whoever wrote them (absl/glog headers, Python's logging, a [Component] tag),
    lose the time and thread that differ between ranks and fold into one line per run; a
    user's own lines around them stay as printed; --by-rank shows them as written."""
    from mpinb.analysis.grouping import log_line
    from mpinb.view.log_words import fold_logs

    assert log_line("I1205 10:39:06.123456  4242 external/xla/xla/pjrt/client.cc:77] connected") == (
        "xla", "connected")
    assert log_line("WARNING:jax._src.distributed:retrying") == ("jax", "retrying")
    assert log_line("[Gloo] Rank 1 is connected") == ("Gloo", "Rank 1 is connected")
    assert log_line("[rank 1] step 3") is None and log_line("loss 0.5") is None
    assert fold_logs("a\n[Gloo] one\n[Gloo] two\nb\n", "h") == "a\nlog (Gloo): one (+1 more log lines; all in h)\nb\n"
    res = four_ranks()
    for r in range(4):
        res.stderr[r] = (f"I1205 10:39:0{r}.12345{r}  {4000 + r} external/xla/xla/pjrt/distributed/client.cc:7] "
                         f"Connected to distributed JAX controller\n[Gloo] Rank {r} is connected to 3 peer ranks\n")
        res.stdout[r] = "my own line\n"
    text = view.render_text(res)
    assert text.count("log (xla, Gloo): Connected to distributed JAX controller (+1 more log lines; "
                      "all in _mpijax.stderr[rank])") == 1, text
    assert "[ranks 0-3]" in text and "my own line" in text
    assert "4003 external/xla" in view.render_text(res, ViewOptions(by_rank=True))


def test_an_error_is_said_once_its_traceback_folded_behind_it():
    """The error line, then the traceback without its last line (the same error): in text in
    full, in HTML folded behind 'traceback'; a multi-line message likewise."""
    tb = ("Traceback (most recent call last)\nCell In[7], line 3\n----> 3 total = mpi.allreduce(x)\n\n"
          "JaxRuntimeError: ABORTED: withdrawn before it ran\n")
    res = four_ranks()
    for r in (0, 1):
        res.records[r] = RankRecord(rank=r, ok=False, elapsed=0.1,
                                    error=ErrorInfo("JaxRuntimeError", "ABORTED: withdrawn before it ran", tb))
        res.states[r] = "failed"
    text = view.render_text(res)
    assert text.count("withdrawn before it ran") == 1, text
    assert "[ranks 0-1]" in text and "  error: JaxRuntimeError: ABORTED: withdrawn before it ran\n" in text, text
    assert "----> 3 total = mpi.allreduce(x)" in text
    page = view.render_html(res)
    folded = page.split("<details class='mpinb-folded'><summary>traceback</summary>")
    assert len(folded) == 2 and "----&gt; 3 total" in folded[1].split("</details>")[0]
    assert page.count("withdrawn before it ran") == 1
    from mpinb.view.text import error_lines

    two_lines = ErrorInfo("ValueError", "first\nsecond", "Traceback\n  line 1\nValueError: first\nsecond\n")
    assert error_lines(two_lines) == ["error: ValueError: first\nsecond", "    Traceback\n      line 1"]
    bare = ErrorInfo("EngineError", "the engine died", "")
    assert error_lines(bare) == ["error: EngineError: the engine died"]


def test_a_divergence_that_a_proven_deadlock_says_is_not_said_again():
    from mpinb.analysis.divergence import WORLD, Collective, Divergence, said_by_deadlock

    skipped = Divergence(WORLD, 2, 1, 0, 1, Collective("allreduce", "float32", (), None, "SUM"), None, 1, 0)
    assert said_by_deadlock(skipped, left=[1])  # rank 1 left: the deadlock's sentence says it
    assert not said_by_deadlock(skipped, left=[])
    other = Divergence(WORLD, 2, 1, 0, 1, Collective("bcast", "float32", (), 0), Collective("bcast", "float32", (), 1),
                       1, 1)
    assert not said_by_deadlock(other, left=[1])  # a different collective: said on its own
