"""One generated function's frame: its calling convention, where each loop variable lives and
how a buffer's address is found.

    int64_t fn(void **buffers, int64_t num_threads)   // rdi: the model's pointer array
                                                      // (inputs, outputs, arena); rsi

Every function (the entry, one per ONNX node; not the shared matmul kernels and parallel
chunks) takes the same arguments as LLVM's `main_graph`, so loopnest functions and
LLVM-compiled fallback functions are called alike. Loop variables live in stack slots
(`[rsp + 8k]`): nests are at most a few loops deep and the hot innermost loop keeps its state
in registers. Buffers: model arguments are read from the array, arena buffers are the arena
pointer plus their planned offset, constants are absolute addresses of arrays the compiled
model keeps alive, views (krnl.reshape) are their source.
"""

from __future__ import annotations

from iced_x86 import Code, Instruction

from compilerkit.dialects import krnl
from compilerkit.loopnest.affine import Affine, Unsupported
from compilerkit.loopnest.asm import CALLEE_SAVED, GPR, Asm

RAX, RDX, RDI, RSP = GPR["rax"], GPR["rdx"], GPR["rdi"], GPR["rsp"]


class Frame:
    def __init__(self, buffers, node: str):
        self.asm = Asm()
        self.buffers = buffers  # Buffers: memref value -> how to find its address
        self.node = node
        self.slots: dict = {}
        # A chunk function of a parallel nest runs iterations [first, last) of one loop:
        # (its induction variable, the slots holding its bounds); `parallel_used` records
        # that the loop was emitted through loop_begin (else the chunk would be wrong).
        self.parallel = None
        self.parallel_used = False

    def prologue(self) -> None:
        for r in CALLEE_SAVED:
            self.asm.op("PUSH_R64", GPR[r])
        self._frame_at = len(self.asm.code)  # `sub rsp, frame` goes here once it is known

    def epilogue(self) -> None:
        a = self.asm
        n = len(self.slots)
        frame_bytes = 8 * n + (8 if n % 2 == 0 else 0)  # keeps rsp 16-byte aligned
        a.code.insert(self._frame_at, Instruction.create_reg_i32(Code.SUB_RM64_IMM32, RSP,
                                                                 frame_bytes))
        a.op("ADD_RM64_IMM32", RSP, frame_bytes)
        for r in reversed(CALLEE_SAVED):
            a.op("POP_R64", GPR[r])
        a.op("XOR_R32_RM32", GPR_32("eax"), GPR_32("eax"))
        a.op("VEX_VZEROUPPER")
        a.op("RETNQ")

    # ---- loop variables ---------------------------------------------------------------------
    def slot(self, iv) -> int:
        if iv not in self.slots:
            self.slots[iv] = 8 * len(self.slots)
        return self.slots[iv]

    def iv_mem(self, iv):
        return Asm.mem(RSP, disp=self.slot(iv))

    def loop_begin(self, iv, lo: int) -> int:
        a = self.asm
        top = a.label()
        if self.parallel is not None and iv is self.parallel[0]:
            # this thread's chunk: [lo_slot, hi_slot), possibly empty
            _, lo_at, hi_at, skip = self.parallel
            self.parallel_used = True
            a.op("MOV_R64_RM64", RAX, Asm.mem(RSP, disp=lo_at))
            a.op("CMP_R64_RM64", RAX, Asm.mem(RSP, disp=hi_at))
            a.jump("JGE_REL32_64", skip)
            a.op("MOV_RM64_R64", self.iv_mem(iv), RAX)
        else:
            a.op("MOV_RM64_IMM32", self.iv_mem(iv), lo)
        a.bind(top)
        return top

    def loop_end(self, iv, top: int, hi: int, step: int = 1) -> None:
        a = self.asm
        a.op("ADD_RM64_IMM32", self.iv_mem(iv), step)
        if self.parallel is not None and iv is self.parallel[0]:
            a.op("MOV_R64_RM64", RAX, Asm.mem(RSP, disp=self.parallel[2]))
            a.op("CMP_RM64_R64", self.iv_mem(iv), RAX)
            a.jump("JL_REL32_64", top)
            a.bind(self.parallel[3])
            return
        a.op("CMP_RM64_IMM32", self.iv_mem(iv), hi)
        a.jump("JL_REL32_64", top)

    def affine(self, e: Affine, reg, scratch=RAX) -> None:
        """reg = e (64-bit), reading loop variables from their slots."""
        a = self.asm
        check_imm(e.const, self.node)
        a.op("MOV_RM64_IMM32", reg, e.const)
        for v, c in e.terms:
            check_imm(c, self.node)
            a.op("IMUL_R64_RM64_IMM32", scratch, self.iv_mem(v), c)
            a.op("ADD_R64_RM64", reg, scratch)

    def base(self, mem, reg) -> None:
        """reg = the address of memref `mem`'s first element."""
        self.buffers.base(self.asm, mem, reg)


def check_imm(x: int, node: str) -> None:
    if not -(1 << 31) <= x < (1 << 31):
        raise Unsupported(f"node {node!r}: a constant {x} beyond 32 bits")


def GPR_32(name: str):
    from iced_x86 import Register
    return getattr(Register, name.upper())


class Buffers:
    """Where each memref of the Kernel IR function lives (see the module docstring)."""

    def __init__(self, args, n_args: int, globals_: dict):
        self.index = {a: k for k, a in enumerate(args)}
        self.n_args = n_args
        self.globals = globals_  # krnl.global result -> absolute address
        self.offsets = {}  # krnl.alloc result -> arena offset
        self.views = {}  # krnl.reshape result -> source

    def note(self, op) -> None:
        if isinstance(op, krnl.AllocOp):
            if op.offset is None:
                raise ValueError("krnl.alloc without an arena offset: run buffer planning")
            self.offsets[op.res] = op.offset.value.data
        elif isinstance(op, krnl.ReshapeOp):
            self.views[op.res] = op.source

    def root(self, mem):
        while mem in self.views:
            mem = self.views[mem]
        return mem

    def known(self, mem) -> bool:
        m = self.root(mem)
        return m in self.index or m in self.offsets or m in self.globals

    def base(self, a: Asm, mem, reg) -> None:
        m = self.root(mem)
        if m in self.index:
            a.op("MOV_R64_RM64", reg, Asm.mem(RDI, disp=8 * self.index[m]))
        elif m in self.offsets:
            a.op("MOV_R64_RM64", reg, Asm.mem(RDI, disp=8 * self.n_args))
            if self.offsets[m]:
                a.op("ADD_RM64_IMM32", reg, self.offsets[m])
        elif m in self.globals:
            a.op("MOV_R64_IMM64", reg, self.globals[m])
        else:
            raise Unsupported(f"a buffer defined inside a nest ({m})")

    def writable(self, mem) -> bool:
        return self.root(mem) not in self.globals
