"""jit-vs-eager classification (pure NumPy)."""

import numpy as np
import pytest

from mpinb.analysis import compare as cmp
from mpinb.view.compare_words import comparison_detail, comparison_line, comparisons_summary, ranks_words
from mpinb.view.hint_words import hint_words, stale_words


def flat(tree):
    if isinstance(tree, dict):
        return [(f"['{k}']", v) for k, v in sorted(tree.items())]
    return [("", tree)]


def test_equal_close_different():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert cmp.compare("a", a, a.copy()).status == "equal"
    c = cmp.compare("a", a, a + np.float32(1e-7))
    assert c.status == "close" and c.max_abs > 0
    b = a.copy()
    b[1, 2] += 1
    d = cmp.compare("a", a, b)
    assert d.status == "different"
    assert d.first_index == (1, 2)
    assert d.max_abs == pytest.approx(1.0)
    assert d.max_rel == pytest.approx(1 / 6)
    assert "first at [1, 2]" in comparison_line(d)


def test_dtype_tolerances_differ():
    x16 = np.array([1.0], np.float16)
    assert cmp.compare("h", x16, x16 + np.float16(0.0009765625)).status == "close"
    x64 = np.array([1.0])
    assert cmp.compare("d", x64, x64 + 1e-9).status == "different"


def test_nans_in_the_same_place_are_equal_and_elsewhere_different():
    a = np.array([1.0, np.nan])
    assert cmp.compare("n", a, a.copy()).status == "equal"
    assert cmp.compare("n", a, np.array([np.nan, 1.0])).status == "different"


def test_integers_shapes_dtypes():
    assert cmp.compare("i", np.arange(3), np.array([0, 1, 3])).first_index == (2,)
    assert "shape (3,) vs (4,)" in comparison_detail(cmp.compare("i", np.arange(3), np.arange(4)))
    assert "dtype" in comparison_detail(cmp.compare("i", np.arange(3), np.arange(3.0)))


def test_trees_and_namespaces():
    j = {"a": np.ones(2), "b": np.zeros(2)}
    e = {"a": np.ones(2), "b": np.ones(2)}
    out = cmp.compare_trees("p", j, e, flat)
    assert [c.status for c in out] == ["equal", "different"]
    assert out[1].name == "p['b']"
    comps = cmp.compare_namespaces(["x", "f", "gone"], {"x": np.ones(1), "f": len, "gone": np.ones(1)},
                                   {"x": np.ones(1), "f": len}, flat, lambda v: isinstance(v, np.ndarray))
    assert [(c.name, c.status) for c in comps] == [("x", "equal"), ("gone", "missing")]
    assert comparisons_summary({0: comps, 1: comps}) == "jit != eager: gone on ranks 0-1"
    assert comparisons_summary({0: [out[0]]}) == "jit == eager: p"
    assert comparisons_summary({0: out, 2: [out[0]], 3: out}) == "jit != eager: p on ranks 0, 3"
    assert comparisons_summary({0: []}) == ""


def test_ranks_words():
    assert ranks_words([3]) == "rank 3"
    assert ranks_words([0, 1, 2, 3]) == "ranks 0-3"
    assert ranks_words([5, 0, 2, 6, 7]) == "ranks 0, 2, 5-7"


def test_traces_name_the_stale_global_and_forget_what_was_traced_again():
    """mpinb.traces in one process: a jitted function noted after it was traced, a global it
    reads (inside a nested lambda) changed afterwards, a redefinition, an array global."""
    import jax
    import jax.numpy as jnp

    from mpinb.engine import traces

    ns = {"jax": jax, "jnp": jnp, "k": 2, "w": np.ones(3)}
    exec("f = jax.jit(lambda x: (lambda y: y * k)(x) + w)\nf(jnp.ones(3))", ns)  # noqa: S102
    traces.note_traces(ns)
    assert traces.hints("f(jnp.ones(3))", ns, {"z"}, False) == []
    ns["k"], ns["w"] = 5, np.zeros(3)
    stale = traces.stale_globals(ns["f"])
    assert stale == [{"global": "k", "was": "2", "now": {"repr": "5"}},
                     {"global": "w", "was": None, "now": {"dtype": "float64", "shape": [3]}}]
    assert [stale_words(s) for s in stale] == ["traced when k was 2; it is 5 now",
                                               "traced when w was another value; it is a float64[3] array now"]
    exec("def run():\n    return f(jnp.ones(3))", ns)  # noqa: S102 - called through a plain function
    assert [hint_words(h).split(":")[0] for h in traces.hints("z = run()", ns, {"z"}, False)] == [
        "f was traced when k was 2; it is 5 now", "f was traced when w was another value; it is a float64[3] array now"]
    exec("f(jnp.ones((2, 3)))", ns)  # noqa: S102 - traced again (a new shape): its globals are current
    traces.note_traces(ns)
    assert traces.stale_globals(ns["f"]) == []


def block_label(index, shape):
    from mpinb.wire.values import block_bounds, block_text

    return block_text(block_bounds(index, shape), shape)


def test_a_block_of_a_sharded_array_is_named_by_its_slices():
    assert block_label((slice(0, 4), slice(None)), (8, 3)) == "[0:4, :]"
    assert block_label((slice(None, None), slice(2, 3)), (8, 3)) == "[:, 2:3]"
    assert block_label((slice(None), slice(0, 3)), (8, 3)) == "[...]"  # this rank holds all of it
    assert block_label((), ()) == "[...]"


def test_names_computed_from_a_call_are_followed_through_the_cell():
    from mpinb.engine.passes import computed_from

    code = ("import numpy as np\nwhole = mu.process_allgather(y, tiled=True)\nsame = bool(np.array_equal(whole, A))\n"
            "other = np.ones(3)\nn: int = len(whole)\nk = 0\nk += n")
    assert computed_from(code, "mu.process_allgather") == {"whole", "same", "n", "k"}
    assert computed_from(code, "np.ones") == {"other"}
    # inside loops and with blocks, through := and for targets, in any order of the statements
    code = ("for i in range(2):\n    a = mu.process_allgather(x)\nb = a + 1\nc = (d := mu.process_allgather(x)) * 2\n"
            "e = d\nfor row in a:\n    f = row\nwith ctx(b) as g:\n    pass\nh = late\nlate = e")
    assert computed_from(code, "mu.process_allgather") == {"a", "b", "c", "d", "e", "row", "f", "g", "h", "late"}


def test_printed_text_that_differs_is_said_apart_from_the_values_verdict():
    """Timings printed by a cell, or a print inside a jitted function, differ between the passes:
    said as such, never as 'jit != eager' (which is about values)."""
    printed = cmp.Comparison("stdout", "different", cause="printed_text", jitted=1, eager=1, quiet=True,
                             printed=True)
    equal = cmp.Comparison("x", "equal")
    assert comparisons_summary({0: [equal, printed], 1: [equal]}) == (
        "jit == eager: x; printed differently: stdout on rank 0")
    assert comparisons_summary({0: [printed]}) == "printed differently: stdout on rank 0"
    assert comparison_line(printed) == ("stdout: printed differently: the two runs printed different text (1 line "
                                        "each; timings, or values computed differently)")
    differ = cmp.Comparison("y", "different", max_abs=1.0, max_rel=1.0)
    assert comparisons_summary({0: [differ, printed]}) == (
        "jit != eager: y on rank 0; printed differently: stdout on rank 0")
