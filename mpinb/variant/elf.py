"""The sonames a shared library names in its dynamic section (DT_NEEDED, DT_SONAME), read from its
file: a library built for another MPI cannot be loaded to ask it, and loading it would bring a
second libmpi into the process. 64-bit little-endian ELF (x86-64, aarch64), what wheels carry.
"""

from __future__ import annotations

import dataclasses
import struct

_PT_LOAD, _PT_DYNAMIC = 1, 2
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_SONAME = 0, 1, 5, 14


class ELFError(ValueError):
    """The file is not a 64-bit little-endian ELF shared library with a dynamic section."""


@dataclasses.dataclass(frozen=True)
class Dynamic:
    soname: str                 # '' when the library names none
    needed: tuple[str, ...]     # DT_NEEDED, in file order


def read_dynamic(path: str) -> Dynamic:
    """The soname and needed sonames of the ELF file ``path`` (ELFError or OSError otherwise)."""
    with open(path, "rb") as fh:
        data = fh.read()
    if data[:4] != b"\x7fELF" or len(data) < 64:
        raise ELFError(f"{path}: not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ELFError(f"{path}: not a 64-bit little-endian ELF file")
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads, dynamic = [], None
    for i in range(phnum):
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == _PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        raise ELFError(f"{path}: no dynamic section")
    entries = []
    for offset in range(dynamic[0], dynamic[0] + dynamic[1] - 15, 16):
        tag, value = struct.unpack_from("<qQ", data, offset)
        if tag == _DT_NULL:
            break
        entries.append((tag, value))
    strtab_addr = next((v for t, v in entries if t == _DT_STRTAB), None)
    if strtab_addr is None:
        raise ELFError(f"{path}: no string table in the dynamic section")
    strtab = next((off + strtab_addr - vaddr for vaddr, off, size in loads if vaddr <= strtab_addr < vaddr + size),
                  None)
    if strtab is None:
        raise ELFError(f"{path}: the dynamic string table lies in no loaded segment")

    def string(index: int) -> str:
        start = strtab + index
        return data[start:data.index(b"\0", start)].decode(errors="replace")

    return Dynamic(
        soname=next((string(v) for t, v in entries if t == _DT_SONAME), ""),
        needed=tuple(string(v) for t, v in entries if t == _DT_NEEDED),
    )
