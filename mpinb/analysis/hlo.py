"""Layout analysis of compiled (optimized) HLO text. Pure text analysis: no JAX, no IPython.

Input: the ``*.cpu_after_optimizations.txt`` modules XLA dumped on each rank during a cell
(``XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text``), or ``jitted.lower(...).compile().as_text()``.
Output: warnings, each naming rank, module, instruction and, where the metadata has it, the
user's source line:

1. ``non-row-major``: a custom call whose operand or result layout is not row-major, the
   signature of the seed bug (mpi4jax issue 176): the callee reads memory in an order its
   indices do not describe.
2. ``unconstrained``: a custom call without operand layout constraints. XLA:CPU happens to
   choose row-major, so it is correct by luck here; GPU layout assignment did not.
3. ``relayout``: a copy or materialised transpose feeding, or fed by, an MPI collective, with
   its size (the price of pinning row-major layouts, worth seeing in a distributed transpose).
4. ``divergent``: ranks compiled different sequences of XLA's own collectives for the same
   function: a deadlock risk. mpinb's collectives are compared as the ranks ran them
   (mpinb.analysis.divergence, worded as the same kind of finding): what a rank compiled in a
   cell says nothing of a rank that took the same computation from JAX's cache.

Collectives are mpinb's custom calls (and mpi4jax's) and XLA's own (``all-reduce``,
``all-to-all``, ``all-gather``, ``reduce-scatter``, ``collective-permute``, ...), which
``shard_map`` and ``psum`` compile to on a ``jax.distributed`` cluster.

The HLO text itself is read by mpinb.analysis.hlo_text.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence

from .hlo_text import Array, Instruction, Module, parse_arrays, parse_module

#: the severities of findings, most severe first
SEVERITIES = ("error", "warning", "info")
#: custom-call targets that are MPI collectives (mpinb's, and mpi4jax's for comparison)
COLLECTIVE_PREFIXES = ("mpinb_", "mpi_")
#: XLA's own collective instructions (the asynchronous ones by their start)
XLA_COLLECTIVES = ("all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "all-to-all",
                   "ragged-all-to-all", "reduce-scatter", "collective-permute", "collective-permute-start",
                   "collective-broadcast")


# ----------------------------------------------------------------------------- warnings


#: each kind of HLO finding and its severity (error: gives wrong results; warning: may; info: a
#: cost); mpinb.view.hlo_words says what each means, what to do and where it is explained
KINDS = {"non-row-major": "error", "divergent": "error", "unconstrained": "warning", "relayout": "info"}


@dataclasses.dataclass(frozen=True)
class Unconstrained:
    """A custom call without operand layout constraints."""

    target: str


@dataclasses.dataclass(frozen=True)
class NonRowMajor:
    """A custom call handed layouts that are not row-major (each array as HLO writes it)."""

    target: str
    operands: tuple[str, ...]
    results: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Relayout:
    """A copy or transpose next to a collective: ``feeds`` it, or relayouts its result."""

    opcode: str
    name: str
    collective: str
    collective_name: str
    feeds: bool
    array: str | None        # the array copied, as HLO writes it (where known)
    nbytes: int | None


@dataclasses.dataclass(frozen=True)
class CompiledApart:
    """Where two ranks compiled different sequences of XLA's collectives for one module."""

    module: str
    position: int                 # the first collective that differs, from 1
    first: int
    other: int
    first_step: str | None        # None: no further collective
    other_step: str | None
    first_source: str | None
    other_source: str | None
    first_count: int
    other_count: int


#: an info finding about a copy smaller than this is put in one line (its detail one click away)
SMALL_COPY_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class HloWarning:
    kind: str        # a key of KINDS
    rank: int | None
    module: str
    instruction: str
    facts: object    # Unconstrained, NonRowMajor, Relayout, CompiledApart, or a divergence's facts
    source: str | None = None
    nbytes: int | None = None  # the size of what a relayout copies, where known

    @property
    def severity(self) -> str:
        return KINDS[self.kind]

    @property
    def identity(self) -> tuple:
        """What makes two findings the same finding: equal on several ranks, or on the nested
        modules of one jitted call, it is shown once (module names and ranks left out)."""
        return (self.kind, self.instruction, self.facts, self.source)

    @property
    def small(self) -> bool:
        """An info finding about a copy below SMALL_COPY_BYTES: worth one line, not a paragraph."""
        return self.severity == "info" and self.nbytes is not None and self.nbytes < SMALL_COPY_BYTES


def distinct(warnings) -> list[tuple[HloWarning, list[int | None]]]:
    """Each distinct finding once, with the ranks it was found on (None: found across ranks)."""
    seen: dict[tuple, tuple[HloWarning, list]] = {}
    for w in warnings:
        _, ranks = seen.setdefault(w.identity, (w, []))
        if w.rank not in ranks:
            ranks.append(w.rank)
    return sorted(seen.values(), key=lambda item: SEVERITIES.index(item[0].severity))


def is_collective(inst: Instruction) -> bool:
    """An MPI collective's custom call, or one of XLA's collectives."""
    if inst.opcode in XLA_COLLECTIVES:
        return True
    target = inst.attr("custom_call_target") or ""
    return inst.opcode == "custom-call" and target.startswith(COLLECTIVE_PREFIXES)


def collective_name(inst: Instruction) -> str:
    """'mpinb_alltoall' for a custom call, 'all-reduce' for XLA's (an async start by its op)."""
    if inst.opcode == "custom-call":
        return inst.attr("custom_call_target") or "?"
    return inst.opcode.removesuffix("-start")


def group_size(inst: Instruction) -> int | None:
    """How many devices each group of an XLA collective spans ({{0,1},{2,3}}: 2; [2,4]<=[8]: 4)."""
    groups = inst.attr("replica_groups")
    if groups is None:
        return None
    m = re.match(r"\s*\{([0-9,\s]*)\}", groups)
    if m:
        return len([g for g in m.group(1).split(",") if g.strip()])
    m = re.match(r"\s*\[([0-9,]+)\]<=", groups)
    return int(m.group(1).split(",")[-1]) if m else None


def collective_facts(inst: Instruction) -> tuple[str, int | None]:
    """(name, group size) of a collective: ('all-reduce', 2) for XLA's over groups of 2 devices,
    ('mpinb_alltoall', None) for mpinb's (mpinb.view.hlo_words.collective_words says it)."""
    return collective_name(inst), group_size(inst) if inst.opcode in XLA_COLLECTIVES else None


def module_collectives(module: Module) -> list[tuple[str, int | None]]:
    """A module's collectives in scheduled order, as (name, group size) (see collective_facts)."""
    return [collective_facts(module.instructions[n]) for n in module.order if is_collective(module.instructions[n])]


def custom_calls(module: Module) -> list[Instruction]:
    return [module.instructions[n] for n in module.order if module.instructions[n].opcode == "custom-call"]


def _operand_arrays(module: Module, inst: Instruction) -> list[tuple[str, Array]]:
    out = []
    for name in inst.operands:
        prod = module.producer(name)
        if prod is not None:
            arrays = prod.arrays
            if len(arrays) == 1:
                out.append((name, arrays[0]))
    return out


def _is_relayout(module: Module, inst: Instruction) -> bool:
    """A copy that changes layout, a transpose, or a fusion that materialises one."""
    if inst.opcode == "transpose":
        return True
    if inst.opcode == "copy":
        src = module.producer(inst.operands[0]) if inst.operands else None
        src_arrays = src.arrays if src is not None else []
        dst = inst.arrays
        return not (src_arrays and dst and src_arrays[0].layout == dst[0].layout)
    if inst.opcode == "fusion":
        called = inst.attr("calls")
        body = module.computations.get(called.lstrip("%"), []) if called else []
        return any(module.instructions[n].opcode in ("transpose", "copy") for n in body)
    return False


def layout_warnings(module: Module, rank: int | None = None) -> list[HloWarning]:
    warnings: list[HloWarning] = []
    for inst in custom_calls(module):
        warnings.extend(_custom_call_layouts(module, inst, rank))
    for name in module.order:
        inst = module.instructions[name]
        if is_collective(inst):
            warnings.extend(_relayouts(module, inst, rank))
    return warnings


def _custom_call_layouts(module: Module, inst: Instruction, rank: int | None) -> list[HloWarning]:
    """Findings 1 and 2 for one custom call: no operand layout constraints, non-row-major layouts."""
    target = inst.attr("custom_call_target") or "?"
    src = module.source(inst)
    constraints = inst.attr("operand_layout_constraints")
    operands = _operand_arrays(module, inst)
    out = []
    if constraints is None and operands:
        out.append(HloWarning("unconstrained", rank, module.name, inst.name, Unconstrained(target), src))
    declared = parse_arrays(constraints) if constraints is not None else [a for _, a in operands]
    bad = tuple(str(a) for a in declared if not a.row_major)
    bad_results = tuple(str(a) for a in inst.arrays if not a.row_major)
    if bad or bad_results:
        out.append(HloWarning("non-row-major", rank, module.name, inst.name,
                              NonRowMajor(target, bad, bad_results), src))
    return out


#: instructions between a collective and the user of its result
_PASS_THROUGH = ("get-tuple-element", "all-reduce-done", "all-gather-done", "collective-permute-done")


def _relayouts(module: Module, inst: Instruction, rank: int | None) -> list[HloWarning]:
    """Finding 3 for one collective: copies and transposes that feed it or relayout its result."""
    target = collective_name(inst)
    src = module.source(inst)
    out = []
    for name, arr in _operand_arrays(module, inst):
        prod = module.producer(name)
        if prod is not None and _is_relayout(module, prod):
            facts = Relayout(prod.opcode, prod.name, target, inst.name, True, str(arr), arr.nbytes)
            out.append(HloWarning("relayout", rank, module.name, prod.name, facts,
                                  module.source(prod) or src, arr.nbytes))
    seen = set()
    for user in module.users(inst.name):
        consumers = [user] + (module.users(user.name) if user.opcode in _PASS_THROUGH else [])
        for c in consumers:
            if c.opcode not in _PASS_THROUGH and c.name not in seen and _is_relayout(module, c):
                seen.add(c.name)
                arr = c.arrays[0] if c.arrays else None
                nbytes = arr.nbytes if arr else None
                facts = Relayout(c.opcode, c.name, target, inst.name, False, str(arr) if arr else None, nbytes)
                out.append(HloWarning("relayout", rank, module.name, c.name, facts,
                                      module.source(c) or src, nbytes))
    return out


def xla_collective_signature(inst: Instruction) -> str:
    """What every rank must agree on for one of XLA's own collectives: one SPMD program has the
    same op, shape and groups everywhere."""
    groups = inst.attr("replica_groups") or inst.attr("source_target_pairs") or ""
    return f"{collective_name(inst)} {inst.shape}" + (f" groups {{{groups}}}" if groups else "")


def divergence_warnings(per_rank: Mapping[int, Iterable[Module]]) -> list[HloWarning]:
    """Warning 4, for XLA's own collectives (mpinb's are compared as they run:
    mpinb.analysis.divergence): the same module name compiled on several ranks in the cell to
    sequences of XLA collectives that differ. A module compiled on some ranks only is not a
    finding: the others may have taken it from JAX's cache."""
    by_name: dict[str, dict[int, list[str]]] = {}
    sources: dict[str, dict[int, list[str | None]]] = {}
    for rank, modules in per_rank.items():
        for mod in modules:
            steps = xla_collective_steps(mod)
            by_name.setdefault(base_name(mod.name), {})[rank] = [sig for sig, _ in steps]
            sources.setdefault(base_name(mod.name), {})[rank] = [src for _, src in steps]
    out = []
    for name, seqs in sorted(by_name.items()):
        if len(seqs) > 1 and any(seqs.values()):
            out.extend(_first_difference(name, seqs, sources[name]))
    return out


def xla_collective_steps(module: Module) -> list[tuple[str, str | None]]:
    """(signature, source line) of each of XLA's own collectives of a module, in scheduled order."""
    return [(xla_collective_signature(inst), module.source(inst)) for name in module.order
            for inst in [module.instructions[name]] if inst.opcode in XLA_COLLECTIVES]


def _first_difference(name: str, seqs: dict[int, list[str]], sources: dict[int, list[str | None]]
                      ) -> list[HloWarning]:
    """The first collective where a rank's sequence differs from the lowest rank's, with the
    source line each of the two compiled there."""
    ranks = sorted(seqs)
    ref = seqs[ranks[0]]
    for r in ranks[1:]:
        if seqs[r] == ref:
            continue
        common = min(len(ref), len(seqs[r]))
        pos = next((i for i in range(common) if ref[i] != seqs[r][i]), common)
        a, a_src = _step(ref, sources[ranks[0]], pos)
        b, b_src = _step(seqs[r], sources[r], pos)
        facts = CompiledApart(name, pos + 1, ranks[0], r, a, b, a_src, b_src, len(ref), len(seqs[r]))
        return [HloWarning("divergent", None, name, f"collective #{pos + 1}", facts)]  # two sources: none here
    return []


def _step(seq: list[str], sources: list[str | None], pos: int) -> tuple[str | None, str | None]:
    return (seq[pos], sources[pos]) if pos < len(seq) else (None, None)


def base_name(module_name: str) -> str:
    """'module_0004.jit_f' -> 'jit_f' (dump file prefixes differ between ranks)."""
    return re.sub(r"^module_\d+\.", "", module_name)


def analyze(per_rank_texts: Mapping[int, Sequence[tuple[str, str]]]) -> list[HloWarning]:
    """All warnings for {rank: [(module name, optimized HLO text), ...]}."""
    modules = {rank: [parse_module(text, base_name(name)) for name, text in items]
               for rank, items in per_rank_texts.items()}
    warnings = []
    for rank in sorted(modules):
        for mod in modules[rank]:
            warnings.extend(layout_warnings(mod, rank))
    warnings.extend(divergence_warnings(modules))
    return warnings


