"""Layout analysis on captured optimized HLO (tests/data, compiled on 2 ranks) - no cluster."""

from pathlib import Path

from mpinb.analysis import hlo, hlo_text
from mpinb.view.hlo_words import collective_words, finding_line, finding_message

DATA = Path(__file__).parent / "data"


def load(name):
    return (DATA / name).read_text()


def kinds(warnings):
    return sorted(w.kind for w in warnings)


def test_parse_shapes_and_layouts():
    arrays = hlo_text.parse_arrays("(f32[2,4,6]{2,0,1}, s8[])")
    assert [str(a) for a in arrays] == ["f32[2,4,6]{2,0,1}", "s8[]"]
    assert not arrays[0].row_major and arrays[1].row_major
    assert arrays[0].nbytes == 192
    assert hlo_text.parse_arrays("bf16[3,5]{1,0:T(8,128)}")[0].row_major


def test_safe_transpose_has_only_relayout_warnings_with_sizes_and_source():
    module = hlo_text.parse_module(load("safe_transpose.hlo.txt"))
    warnings = hlo.layout_warnings(module, rank=0)
    assert kinds(warnings) == ["relayout", "relayout"]
    feeding = [w for w in warnings if "to feed mpinb_alltoall" in finding_message(w)]
    assert len(feeding) == 1 and "(192 B)" in finding_message(feeding[0])
    assert feeding[0].source.startswith("/tmp/gen.py:9 (mk.<locals>.f)")


def test_follow_producer_is_the_seed_bug_signature():
    warnings = hlo.layout_warnings(hlo_text.parse_module(load("follow_transpose.hlo.txt")), rank=1)
    bad = [w for w in warnings if w.kind == "non-row-major"]
    assert len(bad) == 1
    assert "f32[2,4,6]{2,0,1}" in finding_message(bad[0]) and bad[0].rank == 1
    assert "rank 1, jit_f" in finding_line(bad[0])


def test_unconstrained_custom_call_is_reported():
    warnings = hlo.layout_warnings(hlo_text.parse_module(load("unconstrained_transpose.hlo.txt")), rank=0)
    assert [w.kind for w in warnings if w.kind in ("unconstrained", "non-row-major")] == ["unconstrained"]
    assert "no operand layout constraints" in finding_message(next(w for w in warnings if w.kind == "unconstrained"))


def test_mpinb_collectives_are_compared_as_they_ran_not_as_compiled():
    """Ranks that compiled different mpinb collectives under one name get no finding from their
    HLO: what each rank ran is compared (mpinb.analysis.divergence, tests/test_divergence.py),
    whether a rank compiled it in the cell or took it from JAX's cache."""
    per_rank = {0: [("module_0007.jit_g", load("divergent_rank0.hlo.txt"))],
                1: [("module_0009.jit_g", load("divergent_rank1.hlo.txt"))]}
    assert [w for w in hlo.analyze(per_rank) if w.kind == "divergent"] == []
    assert [w for w in hlo.analyze({0: per_rank[0], 1: []}) if w.kind == "divergent"] == []


def test_same_sequences_are_not_divergent():
    text = load("safe_transpose.hlo.txt")
    assert not [w for w in hlo.analyze({0: [("jit_f", text)], 1: [("jit_f", text)]}) if w.kind == "divergent"]


def test_highlight_marks_only_non_row_major():
    lines = hlo_text.marked_lines(load("follow_transpose.hlo.txt"), only_custom_calls=True)
    marked = "\n".join(line for line, _ in lines)
    assert "<<f32[2,4,6]{2,0,1}>>" in marked
    assert "<<f32[2,4,6]{2,1,0}>>" not in marked


def test_module_without_custom_calls_has_no_warnings():
    text = "HloModule m\n\nENTRY %main (p: f32[2]) -> f32[2] {\n  ROOT %p = f32[2]{0} parameter(0)\n}\n"
    assert hlo.analyze({0: [("m", text)]}) == []


def test_hlo_view_shows_identical_ranks_once_with_marked_lines():
    """Two ranks compiled the same module (their MPI handles differ, as they do per process):
    one block for both, the non-row-major lines highlighted in the HTML."""
    from mpinb.view.tables import HloView

    text = ("HloModule m\nENTRY %main {\n  %a = f32[4,4]{0,1} parameter(0)\n  ROOT %c = (f32[4,4]{0,1}, s8[]) "
            'custom-call(%a), custom_call_target="mpinb_alltoall", backend_config={comm = 5 : i64}\n}\n')
    view = HloView({0: [("jit_f", text)], 1: [("jit_f", text.replace("comm = 5", "comm = 6"))],
                    2: [("jit_f", text.replace("f32[4,4]{0,1} parameter", "f32[4,4]{1,0} parameter"))]})
    plain = view.text()
    assert plain.count("ENTRY") == 2 and "[ranks 0-1]" in plain and "[rank 2]" in plain
    bundle = view._repr_mimebundle_()
    assert bundle["text/html"].count("class='mpinb-marked'") == 3  # 2 lines of ranks 0-1, 1 of rank 2
    assert "white-space:pre;" in bundle["text/html"]  # long lines scroll, never wrap inside a token


# XLA's own collectives, as shard_map and psum compile them over 2 devices (tests/data/xla_*:
# jax.jit(jax.shard_map(...)) of lax.psum and of a tiled lax.all_to_all followed by .T)


def test_collectives_are_listed_in_words():
    assert hlo.module_collectives(hlo_text.parse_module(load("xla_psum.hlo.txt"))) == [("all-reduce", 2)]

    def words(module):
        return [collective_words(*c) for c in hlo.module_collectives(module)]

    assert words(hlo_text.parse_module(load("xla_psum.hlo.txt"))) == ["all-reduce over 2 devices"]
    assert words(hlo_text.parse_module(load("xla_all_to_all.hlo.txt"))) == ["all-to-all over 2 devices"]
    assert words(hlo_text.parse_module(load("safe_transpose.hlo.txt"))) == ["mpinb alltoall"]  # mpinb's own


def test_the_transpose_around_xla_s_all_to_all_is_a_relayout():
    warnings = hlo.analyze({0: [("module_0003.jit_transpose", load("xla_all_to_all.hlo.txt"))]})
    assert kinds(warnings) == ["relayout"]
    assert "relayouts the result of all-to-all" in finding_message(warnings[0])
    assert warnings[0].source and warnings[0].source.endswith("(transpose)")


def test_an_xla_collective_compiled_on_some_ranks_only_is_not_a_finding():
    """The ranks that did not compile it may have taken it from JAX's cache: a module compiled
    on some ranks only says nothing of what the others ran."""
    psum = ("module_0004.jit_stepper", load("xla_psum.hlo.txt"))
    assert not [w for w in hlo.analyze({0: [psum], 1: [], 2: [psum], 3: []}) if w.kind == "divergent"]
    assert not [w for w in hlo.analyze({0: [psum], 1: [psum]}) if w.kind == "divergent"]


def test_different_xla_collectives_under_one_name_are_divergent():
    per_rank = {0: [("module_0001.jit_step", load("xla_psum.hlo.txt"))],
                1: [("module_0002.jit_step", load("xla_all_to_all.hlo.txt"))]}
    div = [w for w in hlo.analyze(per_rank) if w.kind == "divergent"]
    assert len(div) == 1
    assert "at collective #1 of jit_step, rank 0 compiled all-reduce f32[4,4]" in finding_message(div[0])
    assert "but rank 1 compiled all-to-all" in finding_message(div[0])


def dump_folder(tmp_path, monkeypatch, last_change_ns):
    """An empty dump folder as the engine's, last changed at ``last_change_ns``."""
    import os

    from mpinb.engine import hlo_capture
    from mpinb.engine.state import STATE

    folder = tmp_path / "rank0"
    folder.mkdir()
    os.utime(folder, ns=(last_change_ns, last_change_ns))
    monkeypatch.setattr(STATE, "dump", str(folder))
    monkeypatch.setattr(hlo_capture, "_quiet", [None])
    return folder


def written(folder, name, changed_ns):
    """A module's optimized HLO written into ``folder``, whose time then reads ``changed_ns``."""
    import os

    (folder / f"{name}.cpu_after_optimizations.txt").write_text(load("safe_transpose.hlo.txt"))
    os.utime(folder, ns=(changed_ns, changed_ns))


def test_a_dump_folder_found_empty_is_read_again_once_written_to(tmp_path, monkeypatch):
    """Most cells compile nothing: the folder is not read while its time stays as it was when
    found empty; a module written later moves that time and is read, then deleted."""
    import time

    from mpinb.engine import hlo_capture

    long_ago = time.time_ns() - 2 * hlo_capture.QUIET_AFTER_NS
    folder = dump_folder(tmp_path, monkeypatch, long_ago)
    assert hlo_capture.new_hlo_modules() == [] and hlo_capture._quiet == [long_ago]
    written(folder, "module_0001.jit_step", long_ago + 1)
    assert [name for name, _ in hlo_capture.new_hlo_modules()] == ["module_0001.jit_step"]
    assert list(folder.iterdir()) == []


def test_a_dump_folder_changed_a_moment_ago_is_always_read(tmp_path, monkeypatch):
    """A folder's time is coarse (a clock's ticks, whole seconds on some filesystems): one
    changed within the last few seconds can be written again without its time moving, so it is
    never taken as quiet."""
    import time

    from mpinb.engine import hlo_capture

    recent = time.time_ns() - hlo_capture.QUIET_AFTER_NS // 2  # recent however slowly this test runs
    folder = dump_folder(tmp_path, monkeypatch, recent + hlo_capture.QUIET_AFTER_NS // 4)
    assert hlo_capture.new_hlo_modules() == [] and hlo_capture._quiet == [None]
    written(folder, "module_0002.jit_step", recent + hlo_capture.QUIET_AFTER_NS // 4)  # its time did not move
    assert [name for name, _ in hlo_capture.new_hlo_modules()] == ["module_0002.jit_step"]


def test_no_dump_folder_means_no_modules(tmp_path, monkeypatch):
    """A dump folder that is gone, or a file in its place, gives no modules (and no error)."""
    from mpinb.engine import hlo_capture
    from mpinb.engine.state import STATE

    monkeypatch.setattr(hlo_capture, "_quiet", [None])
    monkeypatch.setattr(STATE, "dump", str(tmp_path / "gone"))
    assert hlo_capture.new_hlo_modules() == []
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setattr(STATE, "dump", str(tmp_path / "a-file"))
    assert hlo_capture.new_hlo_modules() == []
