"""Run big-endian machine code (s390x, ppc64) inside the Unicorn emulator.

An `EmulatedMachine` maps a loaded ELF image (see elf_loader), a stack and a heap into Unicorn,
and calls functions with the target's C calling convention: integer/pointer arguments in
registers (s390x r2-r6, ppc64 r3-r10), the rest on the stack, the return address pointing at a
stop address.  Every call runs under an instruction budget and a wall-clock limit; a runaway
kernel raises `EmulationLimit` instead of hanging a notebook, and a bad memory access raises
`EmulationFault` naming the address and the program counter.

`memset`, `memcpy` and `memmove`, which LLVM may call for loops it recognises, are provided as
stubs: a hook does the copy in Python and the stub's own return instruction returns.

CPU setup assumes Unicorn 2.1.x (tested with 2.1.4).  s390x: control register 0 enables the
vector facility and the PSW selects 64-bit addressing.  ppc64: Unicorn's default CPU, a POWER10,
runs in real mode (no address translation) with MSR SF (64-bit), FP, VEC, VSX and HV
(hypervisor) set; HV needs a workaround, see `_force_msr`.  Code is expected from llvmlite for
`powerpc64-unknown-linux-gnu` (ELFv1); Unicorn runs code for -mcpu up to z13 and pwr8 (most
pwr9 code runs too, but not the ISA 3.0 `lxvwsx` splat LLVM emits for compiled models).
"""

from __future__ import annotations

import contextlib
import ctypes
import struct
import time
import weakref
from dataclasses import dataclass

from unicorn import (
    UC_ARCH_PPC,
    UC_ARCH_S390X,
    UC_ERR_EXCEPTION,
    UC_ERR_INSN_INVALID,
    UC_HOOK_CODE,
    UC_HOOK_MEM_INVALID,
    UC_MEM_FETCH_UNMAPPED,
    UC_MEM_WRITE_PROT,
    UC_MEM_WRITE_UNMAPPED,
    UC_MODE_BIG_ENDIAN,
    UC_MODE_PPC64,
    Uc,
    UcError,
)
from unicorn import ppc_const as ppc
from unicorn import s390x_const as s390x

from .base import reserve_address_space
from .elf_loader import Image, load_object

PAGE = 0x1000
CODE_BASE = 0x0010_0000
STUBS_GAP = 0x1000  # stubs sit just after the image, well inside a 24-bit branch's reach
STACK_BASE = 0x4000_0000
STACK_SIZE = 8 << 20
HEAP_BASE = 0x8000_0000
STOP = 0x3000_0000  # return address of every call: emulation stops when PC reaches it
TCG_BUFFER = 64 << 20
CALL_TIMEOUT_S = 60.0  # EmulatedMachine.call's wall-clock limit when it is given none
# The newest llvm -mcpu whose code Unicorn 2.1 runs: z14's vector-enhancements (vfasb...) and
# POWER10's prefixed instructions (pli...) are not implemented.
NEWEST_CPU = {"s390x": "z13", "ppc64": "pwr8"}
MSR_SF, MSR_HV, MSR_VEC, MSR_VSX, MSR_FP = 1 << 63, 1 << 60, 1 << 25, 1 << 23, 1 << 13


class EmulationLimit(RuntimeError):
    """The instruction budget or the time limit ran out before the function returned."""


class EmulationFault(RuntimeError):
    """The emulated code faulted; the message names the fault: an out-of-bounds access (with
    its address), an integer divide exception, or an illegal instruction."""


def check_limits(timeout_s, max_instructions) -> None:
    """ValueError unless `timeout_s` is a positive, finite number of seconds and
    `max_instructions` is None (no count) or a positive integer."""
    import math
    import numbers

    if isinstance(timeout_s, bool) or not isinstance(timeout_s, numbers.Real) or not (
            math.isfinite(timeout_s) and timeout_s > 0):
        raise ValueError(f"timeout_s must be a positive, finite number of seconds, got "
                         f"{timeout_s!r}")
    if max_instructions is not None and (
            isinstance(max_instructions, bool) or not isinstance(max_instructions, numbers.Integral)
            or max_instructions < 1):
        raise ValueError(f"max_instructions must be None (no instruction count) or a positive "
                         f"integer, got {max_instructions!r}")


# s390x divide instructions (they raise a fixed-point-divide program exception on a zero
# divisor or an overflowing quotient): first byte, or first two bytes, or E3 + last byte.
S390X_DIVIDES = {"1d": "DR", "5d": "D", "b90d": "DSGR", "b91d": "DSGFR", "b987": "DLGR",
                 "b997": "DLR", "e30d": "DSG", "e31d": "DSGF", "e387": "DLG", "e397": "DL"}


@dataclass(frozen=True)
class Abi:
    arch: int
    mode: int
    arg_registers: tuple[int, ...]
    return_instruction: bytes  # what each library stub executes after its hook ran
    nop: bytes  # placed at the stop address: an invalid opcode there faults before any hook
    overflow_offset: int  # where the first stack-passed argument lives, from the stack pointer
    red_zone: int  # bytes the caller reserves below the stack pointer's initial value


ABIS = {
    "s390x": Abi(
        arch=UC_ARCH_S390X, mode=UC_MODE_BIG_ENDIAN,
        arg_registers=tuple(getattr(s390x, f"UC_S390X_REG_R{i}") for i in range(2, 7)),
        return_instruction=bytes.fromhex("07fe"),  # br %r14
        nop=bytes.fromhex("0700"),  # bcr 0,0
        overflow_offset=160, red_zone=160,  # the 160-byte register save area
    ),
    "ppc64": Abi(
        arch=UC_ARCH_PPC, mode=UC_MODE_PPC64 | UC_MODE_BIG_ENDIAN,
        arg_registers=tuple(getattr(ppc, f"UC_PPC_REG_{i}") for i in range(3, 11)),
        return_instruction=bytes.fromhex("4e800020"),  # blr
        nop=bytes.fromhex("60000000"),  # ori 0,0,0
        overflow_offset=48 + 8 * 8, red_zone=288,  # ELFv1 parameter save area after 8 regs
    ),
}
LIBRARY = ("memset", "memcpy", "memmove")


def _pages(size: int) -> int:
    return (size + PAGE - 1) // PAGE * PAGE


# Address space a Unicorn instance takes besides the translation buffer and the memory mapped
# for the guest (QEMU's CPU state, page tables, softmmu TLBs; measured about 20 MiB for both
# architectures), with room to spare: reserve_address_space() asks for it all up front.
UNICORN_OVERHEAD = 48 << 20


def _weak_hook(method):
    """`method` (bound) for a Unicorn hook without a strong reference to its object: the Uc
    holds its hooks, so a bound method made a cycle machine -> Uc -> hook -> machine that
    only the garbage collector freed (an instance's address space stayed taken until then)."""
    ref = weakref.WeakMethod(method)

    def hook(*args):
        bound = ref()
        return bound(*args) if bound is not None else False

    return hook


def _close_uc(uc, hooks: list) -> None:
    """Free a Unicorn instance now: its hooks first (each holds the Uc: a cycle), then the
    handle, through the finalizer the binding registered (Unicorn 2.1's; where a binding has
    none, the Uc goes when its last reference does, now that the cycle is gone)."""
    for handle in hooks:
        with contextlib.suppress(UcError, KeyError):
            uc.hook_del(handle)
    hooks.clear()
    uc._hook_exception = None  # its traceback would hold the Uc too
    finalizer = getattr(uc, "_Uc__finalizer", None)
    if finalizer is not None:
        finalizer()


class EmulatedMachine:
    """One emulator instance holding one compiled object, reusable across calls.

    Lifetime: the Unicorn instance (its translation buffer and the mapped image, stack and
    heap: about TCG_BUFFER + UNICORN_OVERHEAD + heap of address space) is freed by `close()`
    or as soon as the machine is dropped (weakref.finalize; nothing in it refers back to the
    machine, so no garbage collection is needed). After close(), using the machine is a
    RuntimeError. Creating one when the address space is short is a MemoryError."""

    def __init__(self, arch: str, obj: bytes, heap_bytes: int = 64 << 20):
        if arch not in ABIS:
            raise ValueError(f"unknown emulated architecture {arch!r}; known: {sorted(ABIS)}")
        self.arch, self.abi = arch, ABIS[arch]
        self._hooks: list = []
        self._uc = None
        reserve_address_space(TCG_BUFFER + UNICORN_OVERHEAD + STACK_SIZE + _pages(heap_bytes)
                              + 2 * _pages(len(obj)), f"an emulated {arch} machine")
        uc = Uc(self.abi.arch, self.abi.mode)
        self._finalizer = weakref.finalize(self, _close_uc, uc, self._hooks)
        self._finalizer.atexit = False  # as lifetimes.NativeOwner: not during shutdown
        self._uc = uc
        try:
            self._setup(obj, heap_bytes)
        except BaseException:
            self.close()  # now: the traceback may keep this half-made machine for long
            raise

    def _setup(self, obj: bytes, heap_bytes: int) -> None:
        # Unicorn reserves 1 GiB of address space for translated code by default; the kernels
        # are small, and tests build many machines in one process.
        self.uc.ctl_set_tcg_buffer_size(TCG_BUFFER)
        # CPU model, ppc64: keep Unicorn's default, a POWER10 (a server core with VSX, which
        # code built for -mcpu=pwr8 needs).  Do NOT call ctl_set_cpu_model: in Unicorn 2.1.x an
        # explicit UC_CPU_PPC64_* value indexes the 32-bit CPU table (unicorn issue #1779), so
        # it yields an embedded 32-bit core on which MSR[SF] cannot be set and `std` is illegal.
        # Lay out the image once to learn its size, then place the library stubs after it.
        probe = load_object(obj, CODE_BASE, {name: 0 for name in LIBRARY})
        stubs_at = CODE_BASE + _pages(len(probe.data)) + STUBS_GAP
        self.stubs = {name: stubs_at + 16 * i for i, name in enumerate(LIBRARY)}
        self.image: Image = load_object(obj, CODE_BASE, self.stubs)
        code_size = _pages(stubs_at + 16 * len(LIBRARY) - CODE_BASE)
        self.uc.mem_map(CODE_BASE, code_size)
        self.uc.mem_write(CODE_BASE, bytes(self.image.data))
        for address in self.stubs.values():
            self.uc.mem_write(address, self.abi.return_instruction)
        self.uc.mem_map(STOP & ~(PAGE - 1), PAGE)
        self.uc.mem_write(STOP, self.abi.nop * 8)
        # A hook at the stop address ends emulation. (Passing the stop address itself as
        # `until` makes Unicorn's s390x raise an exception on the return branch, so `until`
        # points a little past it and is never reached.)
        hooks = self._hooks
        hooks.append(self.uc.hook_add(UC_HOOK_CODE, lambda uc, *_: uc.emu_stop(), begin=STOP,
                                      end=STOP))
        self.uc.mem_map(STACK_BASE, STACK_SIZE)
        self.heap_size = _pages(heap_bytes)
        self.uc.mem_map(HEAP_BASE, self.heap_size)
        self.heap_used = 0
        hooks.append(self.uc.hook_add(UC_HOOK_CODE, _weak_hook(self._library_call),
                                      begin=stubs_at, end=stubs_at + 16 * len(LIBRARY)))
        self._bad_access = None  # (kind, address) of the latest unmapped access (ppc64)
        hooks.append(self.uc.hook_add(UC_HOOK_MEM_INVALID, _weak_hook(self._record_bad_access)))
        self._prepare_cpu()

    @property
    def uc(self) -> Uc:
        if self._uc is None:
            raise RuntimeError(f"this emulated {self.arch} machine was closed")
        return self._uc

    @property
    def closed(self) -> bool:
        return self._uc is None

    def close(self) -> None:
        """Free the Unicorn instance now (idempotent); not while a call runs on it."""
        self._uc = None
        self._finalizer()

    # -- memory ---------------------------------------------------------------------------
    def alloc(self, nbytes: int, align: int = 64) -> int:
        start = (self.heap_used + align - 1) // align * align
        if start + nbytes > self.heap_size:
            raise MemoryError(f"emulated heap of {self.heap_size} bytes cannot hold "
                              f"{nbytes} more bytes ({start} in use)")
        self.heap_used = start + nbytes
        return HEAP_BASE + start

    def reset_heap(self) -> None:
        self.heap_used = 0

    def write(self, address: int, data: bytes) -> None:
        self.uc.mem_write(address, bytes(data))

    def read(self, address: int, nbytes: int) -> bytes:
        return bytes(self.uc.mem_read(address, nbytes))

    # -- calls ----------------------------------------------------------------------------
    def call(self, function: str, args: list[int], max_instructions: int | None = 2_000_000_000,
             timeout_s: float | None = None) -> dict:
        """Call `function` with integer/pointer `args`; `timeout_s` None: CALL_TIMEOUT_S.

        Returns {"seconds": wall time, "result": the integer return register, unsigned}.
        Counting instructions costs time (Unicorn then hooks every instruction: about half the
        speed); `max_instructions=None` turns the count off and leaves only the time limit.
        """
        entry, toc = self.image.entry(function)
        regs = self.abi.arg_registers
        sp = STACK_BASE + STACK_SIZE - 4096
        overflow = args[len(regs):]
        sp -= _pages(8 * len(overflow) + self.abi.red_zone + 256)
        for i, value in enumerate(overflow):
            self.uc.mem_write(sp + self.abi.overflow_offset + 8 * i,
                              struct.pack(">Q", value & (2**64 - 1)))
        for register, value in zip(regs, args, strict=False):
            self.uc.reg_write(register, value & (2**64 - 1))
        if self.arch == "s390x":
            self.uc.reg_write(s390x.UC_S390X_REG_R15, sp)
            self.uc.reg_write(s390x.UC_S390X_REG_R14, STOP)
        else:
            self.uc.mem_write(sp, bytes(8))  # back chain: the outermost frame
            self.uc.reg_write(ppc.UC_PPC_REG_1, sp)
            self.uc.reg_write(ppc.UC_PPC_REG_2, toc)
            self.uc.reg_write(ppc.UC_PPC_REG_LR, STOP)
        timeout_s = CALL_TIMEOUT_S if timeout_s is None else timeout_s
        check_limits(timeout_s, max_instructions)
        counting = bool(max_instructions)
        if counting != getattr(self, "_counting", counting):
            # Unicorn counts instructions with code instrumented at translation time: blocks
            # translated by an uncounted call would run uncounted (the budget silently ignored),
            # so the translation cache is dropped whenever counting is switched.
            self.uc.ctl_flush_tb()
        self._counting = counting
        start = time.perf_counter()
        self._bad_access = None
        try:
            self.uc.emu_start(entry, STOP + 16, timeout=max(1, int(timeout_s * 1e6)),
                                count=max_instructions or 0)
        except UcError as error:
            pc = self.uc.reg_read(s390x.UC_S390X_REG_PC if self.arch == "s390x"
                                  else ppc.UC_PPC_REG_PC)
            if self.arch == "ppc64" and error.errno == UC_ERR_EXCEPTION:
                pc -= 4  # Unicorn's ppc64 leaves the pc after an illegal instruction
            raise EmulationFault(f"{self.arch} emulation of {function} faulted at pc={pc:#x}: "
                                 f"{self._name_fault(error, pc)}") from None
        seconds = time.perf_counter() - start
        pc = self.uc.reg_read(s390x.UC_S390X_REG_PC if self.arch == "s390x" else ppc.UC_PPC_REG_PC)
        if pc != STOP:
            limit = (f"time limit of {timeout_s} s" if seconds >= timeout_s * 0.99
                     else f"budget of {max_instructions} instructions")
            raise EmulationLimit(f"{self.arch} emulation of {function} stopped at pc={pc:#x}: "
                                 f"the {limit} ran out before it returned")
        # The integer return value sits in the first argument register (s390x r2, ppc64 r3).
        return {"seconds": seconds, "result": self.uc.reg_read(regs[0])}

    # -- internals ------------------------------------------------------------------------
    def _prepare_cpu(self) -> None:
        if self.arch == "s390x":
            # CR0 bit 45 enables the additional floating-point registers and bit 46 the vector
            # facility (IBM numbers bits from the most significant, 0..63).
            cr0 = self.uc.reg_read(s390x.UC_S390X_REG_CR0)
            self.uc.reg_write(s390x.UC_S390X_REG_CR0, cr0 | (1 << (63 - 45)) | (1 << (63 - 46)))
            # The PSW starts in 24-bit addressing mode; the extended (bit 31) and basic (bit 32)
            # addressing bits together select 64-bit mode, which Linux code assumes.
            pswm = self.uc.reg_read(s390x.UC_S390X_REG_PSWM)
            self.uc.reg_write(s390x.UC_S390X_REG_PSWM, pswm | (1 << (63 - 31)) | (1 << (63 - 32)))
        else:
            # 64-bit mode (SF), floating point (FP), VMX (VEC) and VSX available, and
            # hypervisor state (HV): see _force_msr.
            self._force_msr(MSR_SF | MSR_HV | MSR_FP | MSR_VEC | MSR_VSX)

    def _force_msr(self, want: int) -> None:
        """Set the ppc64 MSR to `want`, the hypervisor bit (HV) included.

        Unicorn resets its POWER10 with MSR[HV] clear (unicorn PR #2340) and its register
        write cannot set HV.  Without HV, a real-mode access (translation off, as here) goes
        through the partition's virtual real-mode area, which nothing sets up: the very first
        instruction fetch raises a hypervisor instruction storage interrupt (Unicorn interrupt
        70, UC_ERR_EXCEPTION).  With HV set, real mode maps effective to physical addresses
        one to one.  So: find where the saved CPU context holds the MSR (the offsets whose
        value follows two different register writes), set HV there, restore the context, and
        write the MSR once more so Unicorn recomputes the flags derived from it.
        """
        reg = ppc.UC_PPC_REG_MSR
        self.uc.reg_write(reg, want ^ MSR_FP)
        before, msr_before = bytes(self.uc.context_save()), self.uc.reg_read(reg)
        self.uc.reg_write(reg, want)
        context = self.uc.context_save()
        after, msr_after = bytes(context), self.uc.reg_read(reg)
        packed_before, packed_after = (struct.pack("=Q", v) for v in (msr_before, msr_after))
        offsets = [o for o in range(0, len(after) - 7, 8)
                   if before[o:o + 8] == packed_before and after[o:o + 8] == packed_after]
        address = ctypes.cast(context.context, ctypes.c_void_p).value
        for offset in offsets:
            ctypes.memmove(address + offset, struct.pack("=Q", msr_after | MSR_HV), 8)
        self.uc.context_restore(context)
        self.uc.reg_write(reg, want)
        msr = self.uc.reg_read(reg)
        if (msr & want) != want:
            raise RuntimeError(f"could not set the ppc64 MSR to {want:#x} (reads {msr:#x}); "
                               f"this Unicorn build lays out its CPU state differently")

    def _record_bad_access(self, uc, access, address, size, value, user_data) -> bool:
        kind = {UC_MEM_WRITE_UNMAPPED: "write", UC_MEM_FETCH_UNMAPPED: "instruction fetch",
                UC_MEM_WRITE_PROT: "write"}.get(access, "read")
        self._bad_access = (kind, address, size)
        return False  # not handled: the emulation stops with the error

    def _mapped(self, address: int) -> bool:
        return any(lo <= address <= hi for lo, hi, _ in self.uc.mem_regions())

    def _name_fault(self, error: UcError, pc: int) -> str:
        """What went wrong, in words: Unicorn reports every s390x program exception (an
        addressing exception, a divide exception, an illegal instruction) as one
        UC_ERR_EXCEPTION, so the faulting instruction is decoded to tell them apart."""
        if self._bad_access is not None:
            kind, address, size = self._bad_access
            return (f"out-of-bounds {kind} of {size} bytes at address {address:#x} (outside "
                    f"every mapped buffer) [{error}]")
        if self.arch == "s390x" and error.errno == UC_ERR_EXCEPTION:
            try:
                word = self.read(pc, 6)
            except UcError:
                word = b""
            if word:
                divide = (S390X_DIVIDES.get(word[:1].hex()) or S390X_DIVIDES.get(word[:2].hex())
                          or (S390X_DIVIDES.get("e3" + word[5:6].hex()) if word[0] == 0xE3
                              else None))
                if divide:
                    return (f"integer divide exception in {divide} (division by zero, or a "
                            f"quotient that overflows such as INT_MIN / -1) [{error}]")
                address = self._s390x_operand_address(word)
                if address is not None and not self._mapped(address):
                    return (f"out-of-bounds access at address {address:#x} (outside every "
                            f"mapped buffer) [{error}]")
        return f"{error}{self._explain(error, pc)}"

    def _s390x_operand_address(self, word: bytes):
        """The storage operand address of an RX, RXY, RXE, VRX, RS, RSY, SI or SIL instruction
        (the formats LLVM uses for loads and stores), or None for other formats."""
        op = word[0]
        reg = lambda k: self.uc.reg_read(getattr(s390x, f"UC_S390X_REG_R{k}")) if k else 0  # noqa: E731
        x2, b2 = word[1] & 0xF, word[2] >> 4
        d12 = ((word[2] & 0xF) << 8) | word[3]
        if 0x40 <= op <= 0x7F:  # RX: op r1,d2(x2,b2)
            return (reg(x2) + reg(b2) + d12) & (2**64 - 1)
        if 0x90 <= op <= 0x9F or op == 0xE5:  # SI / RS (MVI, STM...), SIL (MVHI...): d1(b1)
            return (reg(b2) + d12) & (2**64 - 1)
        if op in (0xE3, 0xEB) or (op == 0xED and word[5] in (0x64, 0x65, 0x66, 0x67)):
            dh = word[4] - 256 if word[4] & 0x80 else word[4]  # RXY / RSY: 20-bit signed
            index = reg(x2) if op != 0xEB else 0
            return (index + reg(b2) + (dh << 12) + d12) & (2**64 - 1)
        if op in (0xE7, 0xED):  # VRX / RXE: 12-bit displacement
            return (reg(x2) + reg(b2) + d12) & (2**64 - 1)
        return None

    def _explain(self, error: UcError, pc: int) -> str:
        """Name the instruction behind a CPU exception: usually one Unicorn does not model."""
        if error.errno not in (UC_ERR_EXCEPTION, UC_ERR_INSN_INVALID):
            return ""
        try:
            word = self.read(pc, 6 if self.arch == "s390x" else 4).hex()
        except UcError:
            return ""
        return (f"; instruction bytes {word}: an illegal instruction or one newer than Unicorn "
                f"models (it runs up to {NEWEST_CPU[self.arch]}: compile with that -mcpu or "
                f"older)")

    def _library_call(self, uc, address, size, user_data) -> None:
        name = next(n for n, a in self.stubs.items() if a == address)
        regs = self.abi.arg_registers
        dest, second, count = (uc.reg_read(r) for r in regs[:3])
        if name == "memset":
            uc.mem_write(dest, bytes([second & 0xFF]) * count)
        else:  # memcpy, memmove: reading everything first makes overlap safe
            uc.mem_write(dest, bytes(uc.mem_read(second, count)))
        # The C functions return `dest` in the first argument/return register.
        uc.reg_write(regs[0], dest)
