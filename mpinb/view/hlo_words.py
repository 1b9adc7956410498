"""The layout findings in words (mpinb.analysis.hlo returns their facts): what each kind means,
what to do and where it is explained, each finding's sentence, and the finding in plain words or in one line. Pure:
no IPython, no widgets (light enough for an engine to import).
"""

from __future__ import annotations

from ..analysis import hlo
from ..analysis.divergence import Divergence
from ..analysis.hlo_text import human_bytes
from .divergence_words import divergence_message
from .links import Reference

#: what each kind of finding means
MEANINGS = {
    "non-row-major": "a collective reads a buffer that is not row-major: ranks exchange scrambled data",
    "divergent": "the ranks ran (or compiled) different collectives: they may deadlock or mix data",
    "unconstrained": "a custom call without layout constraints: row-major here, maybe not on GPU",
    "relayout": "XLA copies a buffer into row-major order for a collective: correct, costs a copy",
}

#: what to do about each kind of finding
ACTIONS = {
    "non-row-major": "use mpinb's collectives (they pin row-major layouts) or make the buffer contiguous first",
    "divergent": "make every rank call the same collectives in the same order with the same shapes",
    "unconstrained": "pin its operand and result layouts (mpinb's collectives do)",
    "relayout": "nothing, unless the copy is large: then transpose after the collective instead of before",
}


#: the tutorial that explains the layout findings
TUTORIAL = "02_debugging_transpose.ipynb"

#: where each kind of finding is explained (the view links it: mpinb.view.links)
REFERENCES = {
    "non-row-major": Reference(TUTORIAL, "Reproducing-the-symptom-on-CPU:-jitted-wrong,-eager-right-(warning-1)",
                               "Reproducing the symptom on CPU: jitted wrong, eager right"),
    "divergent": Reference("06_hangs.ipynb", "A-collective-inside-a-branch-that-depends-on-the-rank",
                           "A collective inside a branch that depends on the rank"),
    "unconstrained": Reference(TUTORIAL, "A-custom-call-without-layout-constraints-(warning-2)",
                               "A custom call without layout constraints"),
    "relayout": Reference(TUTORIAL, "What-XLA-compiled", "What XLA compiled"),
}


def collective_words(name: str, size: int | None = None) -> str:
    """A collective in words: 'all-reduce over 2 devices' (XLA's), 'mpinb alltoall' (mpinb's)."""
    return name.replace("mpinb_", "mpinb ", 1) + (f" over {size} devices" if size else "")


def at(source: str | None) -> str:
    """' at Cell In[3], line 2', or '' where the source is not known."""
    return f" at {source}" if source else ""


def unconstrained_message(f: hlo.Unconstrained) -> str:
    return (f"custom call {f.target} has no operand layout constraints; it is row-major here by "
            "XLA:CPU's choice, another backend may hand it a transposed buffer")


def non_row_major_message(f: hlo.NonRowMajor) -> str:
    layouts = ", ".join([*f.operands, *(f"result {a}" for a in f.results)])
    return (f"custom call {f.target} gets non-row-major layout(s) {layouts}: it reads memory in an order "
            "its indices do not describe")


def relayout_message(f: hlo.Relayout) -> str:
    if f.feeds:
        return (f"{f.opcode} %{f.name} materialises {f.array} ({human_bytes(f.nbytes or 0)}) to feed "
                f"{f.collective} (%{f.collective_name})")
    size = f" ({human_bytes(f.nbytes)})" if f.array is not None and f.nbytes is not None else ""
    return f"{f.opcode} %{f.name} relayouts the result of {f.collective} (%{f.collective_name}){size}"


def compiled_step(step: str | None) -> str:
    return step if step is not None else "no further collective"


def compiled_apart_message(f: hlo.CompiledApart) -> str:
    counts = (f"; rank {f.first} compiled {f.first_count} collectives, rank {f.other} {f.other_count}"
              if f.first_count != f.other_count else "")
    return (f"at collective #{f.position} of {f.module}, rank {f.first} compiled {compiled_step(f.first_step)}"
            f"{at(f.first_source)} but rank {f.other} compiled {compiled_step(f.other_step)}{at(f.other_source)}"
            f"{counts}: the ranks may deadlock")


#: each finding's facts, by their class, and how they are said
MESSAGES = {
    hlo.Unconstrained: unconstrained_message,
    hlo.NonRowMajor: non_row_major_message,
    hlo.Relayout: relayout_message,
    hlo.CompiledApart: compiled_apart_message,
    Divergence: divergence_message,
}


def finding_message(w: hlo.HloWarning) -> str:
    """The finding's own sentence: what was found, where in the HLO."""
    return MESSAGES[type(w.facts)](w.facts)


def finding_line(w: hlo.HloWarning) -> str:
    """'[relayout] rank 0, jit_f, %copy.1 at Cell In[3], line 2: copy %copy.1 ...'."""
    who = f"rank {w.rank}" if w.rank is not None else "ranks"
    return f"[{w.kind}] {who}, {w.module}, %{w.instruction}{at(w.source)}: {finding_message(w)}"


def finding_plain(w: hlo.HloWarning) -> str:
    """The finding in plain words, without severity, rank or module: meaning, where, what to do
    (where to read more: REFERENCES[kind], which the view links)."""
    where = f" ({w.source})" if w.source else ""
    return f"{MEANINGS[w.kind]}{where}. {finding_message(w)}. What to do: {ACTIONS[w.kind]}."


def finding_brief(w: hlo.HloWarning) -> str:
    """The finding in one line: what is copied, how much, where; for a small one, that it needs nothing."""
    return f"XLA copies {human_bytes(w.nbytes or 0)} around a collective{at(w.source)}: small, nothing to do"
