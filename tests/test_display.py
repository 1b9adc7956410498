"""The per-rank view rendered from a synthetic result (no cluster, no kernel)."""

import zlib

import numpy as np
import pytest
from views import widget_html

from mpinb import compare as cmp
from mpinb import display, hlo, values
from mpinb.cell import CellResult, parse_ranks
from mpinb.records import ErrorInfo, RankRecord


def result():
    recs = {
        0: RankRecord(rank=0, ok=True, elapsed=0.01, result=values.summarize(np.arange(8.0)),
                      show={"y": values.summarize(np.ones((2, 2)), image=True)},
                      comparisons=[cmp.Comparison("y", "equal")]),
        1: RankRecord(rank=1, ok=False, elapsed=0.02,
                      error=ErrorInfo("ValueError", "boom", "Traceback...\nValueError: boom")),
        2: None,
    }
    w = [hlo.HloWarning("unconstrained", 0, "jit_f", "cc.1", "custom call x has no operand layout constraints"),
         hlo.HloWarning("divergent", None, "jit_g", "collective #1", "rank 0 compiled a but rank 2 compiled b")]
    return CellResult("code", [0, 1, 2], recs, {0: "hi\n", 1: "", 2: "partial\n"}, {0: "", 1: "oops\n", 2: ""},
                      {0: "finished", 1: "failed", 2: "running"}, 1.5, w, True, True)


def test_summary_line():
    assert result().summary() == ("3 ranks, 1.50 s, 1 failed (1), 1 still running (2), timed out, "
                                  "2 layout warnings (1 divergent, 1 unconstrained), jit == eager: y")


def test_text_has_one_block_per_rank():
    text = display.render_text(result())
    blocks = text.split("[rank ")
    assert len(blocks) == 4
    r0, r1, r2 = blocks[1], blocks[2], blocks[3]
    assert "hi" in r0 and "Out: float64[8]  min 0 max 7 mean 3.5" in r0 and "compare: y: jit == eager" in r0
    assert "[unconstrained]" in r0
    assert "error: ValueError: boom" in r1 and "oops" in r1
    assert "state: still running, not inside an mpinb collective" in r2 and "partial" in r2
    assert text.rstrip().endswith("rank 0 compiled a but rank 2 compiled b")


def test_html_has_one_column_per_rank_and_an_image():
    page = display.render_html(result())
    assert page.count("class='mpinb-rank'") == 3
    assert "data:image/png;base64," in page


def test_mimebundle_outside_a_kernel_is_text_and_html():
    bundle = result()._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert bundle["text/plain"].startswith("3 ranks")


def test_png_is_a_valid_grayscale_image():
    png = values.png_gray(np.arange(12.0).reshape(3, 4))
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (64, 48)  # enlarged 16x to be visible
    idat = png[png.index(b"IDAT") + 4:png.index(b"IEND") - 8]
    raw = zlib.decompress(idat)
    assert len(raw) == height * (width + 1)


def test_parse_ranks():
    assert parse_ranks(None, 4) == [0, 1, 2, 3]
    assert parse_ranks("all", 3) == [0, 1, 2]
    assert parse_ranks("0,2-3", 4) == [0, 2, 3]
    assert parse_ranks([3, 1], 4) == [1, 3]
    for bad in ("5", "a", "2-1x"):
        with pytest.raises(ValueError, match="--ranks"):
            parse_ranks(bad, 4)


def test_widget_html_and_text_carry_the_same_facts():
    """Notes (restart advice), shared warnings and per-rank text: in the widget, the HTML and
    text/plain alike."""
    res = result()
    res.notes.append("rank(s) [2] are blocked inside MPI; SIGINT cannot free them: run %mpijax restart")
    text = display.render_text(res)
    page = display.render_html(res)
    widget = widget_html(display.build_widget(res))
    for fact in ("SIGINT cannot free them: run %mpijax restart", "rank 0 compiled a but rank 2 compiled b",
                 "ValueError: boom", "partial", "jit == eager: y"):
        assert fact in text, fact
        assert fact in page, fact
        assert fact in widget, fact


def test_records_are_typed_and_pickle():
    import pickle
    import typing

    from mpinb.records import State

    rec = result().records[1]
    assert pickle.loads(pickle.dumps(rec)) == rec  # noqa: S301 - our own bytes
    assert rec.error.ename == "ValueError" and str(rec.error) == "ValueError: boom"
    assert set(typing.get_args(State)) == {"finished", "failed", "running", "dead"}
    assert set(result().states.values()) <= set(typing.get_args(State))
    with pytest.raises(TypeError):
        RankRecord(0, True, 0.0, None, None, {}, [], None, [], False, "extra")  # no stray fields
