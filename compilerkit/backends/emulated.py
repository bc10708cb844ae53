"""Emulated big-endian backends: `target="s390x"` (IBM Z, z13) and `target="ppc64"` (POWER,
ELFv1, pwr8), compiled by llvmlite on any host and run in the Unicorn emulator.

Kernel IR -> LLVM IR with the target's triple and data layout (taken from LLVM's own target
machine, never typed in) -> the same new-pass-manager pipeline as the host -> an ELF object
(`reloc="static"`, `codemodel="small"`: what `elf_loader` links) -> an `EmulatedMachine`.
The "asm" stage is the target's assembly.

Byte order (onnx-mlir issue 2851): codegen emits every constant as an `i8` array of its bytes
in the target's order (big-endian here: numpy converts them); inputs cross into the emulator as
big-endian bytes and outputs come back the same way, converted to native numpy arrays.
`HostBytesEmitter` is the buggy variant, built on purpose (the same `i8` arrays, but of the
host's little-endian bytes, as onnx-mlir does when cross-compiling):
`mlsys_workbench.experiments.endianness.compile_with_host_bytes` compiles with it so a
notebook can show what goes wrong.

Every run is bounded: `session.timeout_s` (wall clock) and `session.max_instructions` (None
turns the count off; counting costs about half the emulation speed) are plain attributes, and
a runaway kernel raises `EmulationLimit` naming the limit. Assumes Unicorn 2.1 (see
emulator.py for what it can execute: z13, pwr9; pwr8 is used because Unicorn faults on the
pwr9 `lxvwsx` that LLVM emits for splats).
"""

from __future__ import annotations

import threading

import llvmlite.binding as llvm
import numpy as np

from compilerkit.backends.base import Backend, Target, init_llvm, run_default_pipeline, without_lsr
from compilerkit.backends.emulator import (  # noqa: F401
    EmulatedMachine,
    EmulationFault,
    EmulationLimit,
    check_limits,
)
from compilerkit.codegen.emit import ENTRY, Emitter
from compilerkit.runtime import check_inputs, raise_for_status

# name -> (triple, cpu, LLVM data-layout vector width in f32 lanes)
TARGETS = {
    "s390x": ("s390x-ibm-linux", "z13", 4),  # z13 vector facility: 128-bit registers
    # VSX, 128-bit. Not pwr9: Unicorn faults on the ISA 3.0 splat load (lxvwsx) LLVM emits.
    "ppc64": ("powerpc64-unknown-linux-gnu", "pwr8", 4),
}
# LLVM target features turned off per target. s390x: the high-word facility, whose rotate-
# then-insert-low instruction Unicorn 2.1 (QEMU 5.0's s390x) gets wrong (RISBLG r5, r3, 0, 31,
# 32 left 0x80000040_00000000 in r5 for r3 = 0xfffffffd_80000040: the bits went to the high
# word, the low word came out 0). LLVM parks values in high words under register pressure at
# -O2/-O3, so such code computed garbage in silence: an int32 Div returned zeros or divided
# by a wrong divisor (a divide exception). Without the facility LLVM spills to the stack.
FEATURES = {"s390x": "-high-word", "ppc64": ""}
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_INSTRUCTIONS = None  # time limit only: counting halves emulation speed


def emulated_target(name: str) -> Target:
    """The Target for "s390x" or "ppc64"; the data layout is the one LLVM reports."""
    init_llvm(all_targets=True)
    triple, cpu, width = TARGETS[name]
    tm = llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, features=FEATURES[name])
    return Target(name, triple, str(tm.target_data), "big", width, cpu, FEATURES[name])


class EmulatedBackend(Backend):
    code_stage = "asm"

    def __init__(self, name: str, timeout_s: float | None = None,
                 max_instructions: int | None = DEFAULT_MAX_INSTRUCTIONS):
        # None: DEFAULT_TIMEOUT_S as it is now (read per backend, so a test suite on a busy
        # machine can make it a larger safety net in one place).
        timeout_s = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
        check_limits(timeout_s, max_instructions)  # ValueError now, not at the first run
        self.target = emulated_target(name)
        self.timeout_s = timeout_s
        self.max_instructions = max_instructions

    def machine(self, opt_level: int):
        t = self.target
        # static + small: absolute addresses and the relocations elf_loader implements.
        return llvm.Target.from_triple(t.triple).create_target_machine(
            cpu=t.cpu, features=t.features, opt=opt_level, reloc="static", codemodel="small")

    def optimize(self, llvm_ir: str, opt_level: int):
        mod = llvm.parse_assembly(llvm_ir)
        mod.verify()
        if opt_level > 0:
            # The host pipeline (host.py), for the target machine: same passes, same options.
            run_default_pipeline(self.machine(opt_level), opt_level, mod)
        return str(mod), mod

    def assembly(self, mod, opt_level: int = 3) -> str:
        with without_lsr():
            return self.machine(opt_level).emit_assembly(mod)

    def object_code(self, mod, opt_level: int = 3) -> bytes:
        with without_lsr():
            return self.machine(opt_level).emit_object(mod)

    def session(self, mod, inputs, outputs, opt_level: int = 3):
        return EmulatedSession(self.target.name, self.object_code(mod, opt_level), inputs,
                               outputs, timeout_s=self.timeout_s,
                               max_instructions=self.max_instructions)


class S390xBackend(EmulatedBackend):
    def __init__(self, **kw):
        super().__init__("s390x", **kw)


class Ppc64Backend(EmulatedBackend):
    def __init__(self, **kw):
        super().__init__("ppc64", **kw)


def _big(dtype) -> np.dtype:
    return np.dtype(dtype).newbyteorder(">")


class EmulatedSession:
    """One EmulatedMachine per compiled model; its buffers are allocated once. Thread-safe:
    runs take turns on the machine (a lock), as Unicorn runs one call at a time.

    Lifetime: the session owns its machine (an emulator instance: tens of MiB of address
    space). `close()` frees it after the run in progress; dropping the session frees it
    at once (EmulatedMachine's finalizer), also after a run stopped by `EmulationLimit`.
    A run after close() is a RuntimeError."""

    def __init__(self, arch, obj: bytes, inputs, outputs, timeout_s=DEFAULT_TIMEOUT_S,
                 max_instructions=DEFAULT_MAX_INSTRUCTIONS):
        check_limits(timeout_s, max_instructions)
        self.arch, self.obj = arch, obj
        self.inputs, self.outputs = inputs, outputs
        self.timeout_s, self.max_instructions = timeout_s, max_instructions
        self._lock = threading.Lock()
        self.last_seconds = None  # emulated wall time of the latest run
        sizes = [int(np.prod(s, dtype=np.int64)) * np.dtype(d).itemsize
                 for _, s, d in list(inputs) + list(outputs)]
        probe = EmulatedMachine(arch, obj, heap_bytes=1 << 16)
        try:
            # The arena size is what the compiled code says, asked of the emulated machine.
            self.arena_bytes = int(self._call(probe, ENTRY + "_arena_bytes", [])["result"])
        finally:
            probe.close()  # before the second instance takes its address space
        need = sum(s + 64 for s in sizes) + self.arena_bytes + 64 + 8 * (len(sizes) + 1) + 4096
        self.machine = EmulatedMachine(arch, obj, heap_bytes=need)
        m = self.machine
        self.addresses = [m.alloc(max(s, 1)) for s in sizes]
        self.arena_address = m.alloc(self.arena_bytes) if self.arena_bytes else 0
        pointers = self.addresses + [self.arena_address]
        self.pointer_array = m.alloc(8 * len(pointers), align=8)
        m.write(self.pointer_array, np.array(pointers, dtype=">u8").tobytes())

    def _call(self, machine, function, args):
        return machine.call(function, args, max_instructions=self.max_instructions,
                            timeout_s=self.timeout_s)

    def run(self, *arrays):
        ins = check_inputs(arrays, self.inputs)  # before anything is emulated
        with self._lock:
            if self.machine.closed:
                raise RuntimeError("this compiled model was closed: its emulator is freed; "
                                   "compile it again")
            return self._run(ins)

    def close(self) -> None:
        """Free the emulator instance once the run in progress returns (idempotent)."""
        with self._lock:
            self.machine.close()

    def message(self, status: int) -> str | None:
        """The compiled main_graph_check_message(status), read from the emulated image."""
        m = self.machine
        address = int(self._call(m, ENTRY + "_check_message", [status])["result"])
        if not address:
            return None
        text = bytearray()
        while len(text) < 4096 and (not text or text[-1]):
            text += m.read(address + len(text), 1)  # byte by byte: never past the image
        return bytes(text).rstrip(b"\0").decode("utf-8", "replace")

    def _run(self, ins):
        m = self.machine
        for a, address in zip(ins, self.addresses, strict=False):
            m.write(address, a.astype(_big(a.dtype)).tobytes())
        # main_graph(buffers, num_threads): no threads here, krnl.parallel loops run serially.
        result = self._call(m, ENTRY, [self.pointer_array, 1])
        self.last_seconds = result["seconds"]
        raise_for_status(int(result["result"]), self.message)
        outs = []
        for (_, shape, dtype), address in zip(self.outputs, self.addresses[len(ins):],
                                                   strict=True):
            n = int(np.prod(shape, dtype=np.int64))
            raw = m.read(address, n * np.dtype(dtype).itemsize)
            outs.append(np.frombuffer(raw, dtype=_big(dtype)).astype(dtype).reshape(shape))
        return outs


# ---- the onnx-mlir 2851 failure mode, built on purpose ------------------------------------------

class HostBytesEmitter(Emitter):
    """Codegen that writes every constant in the *host's* byte order (little-endian, ONNX
    raw_data's order) whatever the target, which is what a cross-compiler does when it copies
    raw_data into the image. On a big-endian target every multi-byte constant then reads
    byte-swapped. The only difference from the right codegen is the byte order used."""

    constant_byte_order = "little"


def hexdump(data: bytes, width: int = 16, limit: int = 64) -> str:
    """`xxd`-style lines for the first `limit` bytes."""
    lines = []
    for off in range(0, min(len(data), limit), width):
        chunk = data[off:off + width]
        lines.append(f"{off:08x}  {chunk.hex(' ')}")
    return "\n".join(lines)


def locate(obj: bytes, data: bytes):
    """(section name, offset in it) of the first occurrence of `data` in an ELF object's
    allocated data sections, or None: where a constant's bytes ended up."""
    import io

    from elftools.elf.elffile import ELFFile

    for section in ELFFile(io.BytesIO(obj)).iter_sections():
        if section["sh_type"] == "SHT_NOBITS" or "data" not in section.name:
            continue
        at = section.data().find(data)
        if at >= 0:
            return section.name, at
    return None


def section_bytes(obj: bytes, name: str, offset: int = 0, size: int = 64) -> bytes:
    """`size` bytes of section `name` from `offset`."""
    import io

    from elftools.elf.elffile import ELFFile

    return ELFFile(io.BytesIO(obj)).get_section_by_name(name).data()[offset:offset + size]
