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
4. ``divergent``: ranks compiled different sequences of collectives for the same function,
   a deadlock risk.

Layout braces are minor-to-major: ``f32[4,64,64]{2,1,0}`` is row-major.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence

from .optable import AGREEMENT

#: custom-call targets that are MPI collectives (mpinb's, and mpi4jax's for comparison)
COLLECTIVE_PREFIXES = ("mpinb_", "mpi_")

_DTYPE_BYTES = {
    "pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4,
    "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16, "s4": 1, "u4": 1,
    "f8e4m3fn": 1, "f8e5m2": 1,
}
_ARRAY = re.compile(r"([a-z][a-z0-9]*)\[([0-9,]*)\](?:\{([^}]*)\})?")


@dataclasses.dataclass(frozen=True)
class Array:
    dtype: str
    dims: tuple[int, ...]
    layout: tuple[int, ...] | None  # minor-to-major; None when not printed

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n * _DTYPE_BYTES.get(self.dtype, 4)

    @property
    def row_major(self) -> bool:
        return self.layout is None or self.layout == tuple(range(len(self.dims) - 1, -1, -1))

    def __str__(self) -> str:
        dims = ",".join(map(str, self.dims))
        lay = "" if self.layout is None else "{" + ",".join(map(str, self.layout)) + "}"
        return f"{self.dtype}[{dims}]{lay}"


def parse_arrays(shape_text: str) -> list[Array]:
    """All array shapes in a (possibly tuple) HLO shape string, in order."""
    out = []
    for m in _ARRAY.finditer(shape_text):
        dtype, dims, layout = m.groups()
        if dtype in ("token",):
            continue
        dims_t = tuple(int(d) for d in dims.split(",") if d)
        lay = None
        if layout is not None:
            core = layout.split(":")[0]
            lay = tuple(int(d) for d in core.split(",") if d.strip().lstrip("-").isdigit())
        out.append(Array(dtype, dims_t, lay))
    return out


@dataclasses.dataclass
class Instruction:
    name: str
    shape: str
    opcode: str
    operands: list[str]
    attrs: str
    computation: str

    @property
    def arrays(self) -> list[Array]:
        return parse_arrays(self.shape)

    def attr(self, key: str) -> str | None:
        m = re.search(rf"\b{re.escape(key)}=(\"[^\"]*\"|\{{|[^,\s]+)", self.attrs)
        if not m:
            return None
        if m.group(1) == "{":
            start = m.end(1) - 1
            return _balanced(self.attrs, start, "{", "}")[1:-1]
        return m.group(1).strip('"')


@dataclasses.dataclass
class Module:
    name: str
    instructions: dict[str, Instruction]
    order: list[str]                       # textual (scheduled) order
    computations: dict[str, list[str]]     # computation name -> instruction names
    frames: dict[int, tuple[str, int, str, int]]  # frame id -> (file, line, function, parent id)

    def source(self, inst: Instruction, skip: Sequence[str] = ("/mpinb/", "/jax/", "/jaxlib/")) -> str | None:
        """'file:line (function)' of the innermost frame of the instruction's stack outside mpinb/JAX."""
        meta = inst.attr("metadata") or ""
        m = re.search(r'source_file="([^"]*)" source_line=(\d+)', meta)
        if m:
            return f"{m.group(1)}:{m.group(2)}"
        m = re.search(r"stack_frame_id=(\d+)", meta)
        if not m:
            return None
        frame = int(m.group(1))
        first = None
        seen = set()
        while frame in self.frames and frame not in seen:
            seen.add(frame)
            file, line, func, parent = self.frames[frame]
            where = f"{file}:{line} ({func})"
            first = first or where
            if not any(s in file for s in skip):
                return where
            frame = parent
        return first

    def producer(self, name: str) -> Instruction | None:
        return self.instructions.get(name)

    def users(self, name: str) -> list[Instruction]:
        return [i for i in self.instructions.values() if name in i.operands]


def _balanced(text: str, start: int, open_: str, close: str) -> str:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    return text[start:]


_COMP_HEAD = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_INST_HEAD = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*")


def parse_module(text: str, name: str | None = None) -> Module:
    lines = text.splitlines()
    mod_name = name
    if mod_name is None:
        m = re.match(r"HloModule\s+([\w.\-]+)", text)
        mod_name = m.group(1) if m else "module"
    files, funcs, locs, frames = {}, {}, {}, {}
    section = None
    insts: dict[str, Instruction] = {}
    order: list[str] = []
    comps: dict[str, list[str]] = {}
    current = None
    for line in lines:
        stripped = line.strip()
        if stripped in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = stripped
            continue
        if section and stripped and stripped[0].isdigit():
            key, _, rest = stripped.partition(" ")
            k = int(key)
            if section == "FileNames":
                files[k] = rest.strip('"')
            elif section == "FunctionNames":
                funcs[k] = rest.strip('"')
            elif section == "FileLocations":
                f = re.search(r"file_name_id=(\d+)", rest)
                fn = re.search(r"function_name_id=(\d+)", rest)
                ln = re.search(r"\bline=(\d+)", rest)
                locs[k] = (int(f.group(1)) if f else 0, int(fn.group(1)) if fn else 0, int(ln.group(1)) if ln else 0)
            elif section == "StackFrames":
                loc = re.search(r"file_location_id=(\d+)", rest)
                par = re.search(r"parent_frame_id=(\d+)", rest)
                frames[k] = (int(loc.group(1)) if loc else 0, int(par.group(1)) if par else 0)
            continue
        if not stripped:
            section = None
            continue
        head = _COMP_HEAD.match(stripped)
        if head and "=" not in stripped.split("(")[0]:
            section = None
            current = head.group(2)
            comps[current] = []
            continue
        if stripped == "}":
            current = None
            continue
        m = _INST_HEAD.match(line)
        if not m or current is None:
            continue
        rest = line[m.end():]
        shape = _balanced(rest, 0, "(", ")") if rest.startswith("(") else rest.split(" ", 1)[0]
        after = rest[len(shape):].lstrip()
        op_m = re.match(r"([\w\-]+)\(", after)
        if not op_m:
            continue
        opcode = op_m.group(1)
        args = _balanced(after, op_m.end() - 1, "(", ")")
        attrs = after[op_m.end() - 1 + len(args):].lstrip(", ")
        operands = re.findall(r"%([\w.\-]+)", args)
        inst = Instruction(m.group(1), shape, opcode, operands, attrs, current)
        insts[inst.name] = inst
        order.append(inst.name)
        comps[current].append(inst.name)
    resolved = {}
    for fid, (loc, parent) in frames.items():
        file_id, func_id, line_no = locs.get(loc, (0, 0, 0))
        # parent_frame_id is the parent's id + 1; 0 means "no parent" (XLA's printing)
        resolved[fid] = (files.get(file_id, "?"), line_no, funcs.get(func_id, "?"), parent - 1)
    return Module(mod_name, insts, order, comps, resolved)


# ----------------------------------------------------------------------------- warnings


TUTORIAL = "notebooks/02_debugging_transpose.ipynb"


@dataclasses.dataclass(frozen=True)
class Kind:
    """How a kind of finding is put to people: its severity, what it means, what to do."""

    severity: str    # error: gives wrong results; warning: may; info: a cost
    meaning: str
    action: str
    link: str


#: One row per kind of HLO finding; the view, the summary and the tests read it from here.
KINDS = {
    "non-row-major": Kind(
        "error", "a collective reads a buffer that is not row-major: ranks exchange scrambled data",
        "use mpinb's collectives (they pin row-major layouts) or make the buffer contiguous first",
        f"{TUTORIAL}#Reproducing-the-symptom-on-CPU:-jitted-wrong,-eager-right-(warning-1)"),
    "divergent": Kind(
        "error", "the ranks compiled different collectives: they may deadlock or mix data",
        "make every rank call the same collectives in the same order with the same shapes",
        "README.md#troubleshooting"),
    "unconstrained": Kind(
        "warning", "a custom call without layout constraints: row-major here, maybe not on GPU",
        "pin its operand and result layouts (mpinb's collectives do)",
        f"{TUTORIAL}#A-custom-call-without-layout-constraints-(warning-2)"),
    "relayout": Kind(
        "info", "XLA copies a buffer into row-major order for a collective: correct, costs a copy",
        "nothing, unless the copy is large: then transpose after the collective instead of before",
        f"{TUTORIAL}#What-XLA-compiled"),
}


#: an info finding about a copy smaller than this is put in one line (its detail one click away)
SMALL_COPY_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class HloWarning:
    kind: str        # a key of KINDS
    rank: int | None
    module: str
    instruction: str
    message: str
    source: str | None = None
    nbytes: int | None = None  # the size of what a relayout copies, where known

    def __str__(self) -> str:
        where = f" at {self.source}" if self.source else ""
        who = f"rank {self.rank}" if self.rank is not None else "ranks"
        return f"[{self.kind}] {who}, {self.module}, %{self.instruction}{where}: {self.message}"

    @property
    def severity(self) -> str:
        return KINDS[self.kind].severity

    @property
    def identity(self) -> tuple:
        """What makes two findings the same finding: equal on several ranks, or on the nested
        modules of one jitted call, it is shown once (module names and ranks left out)."""
        return (self.kind, self.instruction, self.message, self.source)

    @property
    def small(self) -> bool:
        """An info finding about a copy below SMALL_COPY_BYTES: worth one line, not a paragraph."""
        return self.severity == "info" and self.nbytes is not None and self.nbytes < SMALL_COPY_BYTES

    def brief(self) -> str:
        """The finding in one line: what is copied, how much, where; for a small one, that it
        needs nothing."""
        where = f" at {self.source}" if self.source else ""
        return f"XLA copies {_human(self.nbytes or 0)} around a collective{where}: small, nothing to do"

    def plain(self, link: bool = True) -> str:
        """The finding in plain words, without severity, rank or module: meaning, where, what to
        do (and where to read more)."""
        info = KINDS[self.kind]
        where = f" ({self.source})" if self.source else ""
        text = f"{info.meaning}{where}. {self.message}. What to do: {info.action}."
        return f"{text} See {info.link}" if link and info.link else text


def distinct(warnings) -> list[tuple[HloWarning, list[int | None]]]:
    """Each distinct finding once, with the ranks it was found on (None: found across ranks)."""
    seen: dict[tuple, tuple[HloWarning, list]] = {}
    for w in warnings:
        _, ranks = seen.setdefault(w.identity, (w, []))
        if w.rank not in ranks:
            ranks.append(w.rank)
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(seen.values(), key=lambda item: order[item[0].severity])


def is_collective(inst: Instruction) -> bool:
    target = inst.attr("custom_call_target") or ""
    return inst.opcode == "custom-call" and target.startswith(COLLECTIVE_PREFIXES)


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
        target = inst.attr("custom_call_target") or "?"
        src = module.source(inst)
        constraints = inst.attr("operand_layout_constraints")
        operands = _operand_arrays(module, inst)
        if constraints is None and operands:
            warnings.append(HloWarning(
                "unconstrained", rank, module.name, inst.name,
                f"custom call {target} has no operand layout constraints; it is row-major here by "
                "XLA:CPU's choice, another backend may hand it a transposed buffer", src))
        declared = parse_arrays(constraints) if constraints is not None else [a for _, a in operands]
        bad = [str(a) for a in declared if not a.row_major]
        bad += [f"result {a}" for a in inst.arrays if not a.row_major]
        if bad:
            warnings.append(HloWarning(
                "non-row-major", rank, module.name, inst.name,
                f"custom call {target} gets non-row-major layout(s) {', '.join(bad)}: it reads memory "
                "in an order its indices do not describe", src))
        if not is_collective(inst):
            continue
        for name, arr in operands:
            prod = module.producer(name)
            if prod is not None and _is_relayout(module, prod):
                warnings.append(HloWarning(
                    "relayout", rank, module.name, prod.name,
                    f"{prod.opcode} %{prod.name} materialises {arr} ({_human(arr.nbytes)}) "
                    f"to feed {target} (%{inst.name})", module.source(prod) or src, arr.nbytes))
        for user in module.users(inst.name):
            consumers = [user] + (module.users(user.name) if user.opcode == "get-tuple-element" else [])
            for c in consumers:
                if c.opcode != "get-tuple-element" and _is_relayout(module, c):
                    arr = c.arrays[0] if c.arrays else None
                    size = f" ({_human(arr.nbytes)})" if arr else ""
                    warnings.append(HloWarning(
                        "relayout", rank, module.name, c.name,
                        f"{c.opcode} %{c.name} relayouts the result of {target} (%{inst.name}){size}",
                        module.source(c) or src, arr.nbytes if arr else None))
    return warnings


def _shape_text(arr: Array, trailing_only: bool = False) -> str:
    dims = [str(d) for d in arr.dims]
    if trailing_only and dims:
        dims[0] = "*"
    return f"{arr.dtype}[{','.join(dims)}]"


def collective_signature(module: Module, inst: Instruction) -> str | None:
    """What every rank must agree on for this collective, as 'target dtype[shape]', by the op's
    rule in mpinb/optable.py (gather: the operand, scatter: the result, alltoallv: the trailing
    dimensions); None for point-to-point calls, which differ between ranks by design."""
    target = inst.attr("custom_call_target") or ""
    rule = AGREEMENT.get(target[len("mpinb_"):], "result") if target.startswith("mpinb_") else "result"
    if rule == "nothing":
        return None
    if rule == "result":
        arrays = inst.arrays
    else:  # the data operands: every operand but mpinb's 1-byte ordering buffer
        arrays = [a for _, a in _operand_arrays(module, inst) if not (a.dtype == "s8" and not a.dims)]
    if not arrays:
        return target
    return f"{target} {_shape_text(arrays[0], trailing_only=rule == 'trailing')}"


def collective_sequence(module: Module) -> list[str]:
    """The collectives of a module that all ranks must agree on, in scheduled order."""
    return [sig for inst in custom_calls(module) if is_collective(inst)
            for sig in [collective_signature(module, inst)] if sig is not None]


def divergence_warnings(per_rank: Mapping[int, Iterable[Module]]) -> list[HloWarning]:
    """Warning 4: the same module name compiled to collective sequences that the ranks cannot
    all complete together (a different op, dtype or shape where the op needs agreement, or a
    different number of collectives)."""
    by_name: dict[str, dict[int, list[str]]] = {}
    for rank, modules in per_rank.items():
        for mod in modules:
            by_name.setdefault(_base_name(mod.name), {})[rank] = collective_sequence(mod)
    out = []
    for name, seqs in sorted(by_name.items()):
        if len(seqs) < 2 or not any(seqs.values()):
            continue
        ranks = sorted(seqs)
        ref = seqs[ranks[0]]
        for r in ranks[1:]:
            if seqs[r] == ref:
                continue
            common = min(len(ref), len(seqs[r]))
            pos = next((i for i in range(common) if ref[i] != seqs[r][i]), common)
            a = ref[pos] if pos < len(ref) else "no further collective"
            b = seqs[r][pos] if pos < len(seqs[r]) else "no further collective"
            counts = (f"; rank {ranks[0]} compiled {len(ref)} collectives, rank {r} {len(seqs[r])}"
                      if len(ref) != len(seqs[r]) else "")
            out.append(HloWarning(
                "divergent", None, name, f"collective #{pos + 1}",
                f"at collective #{pos + 1} of {name}, rank {ranks[0]} compiled {a} but rank {r} compiled "
                f"{b}{counts}: the ranks may deadlock"))
            break
    return out


def _base_name(module_name: str) -> str:
    """'module_0004.jit_f' -> 'jit_f' (dump file prefixes differ between ranks)."""
    return re.sub(r"^module_\d+\.", "", module_name)


def analyze(per_rank_texts: Mapping[int, Sequence[tuple[str, str]]]) -> list[HloWarning]:
    """All warnings for {rank: [(module name, optimized HLO text), ...]}."""
    modules = {rank: [parse_module(text, _base_name(name)) for name, text in items]
               for rank, items in per_rank_texts.items()}
    warnings = []
    for rank in sorted(modules):
        for mod in modules[rank]:
            warnings.extend(layout_warnings(mod, rank))
    warnings.extend(divergence_warnings(modules))
    return warnings


def highlight_layouts(text: str, only_custom_calls: bool = False) -> str:
    """HLO text with non-row-major layouts marked ``<<...>>`` (for the ``%mpijax hlo`` view)."""
    out = []
    for line in text.splitlines():
        if only_custom_calls and "custom-call" not in line:
            continue

        def mark(m):
            arrays = parse_arrays(m.group(0))
            return f"<<{m.group(0)}>>" if arrays and not arrays[0].row_major else m.group(0)

        out.append(_ARRAY.sub(mark, line))
    return "\n".join(out)


def _human(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
