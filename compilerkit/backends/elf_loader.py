"""Load a relocatable ELF object (what llvmlite's `emit_object` returns) into a flat memory
image, as a static linker and loader would: lay out the allocated sections, resolve symbols,
apply relocations, and find function entry points.

It exists for the emulated big-endian backends: an s390x or ppc64 object compiled on an x86 host
is placed into the Unicorn emulator's memory.  Supported: 64-bit big-endian ELF for EM_S390 and
EM_PPC64 (ELFv1 ABI: function symbols name descriptors in `.opd`, data is reached through the
TOC).  Undefined symbols (LLVM may call `memset`/`memcpy` for loops it recognises) are bound to
addresses the caller supplies.  Anything else, an unknown relocation type included, is refused
with an error naming it, never guessed.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field

from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile
from elftools.elf.enums import ENUM_RELOC_TYPE_PPC64, ENUM_RELOC_TYPE_S390X
from elftools.elf.relocation import RelocationSection

MACHINES = {"EM_S390": "s390x", "EM_PPC64": "ppc64"}
SKIPPED_SECTIONS = (".eh_frame", ".note", ".comment", ".debug")
# The ELFv1 TOC pointer sits 32 KiB into the TOC, so signed 16-bit offsets reach all of 64 KiB.
PPC64_TOC_BIAS = 0x8000


class ElfLoadError(ValueError):
    """The object cannot be loaded; the message names the section, symbol or relocation."""


@dataclass
class Image:
    """A loaded object: bytes to map at `base`, symbol addresses, and what calls need."""

    arch: str
    base: int
    data: bytearray
    symbols: dict[str, int] = field(default_factory=dict)
    sections: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (start, size)
    toc: int | None = None  # ppc64 TOC pointer (r2)

    def entry(self, name: str) -> tuple[int, int | None]:
        """(code address, TOC) for calling function `name`."""
        if name not in self.symbols:
            functions = ", ".join(sorted(self.symbols)) or "none"
            raise ElfLoadError(f"no symbol {name!r} in the object (symbols: {functions})")
        address = self.symbols[name]
        if self.arch == "ppc64" and self.in_section(address, ".opd"):
            code, toc = struct.unpack_from(">QQ", self.data, address - self.base)
            return code, toc
        return address, self.toc

    def in_section(self, address: int, name: str) -> bool:
        start, size = self.sections.get(name, (0, 0))
        return start <= address < start + size


def _align(value: int, alignment: int) -> int:
    alignment = max(alignment, 1)
    return (value + alignment - 1) // alignment * alignment


def load_object(data: bytes, base: int, externals: dict[str, int] | None = None) -> Image:
    """Lay out and relocate the ELF object `data` at address `base`."""
    externals = externals or {}
    try:
        elf = ELFFile(io.BytesIO(data))
    except Exception as error:
        raise ElfLoadError(f"not an ELF object: {error}") from error
    arch = MACHINES.get(elf["e_machine"])
    if arch is None or elf.elfclass != 64 or elf.little_endian:
        raise ElfLoadError(f"unsupported object: {elf['e_machine']}, {elf.elfclass}-bit, "
                           f"{'little' if elf.little_endian else 'big'}-endian "
                           f"(want 64-bit big-endian s390x or ppc64)")
    image = Image(arch=arch, base=base, data=bytearray())
    # 1. Lay out every allocated section.
    placed: dict[int, int] = {}
    offset = 0
    for index, section in enumerate(elf.iter_sections()):
        allocated = section["sh_flags"] & SH_FLAGS.SHF_ALLOC
        if not allocated or section.name.startswith(SKIPPED_SECTIONS):
            continue
        offset = _align(offset, section["sh_addralign"])
        placed[index] = base + offset
        image.sections[section.name] = (base + offset, section["sh_size"])
        contents = (bytes(section["sh_size"]) if section["sh_type"] == "SHT_NOBITS"
                    else section.data())
        image.data += bytes(offset - len(image.data))  # alignment padding
        image.data += contents
        offset += section["sh_size"]
    if arch == "ppc64":
        nowhere = (base + len(image.data), 0)  # no TOC data: any value will do
        toc_start, _ = image.sections.get(".toc", image.sections.get(".got", nowhere))
        image.toc = toc_start + PPC64_TOC_BIAS
    # 2. Symbols.
    symtab = elf.get_section_by_name(".symtab")
    if symtab is None:
        raise ElfLoadError("object has no symbol table")
    addresses = []
    for symbol in symtab.iter_symbols():
        index = symbol["st_shndx"]
        if isinstance(index, int) and index in placed:
            address = placed[index] + symbol["st_value"]
        elif index == "SHN_UNDEF" and symbol.name == ".TOC." and image.toc is not None:
            address = image.toc  # the linker-defined TOC base
        elif index == "SHN_UNDEF" and symbol.name:
            if symbol.name not in externals:
                raise ElfLoadError(f"undefined symbol {symbol.name!r}: the emulated machine "
                                   f"provides only {sorted(externals)}")
            address = externals[symbol.name]
        elif index == "SHN_ABS":
            address = symbol["st_value"]
        else:
            address = None  # a symbol of a skipped section, or the null symbol
        addresses.append(address)
        if symbol.name and address is not None and symbol["st_info"]["type"] in ("STT_FUNC",
                                                                                 "STT_OBJECT"):
            image.symbols[symbol.name] = address
    # 3. Relocations.
    apply = _RELOCATORS[arch]
    relocation_sections = [s for s in elf.iter_sections()
                           if isinstance(s, RelocationSection) and s["sh_info"] in placed]
    # ppc64 `bl f` is resolved through f's descriptor in .opd, so the descriptors must hold
    # their relocated code addresses before .text is relocated.
    relocation_sections.sort(key=lambda s: elf.get_section(s["sh_info"]).name != ".opd")
    for section in relocation_sections:
        target = elf.get_section(section["sh_info"]).name
        for rel in section.iter_relocations():
            # Symbol 0 is "no symbol": S = 0 (R_PPC64_TOC, for one, needs none).
            symbol_address = addresses[rel["r_info_sym"]] if rel["r_info_sym"] else 0
            if symbol_address is None:
                name = symtab.get_symbol(rel["r_info_sym"]).name
                raise ElfLoadError(f"relocation in {target} against unplaced symbol {name!r}")
            place = placed[section["sh_info"]] + rel["r_offset"]
            apply(image, rel["r_info_type"], place, symbol_address + rel["r_addend"], target)
    return image


def _put(image: Image, place: int, fmt: str, value: int) -> None:
    struct.pack_into(fmt, image.data, place - image.base, value)


def _get(image: Image, place: int, fmt: str) -> int:
    return struct.unpack_from(fmt, image.data, place - image.base)[0]


def _fits(value: int, bits: int, what: str) -> int:
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise ElfLoadError(f"{what}: value {value:#x} does not fit in {bits} bits")
    return value


_RELOCATION_NAMES = {arch: {number: name for name, number in enum.items() if name != "_default_"}
                     for arch, enum in (("s390x", ENUM_RELOC_TYPE_S390X),
                                        ("ppc64", ENUM_RELOC_TYPE_PPC64))}


def _describe(arch: str, kind: int, place: int, section: str) -> str:
    name = _RELOCATION_NAMES[arch].get(kind, "unknown")
    return f"{arch} relocation {kind} ({name}) in {section} at {place:#x}"


def _s390x(image: Image, kind: int, place: int, value: int, section: str) -> None:
    # S + A is `value`; P is `place`. Types from the s390x ELF ABI supplement.
    what = _describe("s390x", kind, place, section)
    if kind == 22:  # R_390_64
        _put(image, place, ">Q", value & (2**64 - 1))
    elif kind == 4:  # R_390_32
        _put(image, place, ">I", value & 0xFFFFFFFF)
    elif kind in (5, 23):  # R_390_PC32, R_390_PC64
        bits = 32 if kind == 5 else 64
        _put(image, place, ">i" if kind == 5 else ">q", _fits(value - place, bits, what))
    elif kind in (19, 20):  # R_390_PC32DBL, R_390_PLT32DBL: halfword-scaled PC-relative
        _put(image, place, ">i", _fits((value - place) >> 1, 32, what))
    elif kind in (16, 17):  # R_390_PC16DBL, R_390_PLT16DBL
        _put(image, place, ">h", _fits((value - place) >> 1, 16, what))
    else:
        raise ElfLoadError(f"unsupported {what}")


def _ha(value: int) -> int:
    return ((value + 0x8000) >> 16) & 0xFFFF


def _ppc64(image: Image, kind: int, place: int, value: int, section: str) -> None:
    what = _describe("ppc64", kind, place, section)
    toc = image.toc
    if kind == 38:  # R_PPC64_ADDR64
        _put(image, place, ">Q", value & (2**64 - 1))
    elif kind == 51:  # R_PPC64_TOC: the TOC base itself (in function descriptors)
        _put(image, place, ">Q", toc)
    elif kind == 1:  # R_PPC64_ADDR32
        _put(image, place, ">I", value & 0xFFFFFFFF)
    elif kind in (26, 44):  # R_PPC64_REL32, R_PPC64_REL64
        _put(image, place, ">i" if kind == 26 else ">q", value - place)
    elif kind == 10:  # R_PPC64_REL24: `bl target`; ELFv1 calls go to the descriptor's code
        if image.in_section(value, ".opd"):
            value = struct.unpack_from(">Q", image.data, value - image.base)[0]
        offset = _fits(value - place, 26, what)
        insn = _get(image, place, ">I")
        _put(image, place, ">I", (insn & ~0x03FFFFFC & 0xFFFFFFFF) | (offset & 0x03FFFFFC))
    elif kind in (47, 48, 49, 50, 63, 64):  # TOC-relative 16-bit fields
        relative = value - toc
        field_value = {
            47: _fits(relative, 16, what) & 0xFFFF,  # R_PPC64_TOC16
            48: relative & 0xFFFF,  # R_PPC64_TOC16_LO
            49: (relative >> 16) & 0xFFFF,  # R_PPC64_TOC16_HI
            50: _ha(relative),  # R_PPC64_TOC16_HA
            63: _fits(relative, 16, what) & 0xFFFC,  # R_PPC64_TOC16_DS
            64: relative & 0xFFFC,  # R_PPC64_TOC16_LO_DS
        }[kind]
        keep = 0x0003 if kind in (63, 64) else 0  # DS-form keeps the low two opcode bits
        _put(image, place, ">H", (_get(image, place, ">H") & keep) | field_value)
    elif kind in (4, 5, 6, 39, 40, 41, 42):  # absolute 16-bit pieces of an address
        field_value = {
            4: value & 0xFFFF,  # ADDR16_LO
            5: (value >> 16) & 0xFFFF,  # ADDR16_HI
            6: _ha(value),  # ADDR16_HA
            39: (value >> 32) & 0xFFFF,  # ADDR16_HIGHER
            40: ((value + 0x8000) >> 32) & 0xFFFF,  # ADDR16_HIGHERA
            41: (value >> 48) & 0xFFFF,  # ADDR16_HIGHEST
            42: ((value + 0x8000) >> 48) & 0xFFFF,  # ADDR16_HIGHESTA
        }[kind]
        _put(image, place, ">H", field_value)
    else:
        raise ElfLoadError(f"unsupported {what}")


_RELOCATORS = {"s390x": _s390x, "ppc64": _ppc64}
