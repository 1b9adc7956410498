"""Reading XLA's optimized HLO text: the shapes and layouts of arrays, the instructions of each
computation, and the source locations in its metadata (stack frames). Pure text: no JAX.

Layout braces are minor-to-major: ``f32[4,64,64]{2,1,0}`` is row-major.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

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


_METADATA_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def _int(pattern: str, text: str) -> int:
    m = re.search(pattern, text)
    return int(m.group(1)) if m else 0


def _read_table_row(tables: dict, section: str, stripped: str) -> None:
    """One row of a metadata table (file names, function names, locations, stack frames)."""
    key, _, rest = stripped.partition(" ")
    if section in ("FileNames", "FunctionNames"):
        value = rest.strip('"')
    elif section == "FileLocations":
        value = (_int(r"file_name_id=(\d+)", rest), _int(r"function_name_id=(\d+)", rest), _int(r"\bline=(\d+)", rest))
    else:
        value = (_int(r"file_location_id=(\d+)", rest), _int(r"parent_frame_id=(\d+)", rest))
    tables[section][int(key)] = value


def _parse_instruction(line: str, head, computation: str) -> Instruction | None:
    """An instruction line (its name matched by ``head``), or None if it is not one."""
    rest = line[head.end():]
    shape = _balanced(rest, 0, "(", ")") if rest.startswith("(") else rest.split(" ", 1)[0]
    after = rest[len(shape):].lstrip()
    op_m = re.match(r"([\w\-]+)\(", after)
    if not op_m:
        return None
    args = _balanced(after, op_m.end() - 1, "(", ")")
    attrs = after[op_m.end() - 1 + len(args):].lstrip(", ")
    return Instruction(head.group(1), shape, op_m.group(1), re.findall(r"%([\w.\-]+)", args), attrs, computation)


def _resolve_frames(tables: dict) -> dict[int, tuple[str, int, str, int]]:
    """frame id -> (file, line, function, parent id) from the metadata tables."""
    resolved = {}
    for fid, (loc, parent) in tables["StackFrames"].items():
        file_id, func_id, line_no = tables["FileLocations"].get(loc, (0, 0, 0))
        # parent_frame_id is the parent's id + 1; 0 means "no parent" (XLA's printing)
        resolved[fid] = (tables["FileNames"].get(file_id, "?"), line_no,
                         tables["FunctionNames"].get(func_id, "?"), parent - 1)
    return resolved


def parse_module(text: str, name: str | None = None) -> Module:
    """A module's computations, instructions (in textual order) and stack frames."""
    if name is None:
        m = re.match(r"HloModule\s+([\w.\-]+)", text)
        name = m.group(1) if m else "module"
    tables: dict[str, dict] = {section: {} for section in _METADATA_TABLES}
    section, current = None, None
    insts: dict[str, Instruction] = {}
    order: list[str] = []
    comps: dict[str, list[str]] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in _METADATA_TABLES:
            section = stripped
        elif section and stripped and stripped[0].isdigit():
            _read_table_row(tables, section, stripped)
        elif not stripped:
            section = None
        elif (head := _COMP_HEAD.match(stripped)) and "=" not in stripped.split("(")[0]:
            section, current = None, head.group(2)
            comps[current] = []
        elif stripped == "}":
            current = None
        elif current is not None and (head := _INST_HEAD.match(line)):
            inst = _parse_instruction(line, head, current)
            if inst is not None:
                insts[inst.name] = inst
                order.append(inst.name)
                comps[current].append(inst.name)
    return Module(name, insts, order, comps, _resolve_frames(tables))


def marked_lines(text: str, only_custom_calls: bool = False) -> list[tuple[str, bool]]:
    """(line, whether it has a non-row-major layout) for each line of HLO text, such layouts
    marked ``<<...>>`` (for the ``%mpijax hlo`` view)."""
    out = []
    for line in text.splitlines():
        if only_custom_calls and "custom-call" not in line:
            continue
        found = []

        def mark(m, found=found):
            arrays = parse_arrays(m.group(0))
            if arrays and not arrays[0].row_major:
                found.append(m.group(0))
                return f"<<{m.group(0)}>>"
            return m.group(0)

        out.append((_ARRAY.sub(mark, line), bool(found)))
    return out


def human_bytes(n: int) -> str:
    """'16 B', '6.0 KiB', '16.0 MiB'."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
