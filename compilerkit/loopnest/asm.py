"""A thin assembler over iced-x86: instructions are built with iced's `Instruction.create_*`
and encoded by its `BlockEncoder`, never as hand-written opcode bytes.

    a = Asm()
    top = a.label()
    a.bind(top)
    a.op("VEX_VADDPS_YMM_YMM_YMMM256", YMM[0], YMM[0], a.mem(RSI))
    a.op("DEC_RM64", RCX)
    a.jump("JNE_REL32_64", top)
    code = a.encode(rip)            # bytes; branches and RIP-relative constants resolved

Labels are instruction ids (`Instruction.ip` before encoding): iced's block encoder resolves a
branch or a RIP-relative memory operand whose target is the id of an instruction in the same
block, and picks short or near forms. Constants (`a.const(bytes)`) go into a pool after the
code, deduplicated, read RIP-relative: the code is position-independent except for the
absolute addresses it is given as immediates (weights, fallback functions).
`listing(code, rip)` disassembles with iced's formatter (Intel syntax) for `.stages["asm"]`.
"""

from __future__ import annotations

import iced_x86 as iced
from iced_x86 import Code, Instruction, MemoryOperand, Register

GPR = {name: getattr(Register, name.upper()) for name in
       ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11",
        "r12", "r13", "r14", "r15")}
YMM = [getattr(Register, f"YMM{k}") for k in range(16)]
XMM = [getattr(Register, f"XMM{k}") for k in range(16)]
CALLEE_SAVED = ("rbx", "rbp", "r12", "r13", "r14", "r15")
_CREATE: dict = {}  # (code name, which operands are memory) -> (iced constructor, Code)


def xmm_of(ymm) -> int:
    """The XMM register under a YMM register."""
    return XMM[YMM.index(ymm)]


class Asm:
    """One function's instructions, labels and constant pool."""

    def __init__(self):
        self.code: list[Instruction] = []
        self._next_label = 1
        self._pending: list[int] = []  # labels bound to the next instruction
        self._alias: dict[int, int] = {}
        self._consts: dict[bytes, int] = {}
        self._calls: list[tuple[Instruction, str]] = []  # calls to other functions, by name

    # ---- labels -----------------------------------------------------------------------------
    def label(self) -> int:
        lab = self._next_label
        self._next_label += 1
        return lab

    def bind(self, lab: int) -> None:
        self._pending.append(lab)

    def _add(self, ins: Instruction) -> None:
        if self._pending:
            first = self._pending[0]
            ins.ip = first
            for other in self._pending[1:]:
                self._alias[other] = first
            self._pending = []
        self.code.append(ins)

    # ---- operands ---------------------------------------------------------------------------
    @staticmethod
    def mem(base, index=None, scale: int = 1, disp: int = 0) -> MemoryOperand:
        if not -(1 << 31) <= disp < (1 << 31):
            raise OverflowError(f"displacement {disp} does not fit 32 bits")
        return MemoryOperand(base, index if index is not None else Register.NONE, scale, disp,
                             1 if disp else 0)

    def const(self, data: bytes) -> MemoryOperand:
        """A RIP-relative operand reading `data` (16 or 32 bytes, or 4 for a scalar) from the
        function's constant pool."""
        lab = self._consts.get(data)
        if lab is None:
            lab = self._consts[data] = self.label()
        return MemoryOperand(Register.RIP, Register.NONE, 1, lab, 8)

    # ---- instructions -----------------------------------------------------------------------
    def op(self, code: str, *operands) -> None:
        """One instruction: `code` names iced's Code (e.g. "VEX_VFMADD231PS_YMM_YMM_YMMM256"),
        operands are registers, MemoryOperands or ints (immediates, the last operand)."""
        # The key is the operands' types (int for registers and immediates): building it
        # with map() in C is a third of this call's cost with a generator.
        key = (code, *map(type, operands))
        how = _CREATE.get(key)
        if how is None:
            kinds = []
            last = len(operands) - 1
            for k, o in enumerate(operands):
                if isinstance(o, MemoryOperand):
                    kinds.append("mem")
                elif isinstance(o, bool) or not isinstance(o, int):
                    raise TypeError(f"{code}: operand {o!r}")
                elif k == last and code.split("_")[-1].startswith("IMM"):
                    kinds.append("i64" if code.endswith("IMM64") else "i32")
                else:
                    kinds.append("reg")
            create = getattr(Instruction, "create_" + "_".join(kinds)) if kinds \
                else Instruction.create
            how = _CREATE[key] = (create, getattr(Code, code))
        create, value = how
        if self._pending:
            self._add(create(value, *operands))
        else:
            self.code.append(create(value, *operands))

    def jump(self, code: str, lab: int) -> None:
        self._add(Instruction.create_branch(getattr(Code, code), lab))

    def address(self, reg, name: str) -> None:
        """reg = the address of another generated function (resolved by name when encoding)."""
        ins = Instruction.create_reg_i64(Code.MOV_R64_IMM64, reg, 0)
        self._add(ins)
        self._calls.append((ins, name))

    def call(self, name: str) -> None:
        """A near call to another generated function, resolved by name when encoding."""
        ins = Instruction.create_branch(Code.CALL_REL32_64, 0)
        self._add(ins)
        self._calls.append((ins, name))

    # ---- output -----------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.code)

    def finish(self, symbols: dict | None = None) -> list[Instruction]:
        """The instructions with the constant pool appended, label aliases and calls (to
        `symbols`: name -> address) resolved."""
        for ins, name in self._calls:
            if ins.code == Code.MOV_R64_IMM64:
                ins.immediate64 = symbols[name]
            else:
                ins.near_branch64 = symbols[name]
        if self._pending:
            self._add(Instruction.create(Code.INT3))  # a label at the very end
        out = list(self.code)
        if self._alias:
            for ins in out:
                t = ins.near_branch_target if ins.is_jcc_short_or_near or ins.is_jmp_short_or_near \
                    or ins.is_call_near else None
                if t in self._alias:
                    ins.near_branch64 = self._alias[t]
        for data, lab in self._consts.items():
            for k in range(0, len(data), 16):
                chunk = data[k:k + 16]
                d = getattr(Instruction, f"create_declare_byte_{len(chunk)}")(*chunk)
                if k == 0:
                    d.ip = lab
                out.append(d)
        return out

    def pool_bytes(self) -> int:
        return sum(len(d) for d in self._consts)

    def max_bytes(self) -> int:
        """An upper bound on the encoded size (15 bytes is x86's longest instruction)."""
        return 15 * (len(self.code) + 1) + self.pool_bytes()

    def encode(self, rip: int, symbols: dict | None = None) -> bytes:
        enc = iced.BlockEncoder(64)
        enc.add_many(self.finish(symbols))
        return enc.encode(rip)


_FORMATTER = None


def listing(code: bytes, rip: int, n_code: int | None = None) -> list[str]:
    """Disassembly of `code` loaded at `rip` (its first `n_code` bytes: the pool is data)."""
    global _FORMATTER
    if _FORMATTER is None:
        _FORMATTER = iced.Formatter(iced.FormatterSyntax.INTEL)
        _FORMATTER.first_operand_char_index = 8
    dec = iced.Decoder(64, code[:n_code] if n_code is not None else code, ip=rip)
    return [f"\t{_FORMATTER.format(ins)}" for ins in dec]


__all__ = ["Asm", "GPR", "YMM", "XMM", "CALLEE_SAVED", "listing", "xmm_of"]
